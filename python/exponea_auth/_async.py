# SPDX-License-Identifier: Apache-2.0
"""The asyncio client: the group's events come through the running loop, with no thread of its own."""
from __future__ import annotations

import asyncio
import errno
import inspect
import os
from typing import TYPE_CHECKING

from . import _lib
from ._client import Client, _sync_body, response_status
from ._types import ClearResult, Error, Preflight, Refresh, Token, TokenRefreshed

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
    from typing import Any, TypeVar

    R = TypeVar("R")


class _LoopClient(Client):
    """The synchronous client, with handlers that may be coroutines: each one runs as a task of the loop, and
    ends the refresh or flush it stands for when it ends."""

    owner: AsyncClient

    def _awaitable(self, kind: str, result: Any) -> int | None:
        owner = self.owner
        loop = owner._loop
        if loop is None:
            return super()._awaitable(kind, result)
        task = loop.create_task(result)
        owner._tasks.add(task)
        if kind == "refresh":
            owner._refresh_started(task)
            return _lib.REFRESH_PENDING
        if kind == "flush":
            task.add_done_callback(owner._flush_ended)
            return _lib.FLUSH_PENDING
        task.add_done_callback(owner._task_ended)
        return None

    def _on_token_refreshed(self, handle: int, generation: int, userdata: int) -> None:
        self.owner._token_refreshed(generation)
        super()._on_token_refreshed(handle, generation, userdata)


