// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The floor: the least a Unix-socket request and reply can cost. A blocking server, one thread per
/// connection, that answers each NUL-terminated message with a canned reply of the daemon's reply size, and
/// does nothing else. Run by the benchmark as a process of its own, like the daemon.
struct FloorServer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "floor-server", abstract: "Serve canned replies on a Unix socket (the benchmark's floor).",
        shouldDisplay: false)

    @Option(help: "The socket path.") var socket: String
    @Option(help: "Bytes in each reply, NUL excluded.") var replySize: Int

    func run() throws {
        unlink(socket)
        let listener = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard UnixSocketAddress.withAddress(socket, { bind(listener, $0, $1) }) == 0, listen(listener, 1024) == 0 else {
            throw BenchError.system("listen \(socket)", errno)
        }
        let reply = [UInt8](repeating: UInt8(ascii: "x"), count: replySize) + [0]
        while true {
            let descriptor = accept(listener, nil, nil)
            guard descriptor >= 0 else { continue }
            let thread = Thread {
                let connection = UnixStream(descriptor: descriptor)
                while (try? connection.receive()) != nil {
                    guard (try? connection.send(reply)) != nil else { return }
                }
            }
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }

    /// Starts the floor server as a child process of this executable and waits until it listens.
    static func spawn(socket: String, replySize: Int) throws -> Process {
        try start(
            "/proc/self/exe", ["floor-server", "--socket", socket, "--reply-size", "\(replySize)"], listeningOn: socket)
    }

    /// Starts `executable` with `arguments` (its standard error to `log`, when given) and waits until it listens
    /// on `socket`.
    static func start(_ executable: String, _ arguments: [String], listeningOn socket: String, log: String? = nil)
        throws -> Process
    {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let log {
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: log)
        }
        try process.run()
        for _ in 0..<500 {
            if let probe = try? UnixStream(connectingTo: socket) {
                _ = probe
                return process
            }
            usleep(10_000)
        }
        process.terminate()
        throw BenchError.daemon("\(executable) did not start listening on \(socket)")
    }
}
