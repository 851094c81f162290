#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A test app of the five-app tests: COUNT event requests INTERVAL ms apart through AsyncClient.request(), with a
coroutine refresh handler fetching from the test backend.

Usage: track_app.py GROUP PORT COUNT INTERVAL_MS [--hang] [--until-generation N]
  --hang  the refresh handler claims the refresh, prints "claimed generation G (REASON) for a lease of L ms;
          hanging" and never ends; the app stays alive after its requests until killed.
  --until-generation N  after its requests the app stays until the group's token is at generation N or later, so
          that no app leaves while the one that claimed a refresh still fetches (a claimant that goes away hands
          the refresh on, and the group fetches again).
Prints "refresh for generation G (REASON): fetched", "request N: S[, retried: S]", and last
"requests=N ok=N failed=N refreshes=N". Never a token.
"""
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from asyncio_app import post  # noqa: E402  (the example's few lines of HTTP)

import exponea_auth  # noqa: E402

STREAM = "/track/u/v1/customers/events?stream_id=five"


async def main(group: str, port: int, count: int, interval: float, hang: bool, until: int) -> int:
    refreshes = ok = failed = 0
    async with exponea_auth.AsyncClient(group) as auth:
        tokens = auth.token_refreshes()

        @auth.set_refresh_handler
        async def fetch(refresh: exponea_auth.Refresh) -> str | None:
            nonlocal refreshes
            if hang:
                print(f"claimed generation {refresh.generation} ({refresh.reason}) for a lease of "
                      f"{round(refresh.lease * 1000)} ms; hanging")
                await asyncio.Event().wait()
            response = await post(port, f"/token?generation={refresh.generation}")
            if response.status != 200:
                print(f"refresh for generation {refresh.generation} ({refresh.reason}): failed")
                return None
            refreshes += 1
            print(f"refresh for generation {refresh.generation} ({refresh.reason}): fetched")
            return json.loads(response.content)["token"]

        for n in range(1, count + 1):
            statuses = []

            async def send(authorization: str | None) -> object:
                response = await post(port, STREAM, authorization)
                statuses.append(response.status)
                return response

            await auth.request(send)
            print(f"request {n}: " + ", retried: ".join(map(str, statuses)))
            if statuses[-1] == 200:
                ok += 1
            else:
                failed += 1
            if n < count:
                await asyncio.sleep(interval)  # the app's pace, not an order between processes
        if hang:
            print(f"requests={count} ok={ok} failed={failed} refreshes={refreshes}")
            await asyncio.Event().wait()
        current = await auth.get_token()
        if current is None or current.generation < until:
            async for event in tokens:  # subscribed before the read above: nothing set between them is missed
                if event.generation >= until:
                    break
        print(f"requests={count} ok={ok} failed={failed} refreshes={refreshes}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--hang"]
    until = 0
    if "--until-generation" in args:
        at = args.index("--until-generation")
        until = int(args[at + 1])
        del args[at:at + 2]
    sys.exit(asyncio.run(main(args[0], int(args[1]), int(args[2]), int(args[3]) / 1000, "--hang" in sys.argv,
                              until)))