class AsyncClient:
    """A client of one app group's token, for asyncio: the same calls as :class:`Client`, as coroutines, and
    the group's events through the running loop.

    At its first call (or ``async with``) it subscribes to the group's events and watches the library's
    descriptor with ``loop.add_reader()``, with a timer only when the library asks for one (after losing the
    daemon, to subscribe again): an idle app wakes for nothing, and no thread is started. Handlers may be
    coroutine functions: a refresh handler's coroutine returns the token (or ``None`` when the fetch failed), and
    the claim is renewed while it runs; a flush handler's coroutine is the flush.

    The calls are made on the loop's thread and each is one round trip to the local daemon, except
    ``anonymize()`` and ``stop_integration()``, which wait for the other apps' flushes (at most the daemon's
    bound, 2 s by default) while the loop waits too. ``report_response()`` and ``wait_for_token()`` wait for the
    new token in the loop, which goes on meanwhile.

    Example::

        async with exponea_auth.AsyncClient("com.example.shop") as auth:
            auth.set_refresh_handler(fetch_token)          # async def fetch_token(refresh) -> str | None
            async for event in auth.token_refreshes():
                print("generation", event.generation)
    """

    def __init__(
        self,
        group: str,
        *,
        socket: str | os.PathLike[str] | None = None,
        call_timeout: float | None = None,
        unavailable_timeout: float | None = None,
        retry_wait: float = 1.0,
    ) -> None:
        if not 0 <= retry_wait <= 5:
            raise Error(errno.EINVAL, "the retry wait is 0 to 5 s", "exponea_auth_set_retry_wait")
        client = _LoopClient(group, socket=socket, call_timeout=call_timeout,
                             unavailable_timeout=unavailable_timeout, retry_wait=0)
        client.owner = self
        self._client = client
        self._retry_wait = retry_wait
        self._loop: asyncio.AbstractEventLoop | None = None
        self._fd = -1
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._queues: list[asyncio.Queue[TokenRefreshed]] = []
        self._waiters: list[tuple[int, asyncio.Future[int]]] = []
        self._latest = 0

    # ---- lifetime ----

    async def __aenter__(self) -> AsyncClient:
        self._attach()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Stops watching the descriptor, cancels the handlers' tasks, and closes the client (a refresh claim
        it holds ends with it). Closing twice does nothing."""
        self._detach()
        tasks, self._tasks = self._tasks, set()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for queue in self._queues:
            queue.put_nowait(_END)
        self._client.close()

    def __repr__(self) -> str:
        return f"<exponea_auth.AsyncClient group={self.group!r}>"

    @property
    def group(self) -> str:
        """The app group."""
        return self._client.group

    @property
    def client(self) -> Client:
        """The synchronous client underneath, for what has no coroutine: its calls block the loop."""
        return self._client

    # ---- the loop ----

    def _attach(self) -> None:
        if self._loop is not None:
            return
        loop = asyncio.get_running_loop()
        client = self._client
        self._loop = loop
        try:
            # The subscription: the token-refreshed events feed token_refreshes() and the waits for a token.
            client.set_token_refreshed_handler(client._token_refreshed_handler or _ignore)
            self._fd = client.fileno()
        except BaseException:
            self._loop = None
            raise
        loop.add_reader(self._fd, self._process)
        self._process()

    def _detach(self) -> None:
        if self._loop is not None and self._fd >= 0:
            self._loop.remove_reader(self._fd)
        self._fd = -1
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _process(self) -> None:
        """The descriptor is readable, or the library's time has come."""
        self._timer = None
        try:
            self._client.process()
        except Error as error:
            assert self._loop is not None
            self._loop.call_exception_handler({"message": "exponea_auth: processing the group's events failed",
                                               "exception": error})
        self._arm()

    def _arm(self) -> None:
        """Arms the timer for when the library must run without an event, if ever."""
        if self._loop is None or self._client._handle is None:
            return
        when = self._client.timeout()
        if self._timer is not None:
            if when is not None and self._timer.when() == when:
                return
            self._timer.cancel()
            self._timer = None
        if when is not None:
            self._timer = self._loop.call_at(when, self._process)

    def _token_refreshed(self, generation: int) -> None:
        if generation > self._latest:
            self._latest = generation
        event = TokenRefreshed(generation)
        for queue in self._queues:
            queue.put_nowait(event)
        waiting = []
        for after, future in self._waiters:
            if generation > after:
                if not future.done():
                    future.set_result(generation)
            else:
                waiting.append((after, future))
        self._waiters = waiting

    def _task_ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None and self._loop is not None:
            self._loop.call_exception_handler({"message": "exponea_auth: a handler raised",
                                               "exception": task.exception(), "task": task})

    def _refresh_started(self, task: asyncio.Task[Any]) -> None:
        """A coroutine refresh handler runs: its claim is renewed at half its lease until it ends."""
        assert self._loop is not None
        refresh = self._client._refresh
        lease = refresh.lease if refresh else 0.0
        renewal: list[asyncio.TimerHandle] = []

        def renew() -> None:
            if not task.done() and self._client._handle is not None and self._client.renew_refresh():
                renewal[0] = self._loop.call_later(lease / 2, renew)  # type: ignore[union-attr]

        if lease > 0:
            renewal.append(self._loop.call_later(lease / 2, renew))

        def ended(task: asyncio.Task[Any]) -> None:
            for timer in renewal:
                timer.cancel()
            self._tasks.discard(task)
            if self._client._handle is None:
                return
            token = None
            if not task.cancelled():
                error = task.exception()
                if error is None:
                    token = task.result()
                else:
                    self._client._report("refresh", error)
            try:
                if isinstance(token, str):
                    self._client.set_token(token)
                else:
                    if token is not None:
                        self._client._report("refresh", TypeError(f"it returned a {type(token).__name__}"))
                    self._client.release_refresh()
            except Error as error:
                self._client._report("refresh", error)
                self._client.release_refresh()
            self._arm()

        task.add_done_callback(ended)

    def _flush_ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._client._report("flush", task.exception())  # type: ignore[arg-type]
        if self._client._handle is not None:
            try:
                self._client.flush_done()
            except Error:
                pass  # the clear ended without it (its bound)
            self._arm()

    def _call(self, function: Callable[..., R], *arguments: Any) -> R:
        self._attach()
        try:
            return function(*arguments)
        finally:
            self._arm()

    # ---- the token ----

    async def get_token(self) -> Token | None:
        """The group's token and its generation, without side effects; ``None`` when the group has none."""
        return self._call(self._client.get_token)

    async def preflight(self) -> Preflight:
        """The check before a stream request (see :meth:`Client.preflight`)."""
        return self._call(self._client.preflight)

    async def auth_header(self) -> Token | None:
        """The Authorization header's value, ``"Bearer <token>"``, after the pre-flight check; ``None``: send
        the request without Authorization."""
        return self._call(self._client.auth_header)

    async def wait_for_token(self, after: int, timeout: float) -> Token | None:
        """Waits, in the loop, at most ``timeout`` seconds (at most 5) for a token of a generation newer than
        ``after``; ``None`` when none came in time.

        Raises:
            Error: ``EINVAL`` for a timeout past 5 s.
        """
        if not 0 <= timeout <= 5:
            raise Error(errno.EINVAL, "a wait for a token is 0 to 5 s", "exponea_auth_wait_for_token")
        self._attach()
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[int] = loop.create_future()
        self._waiters.append((after, future))
        try:
            token = self._call(self._client.get_token)
            if token is not None and token.generation > after:
                return token
            try:
                await asyncio.wait_for(future, timeout)
            except asyncio.TimeoutError:
                return None
            token = self._call(self._client.get_token)
            return token if token is not None and token.generation > after else None
        finally:
            self._waiters = [(a, f) for a, f in self._waiters if f is not future]

    async def report_response(self, status: int, body: bytes | None = None, sent_generation: int | None = None,
                              ) -> Token | None:
        """Reports a stream request's HTTP status and body, and decides the one retry: returns the token to retry
        with, or ``None``. On a 401, or a 403 without a token, the group's refresh handler runs (in one app) and
        this waits in the loop, at most the retry wait, for its token."""
        # The library's own wait is off (a retry wait of 0): its answer is a token set since the request went
        # out, or the current one, which the wait below refuses when it is the one that was sent.
        token = self._call(self._client.report_response, status, body, sent_generation)
        if token is not None and (sent_generation is None or token.generation > sent_generation):
            return token
        if not (status == 401 or (status == 403 and sent_generation is None)):
            return None
        if sent_generation is None:
            # The request carried no token: the current one, if set meanwhile, else one past this generation.
            token, after = self._call(self._client._token_and_generation)
            if token is not None:
                return token
        else:
            after = sent_generation
        return await self.wait_for_token(after, self._retry_wait)

    async def set_token(self, token: str) -> int:
        """Stores ``token`` for the whole group and returns its generation (see :meth:`Client.set_token`)."""
        return self._call(self._client.set_token, token)

    async def identify_customer(self, ids: Mapping[str, str], token: str | None = None) -> int:
        """Stores the customer's ids and, when given, the token (see :meth:`Client.identify_customer`)."""
        return self._call(self._client.identify_customer, ids, token)

    async def anonymize(self) -> ClearResult:
        """Asks every app of the group to flush, then clears token and identity. This app's own flush handler
        runs first (awaited, when a coroutine); the loop then waits for the other apps' flushes, at most the
        daemon's bound."""
        return await self._clear(self._client.anonymize)

    async def stop_integration(self) -> ClearResult:
        """As ``anonymize()``, when the integration stops."""
        return await self._clear(self._client.stop_integration)

    async def _clear(self, function: Callable[[], ClearResult]) -> ClearResult:
        self._attach()
        handler = self._client._flush_handler
        if handler is not None:
            result = handler()
            if inspect.isawaitable(result):
                await result
        self._client._flushed_already = True
        try:
            return self._call(function)
        finally:
            self._client._flushed_already = False

    async def clear_local_customer_data(self) -> None:
        """The wipe: clears the group's token and identity at once; every app's cleared handler runs."""
        self._call(self._client.clear_local_customer_data)

    async def release_refresh(self) -> bool:
        """Gives up this app's refresh claim; returns whether it held one."""
        return self._call(self._client.release_refresh)

    async def renew_refresh(self) -> bool:
        """Extends this app's claim by another lease; False when it had ended."""
        return self._call(self._client.renew_refresh)

    # ---- events ----

    def token_refreshes(self) -> AsyncIterator[TokenRefreshed]:
        """An async iterator of the tokens set for the group from now on, by any app (each with its
        ``generation``); it ends when the client closes."""
        self._attach()
        queue: asyncio.Queue[TokenRefreshed] = asyncio.Queue()
        self._queues.append(queue)
        return _Events(self, queue)

    def set_refresh_handler(self, handler: Callable[[Refresh], Awaitable[str | None] | str | None | object] | None,
                            ) -> Any:
        """Sets the refresh handler, run in the one app of the group that claims the refresh: a function or a
        coroutine function that returns the token, or ``None`` when the fetch failed. Usable as a decorator."""
        self._attach()
        self._client.set_refresh_handler(handler)
        self._arm()
        return handler

    def set_flush_handler(self, handler: Callable[[], object] | None) -> Any:
        """Sets the flush handler (a function or a coroutine function), run before the group is cleared."""
        self._attach()
        self._client.set_flush_handler(handler)
        self._arm()
        return handler

    def set_cleared_handler(self, handler: Callable[[str], object] | None) -> Any:
        """Sets the cleared handler (a function or a coroutine function), run with the cause when the group was
        cleared."""
        self._attach()
        self._client.set_cleared_handler(handler)
        self._arm()
        return handler

    def set_token_refreshed_handler(self, handler: Callable[[int], object] | None) -> Any:
        """Sets a handler run with the generation of every token set for the group (``token_refreshes()`` is
        the iterator form)."""
        self._attach()
        self._client.set_token_refreshed_handler(handler or _ignore)
        self._arm()
        return handler

    # ---- the request helper ----

    async def request(self, send: Callable[[str | None], Awaitable[R]], *, status: Callable[[R], int] | None = None,
                      body: Callable[[R], Awaitable[bytes] | bytes] | None = None) -> R:
        """Sends one stream request with the SDK's policy, through the app's own HTTP client.

        ``send(authorization)`` is a coroutine function that sends the request with that Authorization header
        value (``None``: without the header) and returns the response. The pre-flight check comes first; a 401
        or a 403 is reported, and the request sent once more with the token the report returns. ``status`` and
        ``body`` read a response's HTTP status and body (``body`` may be a coroutine function); by default
        ``status_code`` or ``status``, and ``content`` or ``read()`` (awaited when it is a coroutine, as
        aiohttp's). Returns the last response.
        """
        header = await self.auth_header()
        response = await send(header.value if header else None)
        code = (status or response_status)(response)
        if code not in (401, 403):
            return response
        data: Any = body(response) if body else await _async_body(response)
        if inspect.isawaitable(data):
            data = await data
        retry = await self.report_response(code, data, header.generation if header else None)
        if retry is None:
            return response
        return await send("Bearer " + retry.value)


def _ignore(generation: int) -> None:
    pass


_END: Any = object()


class _Events:
    """token_refreshes()'s iterator."""

    def __init__(self, owner: AsyncClient, queue: asyncio.Queue[TokenRefreshed]) -> None:
        self._owner = owner
        self._queue = queue

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> TokenRefreshed:
        event = await self._queue.get()
        if event is _END:
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        if self._queue in self._owner._queues:
            self._owner._queues.remove(self._queue)


async def _async_body(response: Any) -> bytes:
    content = getattr(response, "content", None)
    if isinstance(content, (bytes, bytearray)):
        return bytes(content)
    read = getattr(response, "read", None)
    if callable(read):
        data = read()
        if inspect.isawaitable(data):
            data = await data
        if isinstance(data, (bytes, bytearray)):
            return bytes(data)
    return _sync_body(response)
