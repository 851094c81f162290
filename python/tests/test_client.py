# SPDX-License-Identifier: Apache-2.0
"""The clients against the real daemon: the calls, bad input raising Error with the documented errno, no token in
any output, no thread started, and a daemon restart under an asyncio app."""
import asyncio
import errno
import os
import threading

import pytest

import exponea_auth
from conftest import TOKEN_HEADER, mint


@pytest.fixture(autouse=True)
def _socket(daemon, monkeypatch):
    monkeypatch.setenv("EXPONEA_AUTHD_SOCKET", daemon.socket)


def test_the_sync_client_sets_gets_and_checks_the_token(daemon):
    token = mint()
    with exponea_auth.Client("shop") as auth:
        assert auth.socket_path == daemon.socket
        assert auth.get_token() is None
        check = auth.preflight()
        assert (check.state, check.token, check.generation) == (exponea_auth.State.NOT_PROVIDED, None, 0)
        generation = auth.set_token(token)
        assert generation == 1
        got = auth.get_token()
        assert (got.value, got.generation) == (token, 1)
        header = auth.auth_header()
        assert (header.value, header.generation) == ("Bearer " + token, 1)
        assert auth.preflight().state == exponea_auth.State.VALID
        # Neither str() nor repr() shows it.
        for text in (str(got), repr(got), repr(header), repr(auth.preflight())):
            assert TOKEN_HEADER not in text and "hidden" in text
        assert auth.report_response(200, b"{}", 1) is None
        auth.clear_local_customer_data()
        assert auth.get_token() is None
    with pytest.raises(exponea_auth.Error) as raised:
        auth.get_token()
    assert raised.value.errno == errno.EBADF


def test_the_sync_request_helper_retries_a_401_once_with_the_token_the_handler_fetched(daemon):
    sent: list[str | None] = []

    class Response:
        def __init__(self, status: int) -> None:
            self.status_code, self.content = status, b'{"token_expired": false}'

    def send(authorization):
        sent.append(authorization)
        return Response(401 if len(sent) == 1 else 200)

    with exponea_auth.Client("shop") as auth:
        first = auth.set_token(mint())
        fresh = mint(7200)
        refreshes = []

        @auth.set_refresh_handler
        def fetch(refresh):
            refreshes.append((refresh.reason, refresh.generation, refresh.lease > 0))
            return fresh

        response = auth.request(send)
        assert response.status_code == 200
        assert sent[1] == "Bearer " + fresh and len(sent) == 2
        assert refreshes == [("invalid", first, True)]
        assert auth.get_token().generation == first + 1


@pytest.mark.parametrize("group", ["", ".hidden", "shop!", "a" * 129, "sh op", "nul\0byte"])
def test_a_bad_group_name_raises_EINVAL(group):
    with pytest.raises(exponea_auth.Error) as raised:
        exponea_auth.Client(group)
    assert raised.value.errno == errno.EINVAL
    assert isinstance(raised.value, OSError)
    assert raised.value.function == "exponea_auth_open"


