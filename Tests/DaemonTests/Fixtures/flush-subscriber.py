#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""An app of a group, as a separate process: subscribes to the group's events on exponea-authd's socket and,
on flushRequested, acknowledges it (unless told to stay silent). Prints "subscribed" once the group's state
arrives (the daemon sends it once it has registered the subscription), then each event kind as it arrives, and
exits after `cleared`.

Usage: flush-subscriber.py SOCKET GROUP ack|silent
"""
import json
import socket
import sys

path, group, mode = sys.argv[1], sys.argv[2], sys.argv[3]


def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    return s


def call(s, message):
    s.sendall(json.dumps(message).encode() + b"\0")


def replies(s):
    buffer = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            return
        buffer += chunk
        while b"\0" in buffer:
            message, buffer = buffer.split(b"\0", 1)
            yield json.loads(message)


events = connect()
call(events, {"method": "com.exponea.Auth.Subscribe", "more": True, "parameters": {"group": group}})
for reply in replies(events):
    event = reply["parameters"]["event"]
    if event["kind"] == "state":
        print("subscribed", flush=True)
    print(event["kind"], flush=True)
    if event["kind"] == "flushRequested" and mode == "ack":
        control = connect()
        call(control, {"method": "com.exponea.Auth.AcknowledgeFlush", "parameters": {"group": group, "flushId": event["flushId"]}})
        next(replies(control))
        control.close()
    if event["kind"] == "cleared":
        break
