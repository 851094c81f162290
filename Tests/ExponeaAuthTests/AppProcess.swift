// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Synchronization

/// One app of a group as a process of its own (`authd-test-app`), linking ExponeaAuth, driven line by line on
/// its standard input; its output lines are what the tests wait for. Killed when released.
final class AppProcess: Sendable {
    let name: String
    private let process: Process
    private let input: FileHandle
    private let collected = Lines()

    /// The lines printed so far, shared with the pipe's reader.
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
    }

    /// Starts the app on `daemon`'s socket, with an async handler (or a plain one with `sync`).
    init(_ name: String, daemon: DaemonUnderTest, group: String = "shop", sync: Bool = false) throws {
        self.name = name
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try BuildProducts.executable("authd-test-app"))
        process.arguments = [daemon.socketPath, group] + (sync ? ["--sync"] : [])
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        let collected = self.collected
        let partial = Mutex(Data())
        try process.run()
        PipeReader.start(stdout.fileHandleForReading) { data in
            let complete: [String] = partial.withLock { buffer in
                buffer.append(data)
                var found: [String] = []
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    found.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                return found
            }
            collected.lines.withLock { $0 += complete }
        }
        self.process = process
        self.input = stdin.fileHandleForWriting
    }

    deinit { kill() }

    var pid: Int32 { process.processIdentifier }

    /// Every line it printed so far.
    var output: [String] { collected.lines.withLock { $0 } }

    /// The lines it printed that start with `prefix`.
    func lines(_ prefix: String) -> [String] { output.filter { $0.hasPrefix(prefix) } }

    /// Sends one command line.
    func send(_ line: String) { try? input.write(contentsOf: Data((line + "\n").utf8)) }

    /// Kills it with SIGKILL (a crash) and waits until it is gone.
    func kill() {
        guard process.isRunning else { return }
        Foundation.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    var isRunning: Bool { process.isRunning }
}

extension [AppProcess] {
    /// The apps whose output has a line starting with `prefix`.
    func printing(_ prefix: String) -> [AppProcess] { filter { !$0.lines(prefix).isEmpty } }

    /// The number of lines starting with `prefix`, over every app.
    func count(_ prefix: String) -> Int { reduce(0) { $0 + $1.lines(prefix).count } }
}
