# SPDX-License-Identifier: Apache-2.0
"""The synchronous client: one app group, through libexponea-auth."""
from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import TYPE_CHECKING

from . import _lib
from ._types import PENDING, ClearResult, Error, Preflight, Refresh, State, Token, Unconfirmed

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TypeVar

    R = TypeVar("R")

_UNCONFIRMED_MAX = 64


def _check(result: int, function: str) -> int:
    if result < 0:
        raise Error(result, _lib.strerror(result), function)
    return result


def _usec(seconds: float, name: str) -> int:
    if seconds < 0:
        raise Error(errno.EINVAL, f"{name} must not be negative", name)
    return int(seconds * 1_000_000)


def response_status(response: Any) -> int:
    """The HTTP status of a response of httpx, requests, aiohttp or urllib (``status_code`` or ``status``)."""
    status = getattr(response, "status_code", None)
    if status is None:
        status = getattr(response, "status", None)
    if status is None:
        raise TypeError(f"cannot read an HTTP status from {type(response).__name__}: pass status=")
    return int(status)


class Client:
    """A client of one app group's token, held by exponea-authd for every app of the group.

    It connects at its first call; the socket is found as authctl finds it when ``socket`` is ``None``
    ($EXPONEA_AUTHD_SOCKET, else the user daemon's, else the system daemon's). A context manager: ``close()``
    on exit.

    The calls are thread-safe unless said otherwise. Handlers run on the client's loop thread (the first to set a
    handler or call ``fileno()``, ``process()`` or ``wait()``), inside ``process()``, ``wait()``, or a blocking
    call made on that thread, such as ``report_response()`` waiting for the token of a refresh.

    Raises:
        Error: ``EINVAL`` for a group name that is not 1-128 of ``A-Z a-z 0-9 . _ -`` (no leading dot), or a
            negative timeout.

    Example::

        with exponea_auth.Client("com.example.shop") as auth:
            response = auth.request(lambda header: requests.post(url, json=event,
                                    headers={"Authorization": header} if header else {}))
    """

    def __init__(
        self,
        group: str,
        *,
        socket: str | os.PathLike[str] | None = None,
        call_timeout: float | None = None,
        unavailable_timeout: float | None = None,
        retry_wait: float | None = None,
    ) -> None:
        self._handle: ctypes.c_void_p | None = None
        self._lib = lib = _lib.library()
        if not isinstance(group, str):
            raise TypeError(f"group must be a str, not {type(group).__name__}")
        if "\0" in group:
            raise Error(errno.EINVAL, "a group name has no NUL character", "exponea_auth_open")
        path = None if socket is None else os.fsencode(socket)
        if path is not None and b"\0" in path:
            raise Error(errno.EINVAL, "a socket path has no NUL character", "exponea_auth_open")
        handle = ctypes.c_void_p()
        _check(lib.exponea_auth_open(ctypes.byref(handle), group.encode(), path), "exponea_auth_open")
        self._handle = handle
        self._group = group
        # The C trampolines, kept for as long as the client lives: ctypes frees them with these objects.
        self._callbacks: dict[str, Any] = {}
        self._refresh_handler: Callable[[Refresh], Any] | None = None
        self._flush_handler: Callable[[], Any] | None = None
        self._cleared_handler: Callable[[str], Any] | None = None
        self._token_refreshed_handler: Callable[[int], Any] | None = None
        # The refresh the handler runs for (the last one).
        self._refresh: Refresh | None = None
        # While True, a flush asked of this app is confirmed at once: it flushed already (AsyncClient.anonymize).
        self._flushed_already = False
        try:
            if call_timeout is not None:
                _check(lib.exponea_auth_set_call_timeout(handle, _usec(call_timeout, "call_timeout")),
                       "exponea_auth_set_call_timeout")
            if unavailable_timeout is not None:
                _check(lib.exponea_auth_set_unavailable_timeout(handle, _usec(unavailable_timeout,
                                                                              "unavailable_timeout")),
                       "exponea_auth_set_unavailable_timeout")
            if retry_wait is not None:
                _check(lib.exponea_auth_set_retry_wait(handle, _usec(retry_wait, "retry_wait")),
                       "exponea_auth_set_retry_wait")
        except BaseException:
            self.close()
            raise

    # ---- lifetime ----

    def close(self) -> None:
        """Closes the client's connections (a refresh claim it holds ends with them). Call it on the loop thread,
        with no other call of the client running. Closing twice does nothing."""
        handle, self._handle = self._handle, None
        if handle is not None:
            self._lib.exponea_auth_close(handle)
        self._callbacks.clear()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else self.socket_path
        return f"<exponea_auth.Client group={self._group!r} {state}>"

    @property
    def group(self) -> str:
        """The app group."""
        return self._group

    @property
    def socket_path(self) -> str:
        """The socket the client connects to."""
        return os.fsdecode(self._lib.exponea_auth_get_socket_path(self._h()))

    def _h(self) -> ctypes.c_void_p:
        handle = self._handle
        if handle is None:
            raise Error(errno.EBADF, "the client is closed")
        return handle

    # ---- the token ----

    @staticmethod
    def _take(buffer: ctypes.Array[ctypes.c_char], length: int) -> str:
        value = ctypes.string_at(buffer, length).decode()
        ctypes.memset(buffer, 0, length)  # it held the token
        return value

    def get_token(self) -> Token | None:
        """The group's token and its generation, without side effects; ``None`` when the group has none."""
        buffer = ctypes.create_string_buffer(_lib.BUFFER_SIZE)
        generation = ctypes.c_uint64()
        r = self._lib.exponea_auth_get_token(self._h(), buffer, _lib.BUFFER_SIZE, ctypes.byref(generation))
        if r == -errno.ENOKEY:
            return None
        return Token(self._take(buffer, _check(r, "exponea_auth_get_token")), generation.value)

    def _token_and_generation(self) -> tuple[Token | None, int]:
        """The group's token (``None``: none) and its generation, or that of the change that left it without one."""
        buffer = ctypes.create_string_buffer(_lib.BUFFER_SIZE)
        generation = ctypes.c_uint64()
        r = self._lib.exponea_auth_get_token(self._h(), buffer, _lib.BUFFER_SIZE, ctypes.byref(generation))
        if r == -errno.ENOKEY:
            return None, generation.value
        return Token(self._take(buffer, _check(r, "exponea_auth_get_token")), generation.value), generation.value

    def preflight(self) -> Preflight:
        """The check before a stream request: the token to send (even an expired one) and its state. When the
        state calls for a refresh, the group's refresh handler runs, in one app of the group."""
        buffer = ctypes.create_string_buffer(_lib.BUFFER_SIZE)
        state, generation = ctypes.c_int(), ctypes.c_uint64()
        r = _check(
            self._lib.exponea_auth_preflight(self._h(), buffer, _lib.BUFFER_SIZE, ctypes.byref(state),
                                             ctypes.byref(generation)),
            "exponea_auth_preflight",
        )
        token = Token(self._take(buffer, r), generation.value) if r else None
        return Preflight(token, State(state.value), generation.value)

    def auth_header(self) -> Token | None:
        """As ``preflight()``, as the Authorization header's value, ``"Bearer <token>"`` (with its generation);
        ``None`` when there is no token: send the request without Authorization."""
        buffer = ctypes.create_string_buffer(_lib.BUFFER_SIZE)
        generation = ctypes.c_uint64()
        r = _check(
            self._lib.exponea_auth_get_auth_header(self._h(), buffer, _lib.BUFFER_SIZE, ctypes.byref(generation)),
            "exponea_auth_get_auth_header",
        )
        return Token(self._take(buffer, r), generation.value) if r else None

    def wait_for_token(self, after: int, timeout: float) -> Token | None:
        """Waits at most ``timeout`` seconds (at most 5) for a token of a generation newer than ``after``;
        ``None`` when none came in time. On the loop thread, the client's handlers run meanwhile.

        Raises:
            Error: ``EINVAL`` for a timeout past 5 s.
        """
        buffer = ctypes.create_string_buffer(_lib.BUFFER_SIZE)
        generation = ctypes.c_uint64()
        r = self._lib.exponea_auth_wait_for_token(self._h(), after, _usec(timeout, "timeout"), buffer,
                                                  _lib.BUFFER_SIZE, ctypes.byref(generation))
        if r == -errno.ENOKEY:
            return None
        return Token(self._take(buffer, _check(r, "exponea_auth_wait_for_token")), generation.value)

    def report_response(self, status: int, body: bytes | None = None, sent_generation: int | None = None,
                        ) -> Token | None:
        """Reports the HTTP status of a stream request sent with the token of ``sent_generation`` (``None``: it
        carried none) and its body (a 401's ``token_expired`` is read from it), and decides the one retry. On a
        401, or a 403 without a token, the group's refresh handler runs and the call waits, at most the retry
        wait, for its token. Returns the token to retry with, or ``None``: no retry."""
        buffer = ctypes.create_string_buffer(_lib.BUFFER_SIZE)
        generation = ctypes.c_uint64()
        body = bytes(body) if body else None
        sent = _lib.NO_GENERATION if sent_generation is None else sent_generation
        r = _check(
            self._lib.exponea_auth_report_response(self._h(), int(status), body, len(body) if body else 0, sent,
                                                   buffer, _lib.BUFFER_SIZE, ctypes.byref(generation)),
            "exponea_auth_report_response",
        )
        return Token(self._take(buffer, r), generation.value) if r else None

    def set_token(self, token: str) -> int:
        """Stores ``token`` for the whole group; every app hears it. Ends this app's refresh claim. Returns its
        generation.

        Raises:
            Error: ``EBADMSG`` when it is not a stream JWT (nothing stored); ``EIO`` when the daemon could not
                write its store (the previous token is kept).
        """
        data = self._token_bytes(token)
        generation = ctypes.c_uint64()
        _check(self._lib.exponea_auth_set_token(self._h(), data, ctypes.byref(generation)), "exponea_auth_set_token")
        return generation.value

    @staticmethod
    def _token_bytes(token: str | None) -> bytes | None:
        if token is None:
            return None
        if not isinstance(token, str):
            raise TypeError(f"a token is a str, not {type(token).__name__}")
        data = token.encode()
        if b"\0" in data:
            raise Error(errno.EBADMSG, "a stream JWT has no NUL character", "exponea_auth_set_token")
        return data

    def identify_customer(self, ids: Mapping[str, str], token: str | None = None) -> int:
        """Stores the customer's ids and, when given, the token; without a token the stored one is cleared.
        Returns the group's generation."""
        keys = (ctypes.c_char_p * max(len(ids), 1))(*[k.encode() for k in ids])
        values = (ctypes.c_char_p * max(len(ids), 1))(*[v.encode() for v in ids.values()])
        generation = ctypes.c_uint64()
        _check(
            self._lib.exponea_auth_identify_customer(self._h(), keys, values, len(ids), self._token_bytes(token),
                                                     ctypes.byref(generation)),
            "exponea_auth_identify_customer",
        )
        return generation.value

    # ---- anonymize, stop, clear ----

    def _clear(self, function: str) -> ClearResult:
        asked = ctypes.c_uint()
        pids = (ctypes.c_int * _UNCONFIRMED_MAX)()
        reasons = (ctypes.c_int * _UNCONFIRMED_MAX)()
        n = _check(getattr(self._lib, function)(self._h(), ctypes.byref(asked), pids, reasons, _UNCONFIRMED_MAX),
                   function)
        unconfirmed = []
        for i in range(min(n, _UNCONFIRMED_MAX)):
            try:
                reason = Unconfirmed(reasons[i])
            except ValueError:
                reason = reasons[i]  # type: ignore[assignment]  # one a later library adds
            unconfirmed.append((pids[i], reason))
        return ClearResult(asked.value, unconfirmed)

    def anonymize(self) -> ClearResult:
        """Asks every app of the group to flush (each one's flush handler), then clears token and identity;
        returns when both are done. On the loop thread, this app's own flush handler runs meanwhile."""
        return self._clear("exponea_auth_anonymize")

    def stop_integration(self) -> ClearResult:
        """As ``anonymize()``, when the integration stops."""
        return self._clear("exponea_auth_stop_integration")

    def clear_local_customer_data(self) -> None:
        """The wipe: clears the group's token and identity at once, without a flush; every app hears it (its
        cleared handler) and drops its own customer data, unsent events too."""
        _check(self._lib.exponea_auth_clear_local_customer_data(self._h()), "exponea_auth_clear_local_customer_data")

    # ---- the request helper ----

    def request(self, send: Callable[[str | None], R], *, status: Callable[[R], int] | None = None,
                body: Callable[[R], bytes] | None = None) -> R:
        """Sends one stream request with the SDK's policy, through the app's own HTTP client.

        ``send(authorization)`` sends the request with that Authorization header value (``None``: without the
        header) and returns the response. The pre-flight check comes first; a 401 or 403 is reported, and the
        request sent once more with the token the report returns. ``status`` and ``body`` read a response's
        HTTP status and body; by default ``status_code`` or ``status``, and ``content`` or ``read()``.
        Returns the last response.
        """
        header = self.auth_header()
        response = send(header.value if header else None)
        code = (status or response_status)(response)
        if code not in (401, 403):
            return response
        data = body(response) if body else _sync_body(response)
        retry = self.report_response(code, data, header.generation if header else None)
        if retry is None:
            return response
        return send("Bearer " + retry.value)

    # ---- handlers ----

    def set_refresh_handler(self, handler: Callable[[Refresh], str | None | object] | None,
                            ) -> Callable[[Refresh], Any] | None:
        """Sets the handler that fetches the group's next token, run in one app of the group only: the app that
        claims the refresh (the claim ends with this client or its process). It returns the token (set for the
        group at once), ``None`` when the fetch failed (the claim is released), or ``PENDING`` when the fetch
        goes on (end it with ``set_token()`` or ``release_refresh()``). Subscribes to the group's events; makes
        this thread the loop thread. Usable as a decorator."""
        self._refresh_handler = handler
        trampoline = _lib.REFRESH_HANDLER(self._on_refresh) if handler else _lib.REFRESH_HANDLER()
        self._callbacks["refresh"] = trampoline
        _check(self._lib.exponea_auth_set_refresh_handler(self._h(), trampoline, None),
               "exponea_auth_set_refresh_handler")
        return handler

    def set_flush_handler(self, handler: Callable[[], object] | None) -> Callable[[], Any] | None:
        """Sets the handler that runs when the group is about to be cleared: flush pending events with the current
        token. It returns ``None`` when done, or ``PENDING`` (then call ``flush_done()``). Subscribes; loop
        thread. Usable as a decorator."""
        self._flush_handler = handler
        trampoline = _lib.FLUSH_HANDLER(self._on_flush) if handler else _lib.FLUSH_HANDLER()
        self._callbacks["flush"] = trampoline
        _check(self._lib.exponea_auth_set_flush_handler(self._h(), trampoline, None), "exponea_auth_set_flush_handler")
        return handler

    def set_cleared_handler(self, handler: Callable[[str], object] | None) -> Callable[[str], Any] | None:
        """Sets the handler that runs when the group was cleared, with the cause: "anonymize", "stopIntegration" or
        "clearLocalCustomerData" (drop the app's own customer data). Subscribes; loop thread."""
        self._cleared_handler = handler
        trampoline = _lib.CLEARED_HANDLER(self._on_cleared) if handler else _lib.CLEARED_HANDLER()
        self._callbacks["cleared"] = trampoline
        _check(self._lib.exponea_auth_set_cleared_handler(self._h(), trampoline, None),
               "exponea_auth_set_cleared_handler")
        return handler

    def set_token_refreshed_handler(self, handler: Callable[[int], object] | None) -> Callable[[int], Any] | None:
        """Sets the handler that runs, with the generation, for every token set for the group by any app.
        Subscribes; loop thread."""
        self._token_refreshed_handler = handler
        trampoline = _lib.TOKEN_REFRESHED_HANDLER(self._on_token_refreshed) if handler \
            else _lib.TOKEN_REFRESHED_HANDLER()
        self._callbacks["token_refreshed"] = trampoline
        _check(self._lib.exponea_auth_set_token_refreshed_handler(self._h(), trampoline, None),
               "exponea_auth_set_token_refreshed_handler")
        return handler

    def set_coalescing(self, coalesce: bool) -> None:
        """Whether only the app that claims a refresh runs its handler (the default), or every app. Loop thread."""
        _check(self._lib.exponea_auth_set_coalescing(self._h(), 1 if coalesce else 0), "exponea_auth_set_coalescing")

    def release_refresh(self) -> bool:
        """Gives up this app's refresh claim (its pending fetch failed); the next request is claimed at once by
        any app. Returns whether a claim was released."""
        return _check(self._lib.exponea_auth_release_refresh(self._h()), "exponea_auth_release_refresh") == 1

    def renew_refresh(self) -> bool:
        """Extends this app's claim by another lease, for a slow fetch. Returns False when the claim had ended."""
        return _check(self._lib.exponea_auth_renew_refresh(self._h()), "exponea_auth_renew_refresh") == 1

    def flush_done(self) -> None:
        """A pending flush (``PENDING``) has ended. Loop thread.

        Raises:
            Error: ``ENOENT`` when none was pending.
        """
        _check(self._lib.exponea_auth_flush_done(self._h()), "exponea_auth_flush_done")

    # ---- events in the app's loop ----

    def fileno(self) -> int:
        """The descriptor to watch (for input) for the group's events; the first call subscribes. It stays the
        same across daemon restarts. Loop thread."""
        return _check(self._lib.exponea_auth_get_fd(self._h()), "exponea_auth_get_fd")

    def timeout(self) -> float | None:
        """When ``process()`` must run even without an event, in ``time.monotonic()`` seconds (asyncio's
        ``loop.time()``); ``None`` when never. Read it again after every ``process()``. Loop thread."""
        usec = ctypes.c_uint64()
        self._lib.exponea_auth_get_timeout(self._h(), ctypes.byref(usec))
        return None if usec.value == _lib.NO_TIMEOUT else usec.value / 1_000_000

    def process(self) -> bool:
        """Handles what is ready without waiting: events, handlers, subscribing again. Returns whether it handled
        something. Loop thread."""
        return _check(self._lib.exponea_auth_process(self._h()), "exponea_auth_process") == 1

    def wait(self, timeout: float | None = None) -> bool:
        """Waits at most ``timeout`` seconds (``None``: no bound) for events and handles them. Loop thread."""
        usec = _lib.NO_TIMEOUT if timeout is None else _usec(timeout, "timeout")
        return _check(self._lib.exponea_auth_wait(self._h(), usec), "exponea_auth_wait") == 1

    # ---- the C trampolines: no exception may cross into C ----

    def _report(self, where: str, error: BaseException) -> None:
        print(f"exponea_auth: the {where} handler raised {type(error).__name__}: {error}", file=sys.stderr)

    def _awaitable(self, kind: str, result: Any) -> int | None:
        """A handler returned an awaitable: the asynchronous client runs it; this one cannot."""
        close = getattr(result, "close", None)
        if close:
            close()
        self._report(kind, TypeError("a coroutine handler needs exponea_auth.AsyncClient"))
        return None

    def _on_refresh(self, handle: int, refresh: int, token: int, size: int, userdata: int) -> int:
        try:
            lib = self._lib
            keys = ctypes.POINTER(ctypes.c_char_p)()
            values = ctypes.POINTER(ctypes.c_char_p)()
            n = lib.exponea_auth_refresh_get_customer_ids(refresh, ctypes.byref(keys), ctypes.byref(values))
            ids = {keys[i].decode(): values[i].decode() for i in range(n)} if n else {}
            reason = lib.exponea_auth_refresh_get_reason(refresh)
            request = Refresh(reason.decode() if reason else "", lib.exponea_auth_refresh_get_generation(refresh),
                              lib.exponea_auth_refresh_get_lease(refresh) / 1_000_000, ids)
            self._refresh = request
            handler = self._refresh_handler
            if handler is None:
                return _lib.REFRESH_NONE
            result = handler(request)
            if result is PENDING:
                return _lib.REFRESH_PENDING
            if result is None:
                return _lib.REFRESH_NONE
            if isinstance(result, str):
                data = result.encode()
                if len(data) >= size or b"\0" in data:
                    self._report("refresh", Error(errno.EBADMSG, "the token it returned is too long"))
                    return _lib.REFRESH_NONE
                ctypes.memmove(token, data + b"\0", len(data) + 1)
                return _lib.REFRESH_SUPPLIED
            if hasattr(result, "__await__"):
                outcome = self._awaitable("refresh", result)
                return _lib.REFRESH_NONE if outcome is None else outcome
            self._report("refresh", TypeError(f"it returned a {type(result).__name__}, not a str, None or PENDING"))
        except BaseException as error:  # a fetch that failed: the claim is released
            self._report("refresh", error)
        return _lib.REFRESH_NONE

    def _on_flush(self, handle: int, userdata: int) -> int:
        if self._flushed_already:
            return _lib.FLUSH_DONE
        try:
            handler = self._flush_handler
            result = handler() if handler else None
            if result is PENDING:
                return _lib.FLUSH_PENDING
            if hasattr(result, "__await__"):
                outcome = self._awaitable("flush", result)
                return _lib.FLUSH_DONE if outcome is None else outcome
        except BaseException as error:
            self._report("flush", error)
        return _lib.FLUSH_DONE

    def _on_cleared(self, handle: int, cause: bytes | None, userdata: int) -> None:
        try:
            handler = self._cleared_handler
            result = handler(cause.decode() if cause else "") if handler else None
            if hasattr(result, "__await__"):
                self._awaitable("cleared", result)
        except BaseException as error:
            self._report("cleared", error)

    def _on_token_refreshed(self, handle: int, generation: int, userdata: int) -> None:
        try:
            handler = self._token_refreshed_handler
            result = handler(generation) if handler else None
            if hasattr(result, "__await__"):
                self._awaitable("token-refreshed", result)
        except BaseException as error:
            self._report("token-refreshed", error)


def _sync_body(response: Any) -> bytes:
    content = getattr(response, "content", None)
    if isinstance(content, (bytes, bytearray)):
        return bytes(content)
    read = getattr(response, "read", None)
    if callable(read):
        data = read()
        if isinstance(data, (bytes, bytearray)):
            return bytes(data)
    return b""
