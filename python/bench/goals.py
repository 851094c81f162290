#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Python package's goals that authd-bench does not measure (its get_token p50 row is in authd-bench's C
library benchmark), on the real daemon:

- `import exponea_auth`, beside `import json` in the same process, medians over fresh processes;
- the wake-ups an idle asyncio app adds: an AsyncClient subscribed, with its refresh, flush and cleared handlers
  and a token_refreshes() iterator waiting, beside a bare asyncio loop, both idle for the same seconds: the times
  each was run (/proc/PID/schedstat, every thread) and its voluntary context switches;
- the threads the package starts (/proc/PID/task of the idle app).

Usage: goals.py [--python PYTHON] [--seconds N] [--runs N] [--no-bytecode]
  The daemon is .build/debug/exponea-authd ($EXPONEA_AUTHD_BINARY), started here in user mode on a private socket;
  the library .build/libexponea-auth/libexponea-auth.so.1 ($EXPONEA_AUTH_LIBRARY). Prints a Markdown table.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "python"

# Wall time, and the process's CPU time, which other jobs on the machine disturb less.
IMPORTS = """
import time
w0, c0 = time.perf_counter_ns(), time.process_time_ns()
import json
w1, c1 = time.perf_counter_ns(), time.process_time_ns()
import exponea_auth
w2, c2 = time.perf_counter_ns(), time.process_time_ns()
print(w1 - w0, w2 - w1, c1 - c0, c2 - c1)
"""

IDLE_APP = """
import asyncio, sys
async def main():
    if sys.argv[1] == "client":
        import exponea_auth
        auth = exponea_auth.AsyncClient("idle")
        await auth.__aenter__()
        async def refresh(request):
            return None
        auth.set_refresh_handler(refresh)
        auth.set_flush_handler(lambda: None)
        auth.set_cleared_handler(lambda cause: None)
        events = auth.token_refreshes()
        waiting = asyncio.ensure_future(events.__anext__())
    print("idle", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def counters(pid: int) -> tuple[int, int, int]:
    """Times run on a CPU (schedstat's third field), voluntary context switches, threads: over every thread."""
    runs = switches = 0
    tasks = os.listdir(f"/proc/{pid}/task")
    for task in tasks:
        runs += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[2])
        for line in Path(f"/proc/{pid}/task/{task}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                switches += int(line.split()[1])
    return runs, switches, len(tasks)


def start_daemon(root: Path) -> tuple[subprocess.Popen, str]:
    credentials = root / "credentials"
    credentials.mkdir()
    (credentials / "exponea-authd.store-key").write_bytes(bytes(range(32)))
    path, notify_path = str(root / "io.socket"), str(root / "notify.socket")
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(notify_path)
    notify.settimeout(20)
    binary = os.environ.get("EXPONEA_AUTHD_BINARY") or str(REPO / ".build/debug/exponea-authd")
    daemon = subprocess.Popen(
        [binary, "--user", "--log-target", "console", "--state-directory", str(root / "state"), "--socket", path],
        env={"HOME": str(root), "PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": str(credentials),
             "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent", "NOTIFY_SOCKET": notify_path},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while b"READY=1" not in notify.recv(4096).split(b"\n"):
        pass
    notify.close()
    return daemon, path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="import the package from its sources, without __pycache__ (as from a folder the app "
                             "cannot write to, before it is byte-compiled)")
    arguments = parser.parse_args()
    environment = {**os.environ, "PYTHONPATH": str(PACKAGE)}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)  # byte-compiled by the warm-up, as pip and py3compile do
    if arguments.no_bytecode:
        environment["PYTHONDONTWRITEBYTECODE"] = "1"
        subprocess.run(["find", str(PACKAGE / "exponea_auth"), "-name", "__pycache__", "-prune", "-exec", "rm", "-rf",
                        "{}", "+"], check=True)
    environment.setdefault("EXPONEA_AUTH_LIBRARY", str(REPO / ".build/libexponea-auth/libexponea-auth.so.1"))

    # Warm the page cache once, then fresh processes.
    subprocess.run([arguments.python, "-c", IMPORTS], env=environment, check=True, capture_output=True)
    samples: list[list[int]] = [[], [], [], []]
    for _ in range(arguments.runs):
        out = subprocess.run([arguments.python, "-c", IMPORTS], env=environment, check=True, capture_output=True,
                             text=True).stdout.split()
        for column, value in zip(samples, out):
            column.append(int(value))
    json_ms, package_ms, json_cpu, package_cpu = (statistics.median(column) / 1e6 for column in samples)

    with tempfile.TemporaryDirectory(prefix="authd-goals.") as scratch:
        daemon, path = start_daemon(Path(scratch))
        try:
            environment["EXPONEA_AUTHD_SOCKET"] = path
            apps = {}
            for kind in ("bare", "client"):
                app = subprocess.Popen([arguments.python, "-c", IDLE_APP, kind], env=environment,
                                       stdout=subprocess.PIPE, text=True)
                assert app.stdout.readline() == "idle\n"  # subscribed, handlers set, the iterator waiting
                apps[kind] = app
            # The subscription's answer comes just after the app has set it up: one wake-up, not yet idle.
            time.sleep(1)
            before = {kind: counters(app.pid) for kind, app in apps.items()}
            time.sleep(arguments.seconds)  # the interval measured: nothing happens in it
            after = {kind: counters(app.pid) for kind, app in apps.items()}
            for app in apps.values():
                app.kill()
                app.wait()
        finally:
            daemon.kill()
            daemon.wait()
    runs = {kind: after[kind][0] - before[kind][0] for kind in apps}
    switches = {kind: after[kind][1] - before[kind][1] for kind in apps}
    threads = after["client"][2]

    print(f"| figure ({arguments.python}, {sys.platform}) | value | beside | goal | met |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| `import exponea_auth`, median of {arguments.runs} processes: wall (CPU) | {package_ms:.1f} ms "
          f"({package_cpu:.1f} ms) | `import json` {json_ms:.1f} ms ({json_cpu:.1f} ms) | <= 50 ms | "
          f"{'yes' if package_ms <= 50 else 'NO'} |")
    added = runs["client"] - runs["bare"]
    print(f"| idle asyncio app with an AsyncClient, {arguments.seconds:g} s: times run / voluntary switches | "
          f"{runs['client']} / {switches['client']} | bare asyncio loop {runs['bare']} / {switches['bare']} | "
          f"0 added | {'yes' if added <= 0 and switches['client'] <= switches['bare'] else 'NO'} |")
    print(f"| threads of that app (/proc/PID/task) | {threads} | | 1 (the main thread) | "
          f"{'yes' if threads == 1 else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
