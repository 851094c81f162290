// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// A process stopped with SIGSTOP (a daemon that keeps its socket and accepts connections, but answers nothing),
/// continued with SIGCONT by ``resume()``, when released, or after a deadline whatever happens: code under test
/// that would wait forever then ends, and its test fails instead of hanging the run.
///
/// ```swift
/// let stopped = try StoppedProcess(pid)
/// defer { stopped.resume() }
/// ```
public final class StoppedProcess: Sendable {
    public let pid: Int32
    private let continued = Atomic<Bool>(false)

    public struct NotStopped: Error, CustomStringConvertible {
        public var pid: Int32
        public var description: String { "process \(pid) did not stop within 10 s of SIGSTOP" }
    }

    /// Stops `pid` and returns once every thread of it is stopped: SIGSTOP reaches one thread, which then stops
    /// the others, so on a busy machine another thread may still run for a moment after kill(2) returns. Each
    /// thread's state in /proc, which has no event, is polled.
    public init(_ pid: Int32, deadline: Duration = .seconds(30)) throws {
        self.pid = pid
        guard kill(pid, SIGSTOP) == 0 else { throw NotStopped(pid: pid) }
        Thread.detachNewThread { [self] in
            let end = ContinuousClock.now + deadline
            while ContinuousClock.now < end && !continued.load(ordering: .relaxed) { usleep(20_000) }
            resume()
        }
        guard BackgroundProcess.waitUntil(timeout: .seconds(10), { Self.everyThreadStopped(pid) }) else {
            resume()
            throw NotStopped(pid: pid)
        }
    }

    /// Continues the process (once).
    public func resume() {
        if !continued.exchange(true, ordering: .relaxed) { kill(pid, SIGCONT) }
    }

    deinit { resume() }

    /// Whether every thread of `pid` is in state T (stopped).
    public static func everyThreadStopped(_ pid: Int32) -> Bool {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"), !tasks.isEmpty
        else { return false }
        return tasks.allSatisfy { task in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { return false }
            return stat[stat.index(after: end)...].trimmingCharacters(in: .whitespaces).hasPrefix("T")
        }
    }
}
