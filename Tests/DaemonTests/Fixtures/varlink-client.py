#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The reference Varlink client (PyPI `varlink`) against exponea-authd, unchanged: GetInfo,
GetInterfaceDescription, SetToken and a streamed Subscribe. The token comes on standard input, never in argv.
Prints one JSON line per result.

Usage: varlink-client.py SOCKET GROUP < token
"""
import json
import sys
import threading

import varlink

address, group = "unix:" + sys.argv[1], sys.argv[2]
token = sys.stdin.read().strip()


def show(name, value):
    print(json.dumps({name: value}, sort_keys=True), flush=True)


with varlink.Client(address=address) as client:
    with client.open("org.varlink.service") as service:
        info = service.GetInfo()
        show("info", {"product": info["product"], "interfaces": info["interfaces"]})
        description = service.GetInterfaceDescription("com.exponea.Auth")["description"]
        show("description", description.splitlines()[5])

    events = []
    subscribed = threading.Event()

    def subscribe():
        with client.open("com.exponea.Auth") as auth:
            for reply in auth.Subscribe(group, _more=True):
                if reply["event"]["kind"] == "state":
                    # Where the group stood when subscribed: the subscription is registered. The test looks at
                    # what follows.
                    subscribed.set()
                    continue
                events.append(reply["event"])
                if len(events) == 1:
                    return

    listener = threading.Thread(target=subscribe)
    listener.start()
    with client.open("com.exponea.Auth") as auth:
        # Once the subscription is registered (its first event says so), set the token.
        subscribed.wait(timeout=10)
        result = auth.SetToken(group, token)
        show("set", {"generation": result["generation"], "algorithm": result["claims"]["algorithm"]})
        try:
            auth.SetToken(group, "not-a-token")
        except varlink.VarlinkError as error:
            show("error", {"error": error.error(), "code": error.parameters()["code"]})
    listener.join(timeout=10)
    show("event", events[0] if events else None)
