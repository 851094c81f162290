# SPDX-License-Identifier: Apache-2.0
"""The real exponea-authd (user mode, a private socket, state directory and store key) and the local test backend
(libexponea-auth/examples/test-backend.py), for the package's tests.

Paths, each overridable from the environment:
  EXPONEA_AUTHD_BINARY   the daemon (default: .build/debug/exponea-authd of this repository)
  EXPONEA_AUTH_LIBRARY   the C library the package loads (default: .build/libexponea-auth/libexponea-auth.so.1;
                         set and empty: libexponea-auth.so.1 as the dynamic linker finds it, an installed one)
The package under test is whatever `import exponea_auth` finds: the source tree (PYTHONPATH=python) or an install;
scripts/python-test runs the suite with each.

Every wait is on the event it means: a READY=1 on a notification socket the test owns, a line read from a pipe,
a process's exit, a reply. None sleeps to order events.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESTS = Path(__file__).resolve().parent
EXAMPLES = REPO / "python" / "examples"
BACKEND = REPO / "libexponea-auth" / "examples" / "test-backend.py"
DAEMON = Path(os.environ.get("EXPONEA_AUTHD_BINARY") or REPO / ".build" / "debug" / "exponea-authd")
if "EXPONEA_AUTH_LIBRARY" not in os.environ:
    os.environ["EXPONEA_AUTH_LIBRARY"] = str(REPO / ".build" / "libexponea-auth" / "libexponea-auth.so.1")
elif not os.environ["EXPONEA_AUTH_LIBRARY"]:
    del os.environ["EXPONEA_AUTH_LIBRARY"]  # the system's libexponea-auth.so.1 (an installed package)

# The first segment of every token the test backend mints (their header, the same for all): output that contains
# it printed a token.
TOKEN_HEADER = base64.urlsafe_b64encode(
    json.dumps({"alg": "HS512", "typ": "JWT", "kid": "test"}).encode()).rstrip(b"=").decode()


def mint(lifetime: int = 3600) -> str:
    """A stream JWT as the test backend mints them (the daemon checks the form and exp, not the signature)."""
    import hashlib
    import hmac
    import time

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS512", "typ": "JWT", "kid": "test"}).encode())
    payload = b64(json.dumps({"exp": int(time.time()) + lifetime, "ids": {"registered": "pytest"}}).encode())
    signature = hmac.new(b"k" * 64, f"{header}.{payload}".encode(), hashlib.sha512).digest()
    return f"{header}.{payload}.{b64(signature)}"


class Daemon:
    """exponea-authd --user on a private socket; its output goes to a file, checked for tokens when it stops."""

    def __init__(self, root: Path, arguments: list[str]) -> None:
        self.root = root
        self.socket = str(root / "io.socket")
        self.state = root / "state"
        self.arguments = arguments
        self.log = root / "daemon.log"
        self.process: subprocess.Popen[bytes] | None = None
        credentials = root / "credentials"
        credentials.mkdir()
        (credentials / "exponea-authd.store-key").write_bytes(bytes(range(32)))
        self.environment = {
            "HOME": str(root), "PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": str(credentials),
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
        }

    def start(self) -> None:
        """Starts it and waits for its READY=1, which it sends once the socket listens and the store is loaded."""
        notify_path = str(self.root / "notify.socket")
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            if os.path.exists(notify_path):
                os.unlink(notify_path)
            notify.bind(notify_path)
            notify.settimeout(20)  # a bound for a daemon that never gets ready, not an order
            with open(self.log, "ab") as log:
                self.process = subprocess.Popen(
                    [str(DAEMON), "--user", "--log-target", "console", "--state-directory", str(self.state),
                     "--socket", self.socket, *self.arguments],
                    env={**self.environment, "NOTIFY_SOCKET": notify_path}, stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL)
            while True:
                try:
                    datagram = notify.recv(4096)
                except socket.timeout:
                    raise AssertionError(f"exponea-authd sent no READY=1; it printed:\n{self.output}") from None
                if b"READY=1" in datagram.split(b"\n"):
                    return
        finally:
            notify.close()

    def stop(self, sig: int = signal.SIGKILL) -> int | None:
        process, self.process = self.process, None
        if process is None:
            return None
        process.send_signal(sig)
        return process.wait(timeout=30)

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid


class Backend:
    """test-backend.py: the integrator's token backend and a strict event stream."""

    def __init__(self, lifetime: int) -> None:
        self.process = subprocess.Popen([sys.executable, str(BACKEND), "--lifetime", str(lifetime)],
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # its first line: the port
        self.port = int(line)

    def _call(self, method: str, path: str) -> dict:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stats(self) -> dict:
        return self._call("GET", "/stats")

    def reject_next(self) -> None:
        self._call("POST", "/control/reject-next")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture
def workdir():
    # A short path: a Unix socket's path is at most 107 bytes.
    path = Path(tempfile.mkdtemp(prefix="authd-py."))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def start_daemon(workdir):
    daemons: list[Daemon] = []

    def start(*arguments: str) -> Daemon:
        daemon = Daemon(workdir, list(arguments))
        daemon.start()
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop()
        assert TOKEN_HEADER not in daemon.output, "exponea-authd printed a token"


@pytest.fixture
def daemon(start_daemon) -> Daemon:
    return start_daemon()


@pytest.fixture
def start_backend():
    backends: list[Backend] = []

    def start(lifetime: int = 3600) -> Backend:
        backend = Backend(lifetime)
        backends.append(backend)
        return backend

    yield start
    for backend in backends:
        backend.stop()


class App:
    """A Python app of the group, run as its own process; its lines are read as they come."""

    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self.process = process
        self.name = name
        self.lines: list[str] = []

    @classmethod
    async def start(cls, script: Path, arguments: list[str], daemon: Daemon, name: str | None = None) -> App:
        environment = {**os.environ, "EXPONEA_AUTHD_SOCKET": daemon.socket, "PYTHONUNBUFFERED": "1"}
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(script), *arguments, env=environment, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
        return cls(process, name or script.name)

    async def line(self, predicate=lambda line: True, timeout: float = 30) -> str:
        """Reads lines until one satisfies `predicate` (bounded: a hung app fails the test, it orders nothing)."""
        assert self.process.stdout is not None

        async def read() -> str:
            while True:
                raw = await self.process.stdout.readline()
                if not raw:
                    raise AssertionError(f"{self.name} ended without the line; it printed:\n{self.output}")
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                if predicate(line):
                    return line

        return await asyncio.wait_for(read(), timeout)

    async def exit(self, timeout: float = 60) -> int:
        """Reads the rest of its output and waits for it to end."""
        assert self.process.stdout is not None
        rest = await asyncio.wait_for(self.process.stdout.read(), timeout)
        self.lines += rest.decode(errors="replace").splitlines()
        return await self.process.wait()

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)
