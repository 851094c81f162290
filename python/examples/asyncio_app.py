#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An asyncio app that tracks events into a Bloomreach stream with its app group's token, through the
exponea_auth package: the refresh handler (a coroutine) fetching from the integrator's backend, the SDK's request
policy (the pre-flight check, one retry after a 401 or 403), the token-refreshed events, and the flush and
cleared handlers of an anonymize. The HTTP client is the app's own: here a few lines of asyncio streams, in an
app of yours aiohttp or httpx.

Usage: asyncio_app.py GROUP BACKEND_PORT
  Against the local test backend (libexponea-auth/examples/test-backend.py): checks the token, sends an event
  request without one (403, then the handler fetches one and the request is retried), makes the backend reject
  the next request, sends another (401, refreshed, retried), and anonymizes the group. Prints one line per step,
  never a token; exits 0 when both retries were answered 200.
"""
import asyncio
import json
import sys

import exponea_auth

STREAM = "/track/u/v1/customers/events?stream_id=example"


class Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.content = body


async def post(port: int, path: str, authorization: str | None = None) -> Response:
    """POSTs {} to the backend with HTTP/1.0, and reads the answer to its end."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = f"POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        if authorization:
            head += f"Authorization: {authorization}\r\n"
        writer.write(head.encode() + b"\r\n{}")
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return Response(int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2])


async def main(group: str, port: int) -> int:
    cleared = asyncio.Event()
    async with exponea_auth.AsyncClient(group) as auth:

        # Runs in one app of the group only: the one that claims the refresh. Returns the token, or None when
        # the fetch failed (the claim is released at once, for the next request to claim).
        @auth.set_refresh_handler
        async def fetch_token(refresh: exponea_auth.Refresh) -> str | None:
            response = await post(port, f"/token?generation={refresh.generation}")
            fetched = response.status == 200
            print(f"refresh for generation {refresh.generation} ({refresh.reason}): "
                  f"{'fetched' if fetched else 'failed'}")
            return json.loads(response.content)["token"] if fetched else None

        # Before the group is cleared: send what is pending with the current token.
        @auth.set_flush_handler
        async def flush() -> None:
            print("flush: no events pending")

        # The group was cleared (here by this app's anonymize): drop the app's own customer data.
        causes: list[str] = []

        @auth.set_cleared_handler
        def on_cleared(cause: str) -> None:
            causes.append(cause)
            cleared.set()

        heard: list[int] = []

        async def listen() -> None:
            async for event in auth.token_refreshes():
                heard.append(event.generation)

        listener = asyncio.create_task(listen())

        check = await auth.preflight()
        print(f"preflight: {check.state.name}, generation {check.generation}, "
              f"{'a token' if check.token else 'no token'}")

        async def track(name: str) -> int:
            statuses = []

            async def send(authorization: str | None) -> Response:
                response = await post(port, STREAM, authorization)
                statuses.append(response.status)
                return response

            response = await auth.request(send)
            print(f"{name}: " + ", retried: ".join(map(str, statuses)))
            return response.status

        first = await track("request 1")
        await post(port, "/control/reject-next")
        print("backend rejects the next request")
        second = await track("request 2")

        result = await auth.anonymize()
        print(f"anonymize: {result.asked} app(s) asked to flush, {len(result.unconfirmed)} unconfirmed")
        await cleared.wait()
        print(f"cleared: {causes[0]}")
    await listener  # the iterator ends with the client
    print("token refreshes heard: generations " + ", ".join(map(str, sorted(set(heard)))))
    return 0 if first == second == 200 else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: asyncio_app.py GROUP BACKEND_PORT", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(sys.argv[1], int(sys.argv[2]))))
