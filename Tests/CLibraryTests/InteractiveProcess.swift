// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation

/// A C test program driven a line at a time: the test writes a line to its standard input, and reads the line it
/// prints back; every wait is bounded. The pipes are close-on-exec, so the child holds only its own ends and
/// closing the input ends its loop.
final class InteractiveProcess {
    private let process: SpawnedProcess
    private let input: Int32
    private let output: Int32
    private var buffer: [UInt8] = []

    /// Starts `program` with `arguments`.
    convenience init(_ program: TestProgram, _ arguments: [String]) throws {
        try self.init(program.executable, program.arguments(arguments))
    }

    init(_ executable: String, _ arguments: [String]) throws {
        let input = try SpawnPipe()
        let output = try SpawnPipe()
        process = try SpawnedProcess(
            executable, arguments, standardInput: .descriptor(input.readEnd),
            standardOutput: .descriptor(output.writeEnd))
        close(input.readEnd)
        close(output.writeEnd)
        self.input = input.writeEnd
        self.output = output.readEnd
    }

    /// Closes its input, and kills it if it has not ended by then.
    func stop() {
        close(input)
        if process.isRunning { kill(process.pid, SIGKILL) }
        _ = process.wait()
        close(output)
    }

    /// Writes `line` and a newline to its standard input.
    func send(_ line: String) throws {
        let bytes = Array((line + "\n").utf8)
        guard write(input, bytes, bytes.count) == bytes.count else { throw POSIXError(.EPIPE) }
    }

    /// One turn: a line in, the line it prints back.
    func turn(timeout: Duration = .seconds(30)) throws -> String? {
        try send("go")
        return nextLine(timeout: timeout)
    }

    /// The next line it prints, without its newline; nil at the end of its output, or when none comes within
    /// `timeout`.
    func nextLine(timeout: Duration = .seconds(30)) -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var request = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            guard poll(&request, 1, Int32(left / .milliseconds(1)) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(output, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}

extension CLibrary {
    /// Sets `group`'s token through the daemon at `socket`.
    static func setToken(_ token: String, group: String, socket: String) throws {
        let client = try UnixClient(path: socket)
        defer { client.close() }
        let reply = try client.exchange(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"\#(group)","token":"\#(token)"}}"#)
        guard reply.contains("generation") else { throw BuildFailure(output: "SetToken: \(reply)") }
    }
}
