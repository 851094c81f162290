// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// A child process started with `posix_spawn` and reaped with `waitpid`.
///
/// Not Foundation's `Process`: on Linux its exit monitoring once missed a child's exit, leaving a zombie and
/// `waitUntilExit` spinning on a CPU for as long as the test run lasted, and its output handlers crashed
/// libdispatch (``PipeReader``). `waitpid` on the child's own pid cannot miss.
///
/// The child inherits the calling thread's signal mask, as it did through `Process`.
public final class SpawnedProcess: Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// The test process's own.
        case inherit
        /// `/dev/null`.
        case null
        /// A descriptor of the test's, duplicated onto the stream; the caller keeps and closes its own.
        case descriptor(Int32)
    }

    /// The child's process id.
    public let pid: pid_t
    private let path: String
    private let ended = Mutex<Int32?>(nil)

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameter environment: Replaces the environment when given; the test's is inherited otherwise.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        standardInput: Stream = .inherit, standardOutput: Stream = .inherit, standardError: Stream = .inherit
    ) throws {
        path = executable
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, target) in [
            (standardInput, STDIN_FILENO), (standardOutput, STDOUT_FILENO), (standardError, STDERR_FILENO),
        ] {
            switch stream {
            case .inherit: break
            case .null:
                posix_spawn_file_actions_addopen(
                    &actions, target, "/dev/null", target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, target)
            }
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for entry in envp ?? [] { free(entry) } }
        var child: pid_t = 0
        let result = argv.withUnsafeBufferPointer { argv in
            if let envp {
                return envp.withUnsafeBufferPointer { envp in
                    posix_spawn(&child, executable, &actions, nil, argv.baseAddress!, envp.baseAddress!)
                }
            }
            return posix_spawn(&child, executable, &actions, nil, argv.baseAddress!, environ)
        }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        pid = child
    }

    /// Whether it still runs (it is reaped once it has ended).
    public var isRunning: Bool {
        ended.withLock { ended in
            guard ended == nil else { return false }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return true }
            ended = status
            return false
        }
    }

    /// Waits until it ends, and returns ``terminationStatus``.
    @discardableResult
    public func wait() -> Int32 {
        if let status = ended.withLock({ $0 }) { return Self.decode(status) }
        var status: Int32 = 0
        var reaped: pid_t
        repeat { reaped = waitpid(pid, &status, 0) } while reaped < 0 && errno == EINTR
        return ended.withLock { ended in
            // Another thread may have reaped it first (then this waitpid failed with ECHILD).
            if reaped == pid && ended == nil { ended = status }
            return Self.decode(ended ?? status)
        }
    }

    /// Waits until it ends or `timeout` passes, on the process's pidfd (the exit itself, no polling); returns
    /// whether it ended, and reaps it if so.
    public func waitForExit(timeout: Duration) -> Bool {
        if ended.withLock({ $0 != nil }) { return true }
        // Nil: reaped by another thread meanwhile.
        guard Self.waitForExit(of: pid, timeout: timeout) ?? !isRunning else { return false }
        wait()
        return true
    }

    /// Waits until the process `pid` (any process, not only a child) has exited or `timeout` passes, on its
    /// pidfd: whether it exited (a zombie has). Nil when the pid names no process (it was reaped already).
    public static func waitForExit(of pid: Int32, timeout: Duration) -> Bool? {
        let descriptor = pidfdOpen(pid, 0)
        guard descriptor >= 0 else { return nil }
        defer { Glibc.close(descriptor) }
        let deadline = ContinuousClock.now + timeout
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let left = ContinuousClock.now.duration(to: deadline) / .milliseconds(1)
            let milliseconds = Int32(clamping: Int64(max(0, left.rounded(.up))))
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return true }
            if ready == 0 { return false }
            if errno != EINTR { return nil }
        }
    }

    /// Its exit status, or the number of the signal that ended it, as Foundation's `Process` has it; nil while
    /// it runs.
    public var terminationStatus: Int32? { ended.withLock { $0 }.map(Self.decode) }

    /// Whether a signal ended it; nil while it runs.
    public var endedBySignal: Bool? { ended.withLock { $0 }.map { $0 & 0x7f != 0 } }

    /// The executable's file name, for messages.
    public var name: String { path.split(separator: "/").last.map(String.init) ?? path }

    private static func decode(_ status: Int32) -> Int32 {
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }
}

/// A pipe whose ends are closed on exec: the child gets its end by ``SpawnedProcess/Stream/descriptor(_:)``.
public struct SpawnPipe: Sendable {
    public let readEnd: Int32
    public let writeEnd: Int32

    public init() throws {
        var ends: [Int32] = [0, 0]
        // Close-on-exec from the start: a child another test spawns meanwhile must not hold a write end, or the
        // reader would never see the end of the output.
        guard systemPipe2(&ends, O_CLOEXEC) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        (readEnd, writeEnd) = (ends[0], ends[1])
    }

    /// Closes both ends: the spawn they were made for failed.
    public func close() {
        Glibc.close(readEnd)
        Glibc.close(writeEnd)
    }

    /// Writes all of `bytes` to `descriptor`, retrying after a signal; stops when the reader is gone.
    ///
    /// A pipe whose reader exited raises SIGPIPE, which would kill the test process (servers under test run in
    /// it, so it cannot ignore the signal process-wide and hide a missing `MSG_NOSIGNAL` of theirs). The signal
    /// is blocked on this thread for the write, and one it raised is taken off the thread before unblocking.
    public static func writeAll(_ bytes: [UInt8], to descriptor: Int32) {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer {
            var pending = sigset_t()
            let raised = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1
            if raised && sigismember(&previous, SIGPIPE) == 0 {
                var now = timespec(tv_sec: 0, tv_nsec: 0)
                _ = sigtimedwait(&pipeSignal, nil, &now)
            }
            pthread_sigmask(SIG_SETMASK, &previous, nil)
        }
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            sent += count
        }
    }
}

/// `pidfd_open(2)` (glibc 2.36, Linux 5.3), which Swift's Glibc module does not import.
@_silgen_name("pidfd_open")
private func pidfdOpen(_ pid: pid_t, _ flags: UInt32) -> Int32

/// `pipe2(2)`, which Swift's Glibc module hides behind `_GNU_SOURCE`.
@_silgen_name("pipe2")
private func systemPipe2(_ ends: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32
