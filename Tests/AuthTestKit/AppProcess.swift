// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// One app of a group as a process of its own (`authd-test-app`), linking ExponeaAuth, driven line by line on
/// its standard input; its output lines are what the tests wait for. Killed when released. The tests that use it
/// depend on the `authd-test-app` target, so that it is built.
public final class AppProcess: Sendable {
    public let name: String
    private let process: SpawnedProcess
    /// The write end of its standard input.
    private let input: Int32
    private let inputClosed = Atomic(false)
    private let collected = Lines()

    /// The lines printed so far, shared with the pipe's reader, which signals each time lines come.
    final class Lines: @unchecked Sendable {
        private let condition = NSCondition()
        private var lines: [String] = []

        var all: [String] { condition.withLock { lines } }

        func append(_ new: [String]) {
            condition.withLock {
                lines += new
                condition.broadcast()
            }
            // Not inside the lock above: a waiter over several apps holds `printed` while it reads each app's lines.
            AppProcess.printed.withLock { AppProcess.printed.broadcast() }
        }

        /// Waits until the lines satisfy `predicate`, checking each time lines come, or until `deadline`.
        func wait(until deadline: Date, _ predicate: ([String]) -> Bool) -> Bool {
            condition.withLock {
                while !predicate(lines) {
                    guard condition.wait(until: deadline) else { return predicate(lines) }
                }
                return true
            }
        }
    }

    /// Signalled whenever any app prints, for a wait over several apps' output.
    static let printed = NSCondition()

    /// Starts the app on `daemon`'s socket, with an async handler (or a plain one with `sync`).
    public init(_ name: String, daemon: DaemonUnderTest, group: String = "shop", sync: Bool = false) throws {
        self.name = name
        let stdin = try SpawnPipe()
        let stdout = try SpawnPipe()
        do {
            process = try SpawnedProcess(
                try BuildProducts.executable("authd-test-app"), [daemon.socketPath, group] + (sync ? ["--sync"] : []),
                standardInput: .descriptor(stdin.readEnd), standardOutput: .descriptor(stdout.writeEnd),
                standardError: .descriptor(stdout.writeEnd))
        } catch {
            stdin.close()
            stdout.close()
            throw error
        }
        close(stdin.readEnd)
        close(stdout.writeEnd)
        input = stdin.writeEnd
        let collected = self.collected
        let partial = Mutex(Data())
        PipeReader.start(stdout.readEnd) { data in
            let complete: [String] = partial.withLock { buffer in
                buffer.append(data)
                var found: [String] = []
                while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    found.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                return found
            }
            if !complete.isEmpty { collected.append(complete) }
        }
    }

    deinit {
        kill()
        if !inputClosed.exchange(true, ordering: .relaxed) { close(input) }
    }

    public var pid: Int32 { process.pid }

    /// Every line it printed so far.
    public var output: [String] { collected.all }

    /// The lines it printed that start with `prefix`.
    public func lines(_ prefix: String) -> [String] { output.filter { $0.hasPrefix(prefix) } }

    /// Waits until it has printed a line that starts with `prefix`, checking each time lines come (no polling),
    /// or until `timeout` passes; returns whether it has.
    public func waitForLine(_ prefix: String, timeout: Duration = .seconds(5)) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        return collected.wait(until: deadline) { $0.contains { $0.hasPrefix(prefix) } }
    }

    /// Sends one command line.
    public func send(_ line: String) {
        SpawnPipe.writeAll(Array((line + "\n").utf8), to: input)  // stops if it has exited
    }

    /// Kills it with SIGKILL (a crash) and waits until it is gone.
    public func kill() {
        guard process.isRunning else { return }
        Glibc.kill(process.pid, SIGKILL)
        process.wait()
    }

    public var isRunning: Bool { process.isRunning }
}

extension [AppProcess] {
    /// The apps whose output has a line starting with `prefix`.
    public func printing(_ prefix: String) -> [AppProcess] { filter { !$0.lines(prefix).isEmpty } }

    /// The number of lines starting with `prefix`, over every app.
    public func count(_ prefix: String) -> Int { reduce(0) { $0 + $1.lines(prefix).count } }

    /// Waits until `condition` holds of the apps, checking it each time any app prints a line (no polling), or
    /// until `timeout` passes; returns whether it holds.
    public func waitUntil(timeout: Duration = .seconds(10), _ condition: ([AppProcess]) -> Bool) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        return AppProcess.printed.withLock {
            while !condition(self) {
                guard AppProcess.printed.wait(until: deadline) else { return condition(self) }
            }
            return true
        }
    }
}