def test_bad_input_raises_Error_with_the_documented_errno(daemon, workdir):
    with exponea_auth.Client("shop") as auth:
        for bad in ("not a jwt", "a.b", "x" * 20000, mint() + "\0tail"):
            with pytest.raises(exponea_auth.Error) as raised:
                auth.set_token(bad)
            assert raised.value.errno == errno.EBADMSG, bad[:20]
            assert bad not in str(raised.value)
        assert auth.get_token() is None  # nothing stored
        with pytest.raises(exponea_auth.Error) as raised:
            auth.wait_for_token(0, 6)  # past the 5 s bound
        assert raised.value.errno == errno.EINVAL
        with pytest.raises(exponea_auth.Error) as raised:
            auth.flush_done()  # no flush pending
        assert raised.value.errno == errno.ENOENT
        with pytest.raises(TypeError):
            auth.set_token(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(exponea_auth.Error) as raised:
        exponea_auth.Client("shop", call_timeout=-1)
    assert raised.value.errno == errno.EINVAL
    # A socket path too long for a Unix socket fails the first call.
    with exponea_auth.Client("shop", socket="/" + "x" * 200) as auth:
        with pytest.raises(exponea_auth.Error) as raised:
            auth.get_token()
        assert raised.value.errno == errno.ENAMETOOLONG
    # No daemon on the socket: ENOENT once the unavailable timeout (0 here) has passed.
    with exponea_auth.Client("shop", socket=str(workdir / "none.socket"), unavailable_timeout=0) as auth:
        with pytest.raises(exponea_auth.Error) as raised:
            auth.get_token()
        assert raised.value.errno in (errno.ENOENT, errno.ECONNREFUSED)
        assert "exponea_auth_get_token" in str(raised.value)


def test_an_asyncio_app_starts_no_thread_and_hears_tokens_through_its_loop(daemon):
    before = threading.active_count(), sorted(os.listdir("/proc/self/task"))

    async def run() -> list[int]:
        heard: list[int] = []
        async with exponea_auth.AsyncClient("shop") as auth, exponea_auth.AsyncClient("shop") as other:
            events = auth.token_refreshes()
            cleared = asyncio.get_running_loop().create_future()
            auth.set_cleared_handler(lambda cause: cleared.set_result(cause))
            for _ in range(3):
                generation = await other.set_token(mint())
                event = await asyncio.wait_for(events.__anext__(), 10)
                heard.append(event.generation)
                assert event.generation == generation
                # Nothing of the package runs on a thread of its own, now that it has subscribed and handled
                # events.
                assert (threading.active_count(), sorted(os.listdir("/proc/self/task"))) == before
            await other.clear_local_customer_data()
            assert await asyncio.wait_for(cleared, 10) == "clearLocalCustomerData"
            assert await auth.get_token() is None
        return heard

    assert asyncio.run(run()) == [1, 2, 3]
    assert (threading.active_count(), sorted(os.listdir("/proc/self/task"))) == before


def test_an_asyncio_app_lives_through_a_daemon_restart(daemon):
    async def run() -> None:
        async with exponea_auth.AsyncClient("shop") as auth:
            events = auth.token_refreshes()
            with exponea_auth.Client("shop") as setter:
                first = setter.set_token(mint())
            assert (await asyncio.wait_for(events.__anext__(), 10)).generation == first

            daemon.stop()  # SIGKILL, and waited for
            daemon.start()  # waits for its READY=1
            # The app's client subscribes again by itself, through its loop; a token set meanwhile is heard once it
            # has.
            with exponea_auth.Client("shop") as setter:
                second = setter.set_token(mint())
            assert second == first + 1  # the store survived the restart
            assert (await asyncio.wait_for(events.__anext__(), 10)).generation == second
            token = await auth.get_token()
            assert token is not None and token.generation == second

    asyncio.run(run())


def test_an_asyncio_refresh_handler_coroutine_is_claimed_and_its_token_set(daemon):
    async def run() -> None:
        async with exponea_auth.AsyncClient("shop") as auth:
            started = asyncio.Event()
            release = asyncio.Event()
            fresh = mint()

            @auth.set_refresh_handler
            async def fetch(refresh: exponea_auth.Refresh) -> str:
                assert refresh.reason == "notProvided"
                started.set()
                await release.wait()  # the fetch goes on while the loop runs
                return fresh

            check = await auth.preflight()  # no token: the group asks for one, and this app claims it
            assert check.state == exponea_auth.State.NOT_PROVIDED
            await asyncio.wait_for(started.wait(), 10)
            assert await auth.get_token() is None
            release.set()
            token = await auth.wait_for_token(0, 5)
            assert token is not None and token.value == fresh

    asyncio.run(run())


def test_the_package_under_test_is_the_one_meant():
    # scripts/python-test names the install it tests (the source tree, pip's, the Debian package's).
    expected = os.environ.get("EXPONEA_AUTH_EXPECTED_PATH")
    if expected is None:
        pytest.skip("EXPONEA_AUTH_EXPECTED_PATH is not set")
    assert os.path.dirname(os.path.realpath(exponea_auth.__file__)) == os.path.realpath(expected)
    library = os.environ.get("EXPONEA_AUTH_LIBRARY")
    with exponea_auth.Client("shop") as auth:
        auth.get_token()
    with open("/proc/self/maps") as maps:
        loaded = {line.split()[-1] for line in maps if "libexponea-auth" in line}
    assert loaded == {os.path.realpath(library)}, loaded


def test_a_coroutine_flush_handler_is_awaited_before_another_app_clears_the_group(daemon):
    async def run() -> None:
        loop = asyncio.get_running_loop()
        async with exponea_auth.AsyncClient("shop") as auth:
            steps: list[str] = []
            cleared = loop.create_future()

            @auth.set_flush_handler
            async def flush() -> None:
                steps.append("flush started")
                await asyncio.sleep(0)  # the flush goes on in the loop: other tasks run meanwhile
                steps.append("flush done")

            auth.set_cleared_handler(lambda cause: cleared.set_result(cause))
            await auth.set_token(mint())
            # Another app anonymizes: its call blocks until every app has flushed, so it runs on a thread of the
            # test's (the package starts none), while this app's flush runs in this loop.
            with exponea_auth.Client("shop") as other:
                result = await loop.run_in_executor(None, other.anonymize)
            assert (result.asked, result.unconfirmed) == (1, [])
            assert await asyncio.wait_for(cleared, 10) == "anonymize"
            assert steps == ["flush started", "flush done"]
            assert await auth.get_token() is None

    asyncio.run(run())


def test_a_missing_library_raises_Error_ENOENT(workdir):
    import subprocess
    import sys

    code = ("import errno, exponea_auth\n"
            "try:\n    exponea_auth.Client('shop')\n"
            "except exponea_auth.Error as error:\n    print(errno.errorcode[error.errno], error.function)\n")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "EXPONEA_AUTH_LIBRARY": str(workdir / "none.so")},
                         capture_output=True, text=True, check=True).stdout
    assert out == "ENOENT dlopen\n"


