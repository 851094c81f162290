// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation

/// A client run as another user (`setpriv --reuid`) that floods the daemon: it opens connections, finds out
/// which the daemon holds (a GetInfo answered) and which it refused (closed at once), sends a prelude on each
/// held one (a Subscribe), then writes the same call over and over without reading a reply, until each has
/// sent its quota or the daemon takes nothing more for `stallMs` (it stopped reading). It then prints one JSON
/// line of figures, starting with `FLOODED`, and holds its connections until it is killed. With a quota of 0
/// it floods without end.
final class Flooder {
    struct Plan: Encodable {
        /// Connections to try to open.
        var connections = 1
        /// A call sent first on each held connection, or nil.
        var prelude: String?
        /// The call sent over and over.
        var message: String
        /// Bytes to send on each connection; 0: without end.
        var quota = 0
        /// How long no connection may take a byte before the daemon is taken to hold the rest back.
        var stallMs = 1000
        /// A call (not one-way) sent on each connection after its quota, whose reply is waited for: the daemon
        /// has then handled every call sent before.
        var final: String?
    }

    /// What the flooder printed once its flood was at its peak.
    struct Figures: Decodable {
        var held: Int
        var refused: Int
        var sent: Int
        var closed: Int
        var stalled: Bool
        var finalReplies: Int
    }

    let process: BackgroundProcess

    /// Starts the flood as `uid`.
    init(uid: UInt32, socket: String, plan: Plan) throws {
        let json = String(decoding: try JSONEncoder().encode(plan), as: UTF8.self)
        process = try BackgroundProcess(
            "/usr/bin/setpriv",
            [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", Self.script, socket,
                json,
            ],
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/"],
            auditsTokens: false
        )
    }

    deinit { process.stop() }

    /// Waits (bounded) for the flood to reach its peak, and returns its figures.
    func figures(timeout: Duration = .seconds(120)) throws -> Figures {
        guard
            process.waitForOutput(timeout: timeout, { $0.contains("FLOODED ") }) || !process.isRunning
        else { throw FlooderFailure(output: "no figures within \(timeout): " + process.output) }
        guard let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("FLOODED ") }) else {
            throw FlooderFailure(output: process.output)
        }
        return try JSONDecoder().decode(Figures.self, from: Data(line.dropFirst("FLOODED ".count).utf8))
    }

    func stop() { process.stop() }

    struct FlooderFailure: Error, CustomStringConvertible {
        var output: String
        var description: String { "the flooder failed: \(output.suffix(2000))" }
    }

    static let script = """
        import json, select, socket, sys, time
        path, plan = sys.argv[1], json.loads(sys.argv[2])

        def reply(connection):
            data = b""
            while not data.endswith(b"\\0"):
                chunk = connection.recv(65536)
                if not chunk:
                    return None
                data += chunk
            return data

        held, refused = [], 0
        for _ in range(plan["connections"]):
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.connect(path)
            held.append(connection)
        # A held connection answers GetInfo; a refused one is closed at once.
        kept = []
        for connection in held:
            connection.settimeout(30)
            try:
                connection.sendall(b'{"method":"org.varlink.service.GetInfo"}\\0')
                answered = reply(connection) is not None
            except OSError:
                answered = False
            if answered:
                kept.append(connection)
            else:
                refused += 1
                connection.close()
        held = kept
        for connection in held:
            if plan.get("prelude"):
                connection.sendall(plan["prelude"].encode() + b"\\0")
            connection.setblocking(False)

        message = plan["message"].encode() + b"\\0"
        chunk = message * max(1, 16384 // len(message))
        quota = plan["quota"]
        sent = {c.fileno(): 0 for c in held}
        live = {c.fileno(): c for c in held}
        poller = select.poll()
        for c in held:
            poller.register(c, select.POLLOUT)
        closed, stalled, announced = 0, False, False
        while live:
            events = poller.poll(plan["stallMs"])
            if not events:
                stalled = True
                if quota:
                    break
            for fd, event in events:
                connection = live.get(fd)
                if connection is None:
                    continue
                offset = sent[fd] % len(chunk)
                data = chunk[offset:]
                if quota:
                    data = data[: quota - sent[fd]]
                try:
                    count = connection.send(data) if not event & (select.POLLERR | select.POLLHUP) else -1
                except BlockingIOError:
                    continue
                except OSError:
                    count = -1
                if count < 0:
                    closed += 1
                    poller.unregister(fd)
                    del live[fd]
                    continue
                sent[fd] += count
                if quota and sent[fd] >= quota:
                    poller.unregister(fd)
                    del live[fd]
            if not quota and not announced and stalled is False and sum(sent.values()) > 0:
                announced = True
                print("FLOODED " + json.dumps({"held": len(held), "refused": refused, "sent": 0, "closed": 0,
                      "stalled": False, "finalReplies": 0}), flush=True)
        final_replies = 0
        if plan.get("final"):
            for c in held:
                try:
                    c.setblocking(True)
                    c.settimeout(120)
                    c.sendall(plan["final"].encode() + b"\\0")
                    if reply(c) is not None:
                        final_replies += 1
                except OSError:
                    pass
        figures = {"held": len(held), "refused": refused, "sent": sum(sent.values()), "closed": closed,
                   "stalled": stalled, "finalReplies": final_replies}
        if not announced:
            print("FLOODED " + json.dumps(figures), flush=True)
        # Holds its connections until the test kills it.
        while True:
            time.sleep(3600)
        """
}
