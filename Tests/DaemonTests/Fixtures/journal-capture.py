#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs a command with a stand-in journald: binds /run/systemd/journal/socket (run this in a private mount
namespace with a tmpfs on /run/systemd), starts the command, collects the native-protocol datagrams it sends
until it has logged `--until` or 5 s pass, stops it with SIGTERM and prints each entry as JSON, one per line.

Usage: journal-capture.py --until TEXT -- COMMAND [ARGS...]
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

args = sys.argv[1:]
until = args[args.index("--until") + 1]
command = args[args.index("--") + 1 :]

os.makedirs("/run/systemd/journal", exist_ok=True)
server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
server.bind("/run/systemd/journal/socket")
server.settimeout(0.2)

child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def parse(datagram):
    """The journal's native protocol: FIELD=value lines, or FIELD, a little-endian 64-bit size and raw bytes."""
    fields, i = {}, 0
    while i < len(datagram):
        newline = datagram.index(b"\n", i)
        line = datagram[i:newline]
        if b"=" in line:
            name, value = line.split(b"=", 1)
            i = newline + 1
        else:
            name = line
            size = int.from_bytes(datagram[newline + 1 : newline + 9], "little")
            value = datagram[newline + 9 : newline + 9 + size]
            i = newline + 9 + size + 1
        fields[name.decode()] = value.decode("utf-8", "replace")
    return fields


entries, deadline = [], time.monotonic() + 5
while time.monotonic() < deadline and not any(until in e.get("MESSAGE", "") for e in entries):
    try:
        entries.append(parse(server.recv(65536)))
    except socket.timeout:
        pass
child.send_signal(signal.SIGTERM)
try:
    child.wait(timeout=5)
except subprocess.TimeoutExpired:
    child.kill()
for entry in entries:
    print(json.dumps(entry, sort_keys=True))
