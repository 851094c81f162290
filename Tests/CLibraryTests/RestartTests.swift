// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// A client used from several threads keeps several idle connections; when the daemon restarts, each of them is
/// closed. The calls made after the new daemon serves must all succeed: the library finds the stale connections
/// and connects again (issue 38).
@Suite("libexponea-auth across daemon restarts")
struct RestartTests {
    @Test func callsFromFourThreadsSucceedAcrossEightRestarts() throws {
        try CLibrary.build()
        let daemon = try DaemonUnderTest()
        let binary = CLibrary.buildDirectory + "/restart"
        let sources = try FileManager.default.contentsOfDirectory(atPath: CLibrary.source + "/src")
            .filter { $0.hasSuffix(".c") }.map { CLibrary.source + "/src/" + $0 }
        let compile = try ChildProcess.run(
            "/usr/bin/cc",
            [
                "-g", "-O1", "-D_GNU_SOURCE", "-I", CLibrary.source + "/include", "-I", CLibrary.source + "/src",
                CLibrary.source + "/tests/restart.c", "-o", binary, "-lpthread",
            ] + sources)
        try #require(compile.status == 0, "\(compile.standardError)")

        // Close-on-exec pipes: the child holds only its own ends, so closing the input ends its loop.
        let input = try SpawnPipe()
        let output = try SpawnPipe()
        let process = try SpawnedProcess(
            binary, [daemon.socketPath, "shop"], standardInput: .descriptor(input.readEnd),
            standardOutput: .descriptor(output.writeEnd))
        close(input.readEnd)
        close(output.writeEnd)
        defer {
            close(input.writeEnd)
            if process.isRunning { kill(process.pid, SIGKILL) }
            _ = process.wait()
            close(output.readEnd)
        }
        func send(_ line: String) throws {
            let bytes = Array((line + "\n").utf8)
            guard write(input.writeEnd, bytes, bytes.count) == bytes.count else { throw POSIXError(.EPIPE) }
        }
        let lines = LineReader(output.readEnd)
        try send(TestJWT().token(expiringIn: 3600))
        /// One round: each thread's result.
        func round() throws -> String {
            try send("go")
            return try #require(lines.next(), "the program printed no round within the bound")
        }
        let first = try round()
        #expect(first == "round 0: 0 0 0 0")
        for restart in 1...8 {
            daemon.stop(signal: SIGTERM)
            try daemon.start()
            let line = try round()
            #expect(line == "round \(restart): 0 0 0 0", "after restart \(restart)")
        }
    }
}

/// The lines a child writes to a pipe, read as they come, each wait bounded.
private final class LineReader {
    private let descriptor: Int32
    private var buffer: [UInt8] = []

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    /// The next line, without its newline; nil at the end of the output, or when none comes within `timeout`.
    func next(timeout: Duration = .seconds(30)) -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var request = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&request, 1, Int32(left / .milliseconds(1)) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(descriptor, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffer += chunk[..<count]
        }
    }
}
