# SPDX-License-Identifier: Apache-2.0
"""Five asyncio apps of one group against the real daemon and the test backend: one fetch per expiry for all of
them, a claimant that dies replaced at once, and a 401 retried once with the new token."""
import asyncio
import re

from conftest import TESTS, TOKEN_HEADER, App

APP = TESTS / "apps" / "track_app.py"
FETCH = re.compile(r"refresh for generation ([0-9]+) \(([A-Za-z]+)\): fetched")


def fetches(app: App) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for line in app.lines if (m := FETCH.fullmatch(line))]


def test_one_fetch_per_expiry_and_every_request_answered_with_the_current_token(daemon, start_backend):
    # Tokens valid for 62 s are in their last minute (expiredSoon) 2 s after they are minted, and the daemon asks
    # the group for the next one: 160 requests 50 ms apart (8 s or more) see three expiries or so.
    backend = start_backend(lifetime=62)

    async def run() -> list[App]:
        apps = [await App.start(APP, ["shop", str(backend.port), "160", "50"], daemon, f"app {i}") for i in range(5)]
        statuses = [await app.exit(timeout=120) for app in apps]
        for app, status in zip(apps, statuses):
            assert status == 0, f"{app.name} exited {status}: " + str([l for l in app.lines if not l.endswith(": 200")])
        return apps

    apps = asyncio.run(run())
    for app in apps:
        requests = [line for line in app.lines if line.startswith("request ")]
        assert len(requests) == 160, app.output
        # The stream answers 401 to any token but the newest: every request ended 200, so each carried the current
        # token or was retried once with it.
        assert all(line.endswith(": 200") for line in requests), app.output
        assert app.lines[-1] == f"requests=160 ok=160 failed=0 refreshes={len(fetches(app))}"
    stats = backend.stats()
    # One fetch per generation across the five apps: the backend counted none twice.
    assert all(n == 1 for n in stats["fetchesPerGeneration"].values()), stats
    all_fetches = [f for app in apps for f in fetches(app)]
    assert len(all_fetches) == stats["fetches"]
    assert {g for g, _ in all_fetches} == set(stats["fetchesPerGeneration"])
    assert [g for g, reason in all_fetches if reason == "notProvided"] == ["0"]
    assert sum(1 for _, reason in all_fetches if reason == "expiredSoon") >= 2, all_fetches
    assert stats["expired"] == 0 and stats["forged"] == 0
    assert stats["accepted"] == 5 * 160
    assert not any(TOKEN_HEADER in app.output for app in apps)


def test_a_killed_claimant_is_replaced_at_once_not_after_its_lease(start_daemon, start_backend):
    # A lease far longer than the test: a claimant that hangs alive holds its claim 60 s.
    daemon = start_daemon("--refresh-lease", "60")
    backend = start_backend()

    async def run() -> None:
        hanging = await App.start(APP, ["shop", str(backend.port), "1", "100", "--hang"], daemon, "hanging")
        others: list[App] = []
        try:
            claimed = await hanging.line(lambda line: line.startswith("claimed generation "))
            assert claimed.endswith("for a lease of 60000 ms; hanging"), claimed
            generation = claimed.split()[2]
            assert backend.stats()["fetches"] == 0

            # Four more apps, a request every 250 ms. Barrier: each one's first request failed (403, no token came
            # within the retry wait), so each had subscribed and its claim was refused while the hanging app held it.
            others = [await App.start(APP, ["shop", str(backend.port), "8", "250"], daemon, f"app {i}")
                      for i in range(4)]
            for app in others:
                await app.line(lambda line: line == "request 1: 403")
            assert backend.stats()["fetches"] == 0

            hanging.kill()
            await hanging.process.wait()
            # The claim ends with the claimant's connection, and one other app fetches for the same generation.
            # The one wall-clock bound: 5 s, far below the 60 s lease, far above the milliseconds it takes.

            async def first_fetch(app: App) -> str:
                return await app.line(lambda line: FETCH.fullmatch(line) is not None)

            waits = [asyncio.ensure_future(first_fetch(app)) for app in others]
            done, pending = await asyncio.wait(waits, timeout=5, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            assert done, "no app fetched within 5 s of the claimant's death: " + str([a.output for a in others])
            line = next(iter(done)).result()
            assert FETCH.fullmatch(line)[1] == generation, line

            # Each app's first request failed (the barrier above); every later one got the new token.
            for app in others:
                assert await app.exit() == 1, app.output
                assert app.lines[-1].startswith("requests=8 ok=7 failed=1 "), app.output
            assert [f for app in others for f in fetches(app)] == [(generation, FETCH.fullmatch(line)[2])]
            assert backend.stats()["fetchesPerGeneration"] == {generation: 1}
            assert not any(TOKEN_HEADER in app.output for app in [hanging, *others])
        finally:
            for app in [hanging, *others]:
                app.kill()
                await app.process.wait()

    asyncio.run(run())


def test_a_401_is_reported_and_retried_once_with_the_token_one_app_fetched(daemon, start_backend):
    backend = start_backend()

    async def run() -> list[App]:
        first = await App.start(APP, ["shop", str(backend.port), "1", "0"], daemon, "first")
        assert await first.exit() == 0, first.output  # the group's token, generation 1
        backend.reject_next()
        # Each app stays until the fetched token (generation 2) is set: none leaves while the claimant fetches.
        apps = [await App.start(APP, ["shop", str(backend.port), "1", "0", "--until-generation", "2"], daemon,
                                f"app {i}") for i in range(5)]
        for app in apps:
            assert await app.exit() == 0, app.output
        return apps

    apps = asyncio.run(run())
    requests = [line for app in apps for line in app.lines if line.startswith("request ")]
    # One request got the backend's 401 whatever it carried; it was reported, one app fetched for generation 1,
    # and it was sent once more. A request that carried the token just superseded is retried once too.
    assert "request 1: 401, retried: 200" in requests, requests
    assert all(line in ("request 1: 200", "request 1: 401, retried: 200") for line in requests), requests
    stats = backend.stats()
    assert stats["rejectedOnPurpose"] == 1
    assert stats["fetchesPerGeneration"] == {"0": 1, "1": 1}, stats
    assert [f for app in apps for f in fetches(app)] == [("1", "invalid")]
