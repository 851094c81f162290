#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A Python app that tracks events into a Bloomreach stream with its app group's token, through the exponea_auth
package (python/ in this repository: libexponea-auth through ctypes) and its synchronous Client: the pre-flight
check, the refresh handler fetching from the integrator's backend, and the SDK's retry after a 401. The asyncio
form of the same app is python/examples/asyncio_app.py.

Usage: python-app.py GROUP BACKEND_PORT
  Against the local test backend (test-backend.py): checks the token, sends one event request to
  http://127.0.0.1:BACKEND_PORT/track/..., makes the backend reject the next request (/control/reject-next), sends
  another that gets a 401, reports it and retries with the token the library returns. Prints one line per step,
  never a token; exits 0 when that retry was answered 200.

The package is the one installed (python3-exponea-auth, pip install ./python), else the one of this source tree.
The library is $EXPONEA_AUTH_LIBRARY when set, else libexponea-auth.so.1 as the dynamic linker finds it. The
daemon's socket is found as authctl finds it ($EXPONEA_AUTHD_SOCKET, the user daemon's, the system daemon's).

The handler runs on the thread that set it (the client's loop thread), inside the blocking calls made on that
thread, such as report_response() waiting for the new token: a single-threaded app needs no loop of its own for
it. An app with a loop watches Client.fileno() and calls Client.process().
"""
import json
import os
import sys
import urllib.error
import urllib.request

try:
    import exponea_auth
except ImportError:  # run from the source tree
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import exponea_auth

STATES = {
    exponea_auth.State.NOT_PROVIDED: "notProvided",
    exponea_auth.State.EXPIRED: "expired",
    exponea_auth.State.EXPIRED_SOON: "expiredSoon",
    exponea_auth.State.VALID: "valid",
}

# ---- The integrator's backend and the stream (the local test backend) ----

port = 0


def post(path, authorization=None):
    """POSTs {} to the backend; returns the status and the body (bytes), or -1 when it could not be reached."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=b"{}", method="POST", headers={"Content-Type": "application/json"}
    )
    if authorization:
        request.add_header("Authorization", authorization)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:  # 4xx and 5xx: the status is the answer
        return error.code, error.read()
    except OSError:  # refused, timed out (URLError is one)
        return -1, b""


# ---- The refresh handler: runs in one app of the group only ----


def fetch_token(refresh):
    """Returns the new token, or None when the fetch failed (the claim is released at once)."""
    status, body = post(f"/token?generation={refresh.generation}")
    fetched = json.loads(body)["token"] if status == 200 else None
    print(f"refresh for generation {refresh.generation} ({refresh.reason}): {'fetched' if fetched else 'failed'}",
          flush=True)
    return fetched


# ---- One event request with the SDK's policy ----

STREAM = "/track/u/v1/customers/events?stream_id=example"


def track_event(auth, name):
    """Sends one event request with the group's token, and retries once after a 401 or 403 as the library
    decides. Returns the first answer's status and the final one. (Client.request() does the same in one call.)"""
    try:
        header = auth.auth_header()  # the pre-flight check, as the header's value
    except exponea_auth.Error as error:
        print(f"{name}: {error}", flush=True)
        return -1, -1
    status, body = post(STREAM, header.value if header else None)
    answered, line = status, f"{name}: {status}"
    if status in (401, 403):
        # R19-R22: the daemon decides; the handler's token comes within the retry wait.
        try:
            retry = auth.report_response(status, body, header.generation if header else None)
        except exponea_auth.Error as error:
            line += f", no retry: {error.strerror}"
        else:
            if retry:
                status, _ = post(STREAM, "Bearer " + retry.value)
                line += f", retried with generation {retry.generation}: {status}"
            else:
                line += ", no retry"
    print(line, flush=True)
    return answered, status


def main():
    global port
    if len(sys.argv) != 3:
        print("usage: python-app.py GROUP BACKEND_PORT", file=sys.stderr)
        return 2
    port = int(sys.argv[2])
    try:
        auth = exponea_auth.Client(sys.argv[1])
    except exponea_auth.Error as error:
        print(f"open: {error}", file=sys.stderr)
        return 1
    with auth:
        # Setting the handler subscribes to the group's events.
        auth.set_refresh_handler(fetch_token)

        # R15-R18: the pre-flight check, alone, to show where the token stands.
        check = auth.preflight()
        print(
            f"preflight: {STATES.get(check.state, check.state)}, generation {check.generation}, "
            f"{'a token' if check.token else 'no token'}",
            flush=True,
        )

        _, first = track_event(auth, "request 1")
        status, _ = post("/control/reject-next")
        print(f"backend rejects the next request: {status}", flush=True)
        # The backend answers 401 whatever the request carries: the library runs the refresh handler and returns
        # the new token for the one retry.
        rejected, final = track_event(auth, "request 2")
        return 0 if first == 200 and rejected == 401 and final == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
