# SPDX-License-Identifier: Apache-2.0
"""python/examples/asyncio_app.py, the man page's complete asyncio app, against the daemon and the backend."""
import asyncio

from conftest import EXAMPLES, TOKEN_HEADER, App


def run_to_the_end(program, port: int, daemon) -> App:
    """Runs an example app of group shop against the test backend on `port` until it exits, which must be with 0."""

    async def run() -> App:
        app = await App.start(program, ["shop", str(port)], daemon)
        assert await app.exit() == 0, app.output
        return app

    return asyncio.run(run())


def test_the_asyncio_example_retries_a_403_and_a_401_with_the_token_its_handler_fetched(daemon, start_backend):
    backend = start_backend()
    app = run_to_the_end(EXAMPLES / "asyncio_app.py", backend.port, daemon)
    assert app.lines == [
        "preflight: NOT_PROVIDED, generation 0, no token",
        "refresh for generation 0 (notProvided): fetched",
        "request 1: 403, retried: 200",
        "backend rejects the next request",
        "refresh for generation 1 (invalid): fetched",
        "request 2: 401, retried: 200",
        "flush: no events pending",
        "anonymize: 1 app(s) asked to flush, 0 unconfirmed",
        "cleared: anonymize",
        "token refreshes heard: generations 1, 2",
    ], app.output
    stats = backend.stats()
    assert stats["fetchesPerGeneration"] == {"0": 1, "1": 1}
    assert stats["rejectedOnPurpose"] == 1 and stats["accepted"] == 2
    assert TOKEN_HEADER not in app.output


def test_the_readme_shows_the_example_app_as_it_is():
    readme = (EXAMPLES.parent / "README.md").read_text()
    shown = readme.split("## A complete asyncio app", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert shown == (EXAMPLES / "asyncio_app.py").read_text()


def test_the_synchronous_example_python_app_retries_a_403_and_a_401(daemon, start_backend):
    # libexponea-auth/examples/python-app.py, on the synchronous Client (Tests/CLibraryTests/ExampleAppTests.swift
    # runs it too, with Debian's python3).
    backend = start_backend()
    app = run_to_the_end(EXAMPLES.parents[1] / "libexponea-auth" / "examples" / "python-app.py", backend.port, daemon)
    assert app.lines == [
        "preflight: notProvided, generation 0, no token",
        "refresh for generation 0 (notProvided): fetched",
        "request 1: 403, retried with generation 1: 200",
        "backend rejects the next request: 200",
        "refresh for generation 1 (invalid): fetched",
        "request 2: 401, retried with generation 2: 200",
    ], app.output
    stats = backend.stats()
    assert stats["fetchesPerGeneration"] == {"0": 1, "1": 1}
    assert stats["rejectedOnPurpose"] == 1 and stats["accepted"] == 2
    assert TOKEN_HEADER not in app.output
