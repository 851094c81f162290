// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Another user's process listening where a client expects exponea-authd, as an attacker would plant it: a
/// socket at `path` (mode 0666, its directory created by that user when missing), served as `uid` through
/// `setpriv`, that records every byte it receives and hangs up after the first whole message, answering
/// nothing (so that a client that sends a call fails rather than waits).
///
/// The server prints `listening`, then for each connection, once the client has closed it,
/// `connection <n> bytes`: ``connections`` waits for that line, so a test knows what a client sent without
/// sleeping.
public final class PlantedServer: @unchecked Sendable {
    /// The socket.
    public let path: String
    /// Who listens.
    public let uid: UInt32
    private let process: BackgroundProcess

    private static let script = """
        import os, socket, sys
        path = sys.argv[1]
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o666)
        server.listen(16)
        print("listening", flush=True)
        while True:
            connection, _ = server.accept()
            received = 0
            while True:
                chunk = connection.recv(65536)
                received += len(chunk)
                # A whole call (what an attacker wants) or the client's close: hang up, so no client waits.
                if not chunk or chunk.endswith(b"\\0"):
                    break
            connection.close()
            print(f"connection {received} bytes", flush=True)
        """

    /// Starts the server as `uid` (and gid `uid`, no supplementary groups) and waits until it listens.
    public init(path: String, uid: UInt32) throws {
        self.path = path
        self.uid = uid
        process = try BackgroundProcess(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", Self.script, path],
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/"]
        )
        guard process.waitForOutput({ $0.contains("listening") }) else {
            throw StartFailure(output: process.output)
        }
    }

    /// The bytes received on each connection closed so far, after waiting (up to 5 s) for at least `count`.
    public func connections(atLeast count: Int) -> [Int] {
        _ = waitForClosedConnections(atLeast: count)
        return received
    }

    /// Waits until at least `count` connections have closed, reading each line as it comes; whether they have.
    public func waitForClosedConnections(atLeast count: Int, timeout: Duration = .seconds(5)) -> Bool {
        process.waitForOutput(timeout: timeout) { Self.received(in: $0).count >= count }
    }

    /// The bytes received on each connection closed so far.
    public var received: [Int] { Self.received(in: process.output) }

    private static func received(in output: String) -> [Int] {
        output.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 3, words[0] == "connection" else { return nil }
            return Int(words[1])
        }
    }

    /// Stops the server.
    public func stop() { process.stop() }

    deinit { stop() }

    struct StartFailure: Error, CustomStringConvertible {
        var output: String
        var description: String { "the planted server did not start: \(output)" }
    }
}
