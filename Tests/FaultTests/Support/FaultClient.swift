// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Synchronization

/// A Varlink connection to the daemon under test for fault tests: JSON objects in and out, buffered reads (a
/// test may read tens of thousands of replies), and writes that fail with an error instead of SIGPIPE when the
/// daemon is gone or has closed the connection.
final class FaultClient: @unchecked Sendable {
    // @unchecked: one thread reads and writes a client at a time; `closed` is atomic.
    let socket: UnixClient
    var descriptor: Int32 { socket.descriptor }
    private var buffer: [UInt8] = []
    private var start = 0
    private let closed = Atomic<Bool>(false)

    init(path: String, receiveTimeout: Duration = .seconds(20)) throws {
        socket = try UnixClient(path: path, receiveTimeout: receiveTimeout)
    }

    /// Closes the socket, once: a second close(2) of the number could close another thread's socket that
    /// reused it, and send one test's calls to another test's daemon.
    func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        socket.close()
    }

    deinit { close() }

    /// One reply: its parameters, or the error it names; `text` is the reply as sent.
    struct Reply: @unchecked Sendable {
        // @unchecked: the JSON values are immutable once parsed.
        var text: String
        var error: String?
        var parameters: [String: Any]
        var continues: Bool
    }

    /// A reply that names an error, thrown by ``call(_:_:)``.
    struct Failure: Error, CustomStringConvertible {
        var name: String
        var text: String
        var description: String { text }
    }

    /// Calls `method` of `com.exponea.Auth` (or a fully qualified one) and returns the reply's parameters, or
    /// throws its error.
    @discardableResult
    func call(_ method: String, _ parameters: [String: Any] = [:]) throws -> [String: Any] {
        try send(method, parameters)
        let reply = try reply()
        if let error = reply.error { throw Failure(name: error, text: reply.text) }
        return reply.parameters
    }

    /// Sends a call without waiting for its reply.
    func send(_ method: String, _ parameters: [String: Any] = [:], more: Bool = false) throws {
        try sendRaw(Self.encode(method, parameters, more: more))
    }

    /// The call as framed on the wire, NUL included.
    static func encode(_ method: String, _ parameters: [String: Any], more: Bool = false) -> [UInt8] {
        let qualified = method.contains(".") ? method : "com.exponea.Auth." + method
        var message: [String: Any] = ["method": qualified, "parameters": parameters]
        if more { message["more"] = true }
        let data = try! JSONSerialization.data(withJSONObject: message, options: [.sortedKeys])
        return Array(data) + [0]
    }

    /// Writes `bytes` whole; throws when the connection is closed (no SIGPIPE).
    func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPIPE) }
            offset += written
        }
    }

    /// The next reply.
    func reply() throws -> Reply {
        let text = try nextMessage()
        let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        return Reply(
            text: text,
            error: object["error"] as? String,
            parameters: object["parameters"] as? [String: Any] ?? [:],
            continues: object["continues"] as? Bool ?? false
        )
    }

    /// The next reply, or nil when none has come within `timeout`.
    func reply(timeout: Duration) throws -> Reply? {
        let deadline = ContinuousClock.now + timeout
        while !hasBufferedMessage {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return nil }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(max(1, left / .milliseconds(1))))
            if ready < 0 && errno != EINTR { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            if ready > 0 { try fill() }
        }
        return try reply()
    }

    /// Ends both directions without closing the descriptor: a thread blocked reading it wakes up with the end
    /// of the stream. Close it once that thread is done.
    func shutDown() { _ = Glibc.shutdown(descriptor, Int32(SHUT_RDWR)) }

    /// The next message, without its NUL.
    func nextMessage() throws -> String {
        while true {
            if let end = buffer[start...].firstIndex(of: 0) {
                let message = String(decoding: buffer[start..<end], as: UTF8.self)
                start = end + 1
                if start == buffer.count {
                    buffer.removeAll(keepingCapacity: true)
                    start = 0
                }
                return message
            }
            try fill()
        }
    }

    /// Whether a whole message is already buffered.
    var hasBufferedMessage: Bool { buffer[start...].contains(0) }

    /// Reads what the socket has (blocking until something comes); throws at the end of the stream.
    func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
                return
            }
            if count < 0 && errno == EINTR { continue }
            throw POSIXError(count < 0 && errno == EAGAIN ? .ETIMEDOUT : .ECONNRESET)
        }
    }

    /// Whether the daemon closes the connection within `timeout` (what it sent meanwhile is read and dropped).
    /// Bytes sent that the peer has not read yet (`SIOCOUTQ`: on a Unix stream socket, what still sits in the
    /// peer's receive queue), or nil when the socket cannot tell.
    var unreadByPeer: Int? {
        var count: Int32 = 0
        return ioctl(descriptor, UInt(TIOCOUTQ), &count) == 0 ? Int(count) : nil
    }

    func closedByPeer(within timeout: Duration) -> Bool { (try? socket.receiveUntilClosed(timeout: timeout)) == true }
}

/// What `/proc` says about a process: how much memory it holds and how many descriptors it has open.
struct ProcessFigures: CustomStringConvertible {
    /// `VmRSS`, in KiB.
    var residentKiB: Int
    /// Entries of `/proc/PID/fd`.
    var descriptors: Int

    init(pid: Int32) throws {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        residentKiB = Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count
    }

    var description: String { "RSS \(residentKiB) KiB, \(descriptors) fds" }

    /// The daemon's descriptors, or -1 when it has gone.
    static func descriptors(of pid: Int32) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }
}

/// The `fraction` quantile (0.99 for p99) of `samples`, by the nearest-rank method.
func quantile(_ fraction: Double, of samples: [Duration]) -> Duration {
    let sorted = samples.sorted()
    guard !sorted.isEmpty else { return .zero }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

extension Duration {
    /// In milliseconds, for messages.
    var milliseconds: Double { Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15 }
}

/// Runs `body` on `count` threads of their own (not the concurrency pool's) and waits for all of them.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    Thread.detachedGroup(count, body).wait()
}

extension Thread {
    /// Starts `count` threads running `body` and returns what to wait on for them to end.
    static func detachedGroup(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> DispatchGroup {
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread {
                body(index)
                group.leave()
            }.start()
        }
        return group
    }
}

/// A value shared by threads, behind a lock.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try lock.withLock { try body(&value) }
    }
}

/// A count that threads add to and a thread waits on, woken by each addition (no polling): for a test that
/// blocks its thread, where ``CountBarrier`` is for tasks.
final class Tally: @unchecked Sendable {
    // @unchecked: `value` is only touched under `condition`.
    private let condition = NSCondition()
    private var value = 0

    /// The count now.
    var count: Int { condition.withLock { value } }

    /// Adds one and wakes the waiter.
    func increment() {
        condition.withLock {
            value += 1
            condition.broadcast()
        }
    }

    /// Waits until the count is at least `target`, or `timeout` passed: whether it got there.
    func wait(until target: Int, timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        return condition.withLock {
            while value < target {
                guard condition.wait(until: deadline) else { return value >= target }
            }
            return true
        }
    }
}

/// Raises this test process's soft limit on open files to its hard limit (the daemon it starts inherits it),
/// and returns the hard limit.
@discardableResult
func raiseOpenFileLimit() -> Int {
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
    return limit.rlim_max > rlim_t(Int.max) ? Int.max : Int(limit.rlim_max)
}
