#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A local stand-in for an integrator's token backend and a Bloomreach event stream, for the examples and their
tests. Standard library only.

  POST /token?generation=N   mints a stream JWT (HS512, exp = now + --lifetime): {"token": ..., "expiresIn": ...};
                             counts the fetch for generation N (the one the app's refresh handler refreshes)
  POST /track/...            an event stream request: 200 with the newest token; 401 with an expired one
                             ({"token_expired": true}), a superseded, forged or missing one
  POST /control/reject-next  the next stream request gets a 401 whatever it carries
  GET  /stats                {"fetches": n, "fetchesPerGeneration": {...}, "requests": n, "accepted": n, ...}

Prints the port it listens on (127.0.0.1, chosen by the kernel unless --port) as its first line.
"""
import argparse
import base64
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

SECRET = b"test-backend-secret-of-at-least-64-bytes-for-hs512-0123456789abcdef"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint(lifetime, ids):
    header = b64(json.dumps({"alg": "HS512", "typ": "JWT", "kid": "test"}).encode())
    payload = b64(json.dumps({"exp": int(time.time()) + lifetime, "ids": ids}).encode())
    signature = hmac.new(SECRET, (header + "." + payload).encode(), hashlib.sha512).digest()
    return header + "." + payload + "." + b64(signature)


def expiry(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"]


class Backend:
    def __init__(self, lifetime):
        self.lifetime = lifetime
        self.lock = threading.Lock()
        self.newest = None
        self.issued = set()
        self.reject_next = False
        self.stats = {"fetches": 0, "fetchesPerGeneration": {}, "requests": 0, "accepted": 0, "expired": 0,
                      "superseded": 0, "missing": 0, "forged": 0, "rejectedOnPurpose": 0}

    def fetch(self, generation):
        with self.lock:
            token = mint(self.lifetime, {"registered": "test-backend"})
            self.newest = token
            self.issued.add(token)
            self.stats["fetches"] += 1
            per = self.stats["fetchesPerGeneration"]
            per[generation] = per.get(generation, 0) + 1
            return token

    def judge(self, authorization):
        """The status and body of a stream request."""
        with self.lock:
            self.stats["requests"] += 1
            if self.reject_next:
                self.reject_next = False
                self.stats["rejectedOnPurpose"] += 1
                return 401, {"error": "rejected on purpose"}
            if not authorization.startswith("Bearer "):
                self.stats["missing"] += 1
                return 403, {"error": "no token"}
            token = authorization[len("Bearer "):]
            if token not in self.issued:
                self.stats["forged"] += 1
                return 401, {"error": "unknown token"}
            if expiry(token) <= time.time():
                self.stats["expired"] += 1
                return 401, {"token_expired": True}
            if token != self.newest:
                self.stats["superseded"] += 1
                return 401, {"error": "superseded token"}
            self.stats["accepted"] += 1
            return 200, {"success": True}


def handler_for(backend):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, *args):  # quiet: the tests read stdout
            pass

        def reply(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if urlparse(self.path).path == "/stats":
                with backend.lock:
                    self.reply(200, backend.stats)
            else:
                self.reply(404, {"error": "no such path"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            url = urlparse(self.path)
            if url.path == "/token":
                generation = parse_qs(url.query).get("generation", ["?"])[0]
                self.reply(200, {"token": backend.fetch(generation), "expiresIn": backend.lifetime})
            elif url.path == "/control/reject-next":
                with backend.lock:
                    backend.reject_next = True
                self.reply(200, {})
            elif url.path.startswith("/track/"):
                self.reply(*backend.judge(self.headers.get("Authorization") or ""))
            else:
                self.reply(404, {"error": "no such path"})

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lifetime", type=int, default=3600, help="seconds a minted token is valid")
    arguments = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", arguments.port), handler_for(Backend(arguments.lifetime)))
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
