#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A Python app that tracks events into a Bloomreach stream with its app group's token, through libexponea-auth and
ctypes alone (no package to install): the pre-flight check, the refresh handler fetching from the integrator's
backend, and the SDK's retry after a 401.

Usage: python-app.py GROUP BACKEND_PORT
  Against the local test backend (test-backend.py): checks the token, sends one event request to
  http://127.0.0.1:BACKEND_PORT/track/..., makes the backend reject the next request (/control/reject-next), sends
  another that gets a 401, reports it and retries with the token the library returns. Prints one line per step,
  never a token; exits 0 when that retry was answered 200.

The library is $EXPONEA_AUTH_LIBRARY when set, else libexponea-auth.so.1 as the dynamic linker finds it
(LD_LIBRARY_PATH, the system's directories). The daemon's socket is found as authctl finds it
($EXPONEA_AUTHD_SOCKET, the user daemon's, the system daemon's).

The handler runs on the thread that set it (the client's loop thread), inside the blocking calls made on that
thread, such as exponea_auth_report_response() waiting for the new token: a single-threaded app needs no loop of
its own for it. An app with a loop watches exponea_auth_get_fd() and calls exponea_auth_process().
"""
import ctypes
import ctypes.util
import json
import os
import sys
import urllib.error
import urllib.request

# ---- The library's API, declared for ctypes (include/exponea-auth.h) ----

TOKEN_MAX = 16384
NO_GENERATION = 2**64 - 1
REFRESH_NONE, REFRESH_SUPPLIED = 0, 1
STATES = {0: "notProvided", 1: "expired", 2: "expiredSoon", 3: "valid"}

# int (*)(exponea_auth *, const exponea_auth_refresh *, char *token, size_t size, void *userdata)
REFRESH_HANDLER = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t, ctypes.c_void_p
)


def load_library():
    path = os.environ.get("EXPONEA_AUTH_LIBRARY") or ctypes.util.find_library("exponea-auth") or "libexponea-auth.so.1"
    lib = ctypes.CDLL(path, use_errno=True)
    client = ctypes.c_void_p  # exponea_auth *, opaque
    u64, u64_out, buffer = ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64), ctypes.c_char_p
    signatures = {
        "exponea_auth_open": (ctypes.c_int, [ctypes.POINTER(client), ctypes.c_char_p, ctypes.c_char_p]),
        "exponea_auth_close": (client, [client]),
        "exponea_auth_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "exponea_auth_set_refresh_handler": (ctypes.c_int, [client, REFRESH_HANDLER, ctypes.c_void_p]),
        "exponea_auth_preflight": (
            ctypes.c_int,
            [client, buffer, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), u64_out],
        ),
        "exponea_auth_report_response": (
            ctypes.c_int,
            [client, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, u64, buffer, ctypes.c_size_t, u64_out],
        ),
        "exponea_auth_refresh_get_generation": (u64, [ctypes.c_void_p]),
        "exponea_auth_refresh_get_reason": (ctypes.c_char_p, [ctypes.c_void_p]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype, function.argtypes = restype, argtypes
    return lib


lib = load_library()


def strerror(code):
    return lib.exponea_auth_strerror(code).decode()


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


def fetch_token(auth, refresh, token, size, userdata):
    generation = lib.exponea_auth_refresh_get_generation(refresh)
    reason = (lib.exponea_auth_refresh_get_reason(refresh) or b"?").decode()
    outcome = "failed"
    try:
        status, body = post(f"/token?generation={generation}")
        fetched = json.loads(body)["token"].encode() if status == 200 else b""
        if fetched and len(fetched) < size:
            ctypes.memmove(token, fetched + b"\0", len(fetched) + 1)
            outcome = "fetched"
    except Exception as error:  # an exception must not cross into C: the fetch failed
        outcome = f"failed ({type(error).__name__})"
    print(f"refresh for generation {generation} ({reason}): {outcome}", flush=True)
    return REFRESH_SUPPLIED if outcome == "fetched" else REFRESH_NONE


# Kept for as long as the client lives: ctypes frees the C trampoline with the Python object.
refresh_handler = REFRESH_HANDLER(fetch_token)

# ---- One event request with the SDK's policy ----

STREAM = "/track/u/v1/customers/events?stream_id=example"


def track_event(auth, name):
    """Sends one event request with the group's token, and retries once after a 401 or 403 as the library
    decides. Returns the first answer's status and the final one."""
    token = ctypes.create_string_buffer(TOKEN_MAX + 1)
    generation = ctypes.c_uint64(NO_GENERATION)
    length = lib.exponea_auth_preflight(auth, token, len(token), None, ctypes.byref(generation))
    if length < 0:
        print(f"{name}: {strerror(length)}", flush=True)
        return -1, -1
    sent = generation.value if length else NO_GENERATION
    status, body = post(STREAM, f"Bearer {token.value.decode()}" if length else None)
    answered, line = status, f"{name}: {status}"
    if status in (401, 403):
        # R19-R22: the daemon decides; the handler's token comes within the retry wait.
        retry = lib.exponea_auth_report_response(
            auth, status, body, len(body), sent, token, len(token), ctypes.byref(generation)
        )
        if retry > 0:
            status, _ = post(STREAM, f"Bearer {token.value.decode()}")
            line += f", retried with generation {generation.value}: {status}"
        elif retry < 0:
            line += f", no retry: {strerror(retry)}"
        else:
            line += ", no retry"
    ctypes.memset(token, 0, len(token))  # it held the token
    print(line, flush=True)
    return answered, status


def main():
    global port
    if len(sys.argv) != 3:
        print("usage: python-app.py GROUP BACKEND_PORT", file=sys.stderr)
        return 2
    port = int(sys.argv[2])
    auth = ctypes.c_void_p()
    r = lib.exponea_auth_open(ctypes.byref(auth), sys.argv[1].encode(), None)
    if r < 0:
        print(f"open: {strerror(r)}", file=sys.stderr)
        return 1
    try:
        # Setting the handler subscribes to the group's events.
        r = lib.exponea_auth_set_refresh_handler(auth, refresh_handler, None)
        if r < 0:
            print(f"refresh handler: {strerror(r)}", file=sys.stderr)
            return 1

        # R15-R18: the pre-flight check, alone, to show where the token stands.
        token = ctypes.create_string_buffer(TOKEN_MAX + 1)
        state, generation = ctypes.c_int(), ctypes.c_uint64()
        length = lib.exponea_auth_preflight(auth, token, len(token), ctypes.byref(state), ctypes.byref(generation))
        ctypes.memset(token, 0, len(token))
        if length < 0:
            print(f"preflight: {strerror(length)}", flush=True)
            return 1
        print(
            f"preflight: {STATES.get(state.value, state.value)}, generation {generation.value}, "
            f"{'a token' if length else 'no token'}",
            flush=True,
        )

        _, first = track_event(auth, "request 1")
        status, _ = post("/control/reject-next")
        print(f"backend rejects the next request: {status}", flush=True)
        # The backend answers 401 whatever the request carries: the library runs the refresh handler and returns
        # the new token for the one retry.
        rejected, final = track_event(auth, "request 2")
        return 0 if first == 200 and rejected == 401 and final == 200 else 1
    finally:
        lib.exponea_auth_close(auth)


if __name__ == "__main__":
    sys.exit(main())
