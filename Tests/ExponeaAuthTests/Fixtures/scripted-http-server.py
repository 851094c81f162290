#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the Bloomreach API: answers each request with the next scripted response and prints one
JSON line per request it saw (method, path, the headers that matter). The last response repeats.

Usage: scripted-http-server.py STATUS[:BODY] ...   (prints "port N" first)
"""
import http.server
import json
import sys

script = [(int(s.split(":", 1)[0]), s.split(":", 1)[1] if ":" in s else "{}") for s in sys.argv[1:]] or [(200, "{}")]
seen = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global seen
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        print(json.dumps({
            "method": self.command,
            "path": self.path,
            "authorization": self.headers.get("Authorization"),
            "contentType": self.headers.get("Content-Type"),
            "accept": self.headers.get("Accept"),
            "body": body,
        }), flush=True)
        status, reply = script[min(seen, len(script) - 1)]
        seen += 1
        data = reply.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"port {server.server_address[1]}", flush=True)
server.serve_forever()