def test_the_asyncio_client_refuses_a_wait_past_5_s_with_EINVAL(daemon):
    async def run() -> None:
        async with exponea_auth.AsyncClient("shop") as auth:
            with pytest.raises(exponea_auth.Error) as raised:
                await auth.wait_for_token(0, 6)
            assert raised.value.errno == errno.EINVAL
            assert await auth.wait_for_token(0, 0) is None  # no token, and none came

    asyncio.run(run())


class _AiohttpLikeResponse:
    """aiohttp's shape: .status, and a coroutine read()."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self._body = status, body

    async def read(self) -> bytes:
        return self._body


class _HttpxLikeResponse:
    """httpx's and requests' shape: .status_code and .content."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status_code, self.content = status, body


@pytest.mark.parametrize("shape", [_AiohttpLikeResponse, _HttpxLikeResponse])
def test_the_asyncio_request_helper_reports_a_401_and_retries_once_with_the_fetched_token(daemon, shape):
    async def run() -> None:
        async with exponea_auth.AsyncClient("shop") as auth:
            first = await auth.set_token(mint())
            fresh = mint(7200)
            reasons: list[str] = []

            @auth.set_refresh_handler
            async def fetch(refresh: exponea_auth.Refresh) -> str:
                reasons.append(refresh.reason)
                await asyncio.sleep(0)  # a handler that yields to the loop once, as a fetch would: no time passes
                return fresh

            sent: list[str | None] = []

            async def send(authorization: str | None):
                sent.append(authorization)
                # The stream refuses every request once, whatever it carries, and the retry too: no third one.
                return shape(401, b'{"token_expired": true}') if len(sent) == 1 else shape(401, b"{}")

            response = await auth.request(send)
            assert len(sent) == 2 and sent[1] == "Bearer " + fresh
            assert response is not None and (getattr(response, "status", None) or response.status_code) == 401
            assert reasons == ["expired"]
            token = await auth.get_token()
            assert token is not None and token.generation == first + 1

    asyncio.run(run())
