// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// A private `dbus-daemon` for one test: its own socket in a temporary directory, a permissive policy, and
/// monitoring allowed, so a test can own names, emit signals and watch them with `dbus-monitor`.
public final class PrivateBus: @unchecked Sendable {
    /// The address to connect to (`unix:path=…`).
    public let address: String
    private let process: SpawnedProcess
    /// The read end of the daemon's standard output, open while it runs.
    private let output: Int32
    private let stopped = Atomic(false)
    private let directory: TemporaryDirectory

    /// Starts the daemon and waits until it prints its address.
    ///
    /// - Parameters:
    ///   - socketPath: Where the bus listens; a fresh name in a temporary directory when nil.
    ///   - systemPolicy: A D-Bus policy file to include in a bus configured like the system bus (nobody may
    ///     own a name or call a method unless a policy allows it); nil for a permissive session bus.
    public init(socketPath: String? = nil, systemPolicy: String? = nil) throws {
        directory = try TemporaryDirectory(prefix: "authd-bus")
        if systemPolicy != nil {
            // Like the system bus, reachable by every user.
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: directory.path)
        }
        let listen = socketPath.map { "unix:path=\($0)" } ?? "unix:dir=\(directory.path)"
        let config = directory.appending("bus.conf")
        let policy =
            systemPolicy.map {
                """
                <policy context="default">
                  <allow user="*"/>
                  <deny own="*"/>
                  <deny send_type="method_call"/>
                  <allow send_type="signal"/>
                  <allow send_requested_reply="true" send_type="method_return"/>
                  <allow send_requested_reply="true" send_type="error"/>
                  <allow receive_type="method_call"/>
                  <allow receive_type="method_return"/>
                  <allow receive_type="error"/>
                  <allow receive_type="signal"/>
                  <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
                  <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
                  <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
                  <allow eavesdrop="true"/>
                </policy>
                <include>\($0)</include>
                """
            } ?? """
                <policy context="default">
                  <allow user="*"/>
                  <allow own="*"/>
                  <allow send_type="method_call"/>
                  <allow send_type="signal"/>
                  <allow send_requested_reply="true" send_type="method_return"/>
                  <allow send_requested_reply="true" send_type="error"/>
                  <allow receive_type="method_call"/>
                  <allow receive_type="method_return"/>
                  <allow receive_type="error"/>
                  <allow receive_type="signal"/>
                  <allow eavesdrop="true"/>
                </policy>
                """
        try """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>session</type>
          <listen>\(listen)</listen>
          <auth>EXTERNAL</auth>
        \(policy)
        </busconfig>
        """.write(toFile: config, atomically: true, encoding: .utf8)

        let output = try SpawnPipe()
        do {
            process = try SpawnedProcess(
                "/usr/bin/dbus-daemon", ["--config-file=\(config)", "--nofork", "--nopidfile", "--print-address=1"],
                standardOutput: .descriptor(output.writeEnd), standardError: .null)
        } catch {
            output.close()
            throw error
        }
        close(output.writeEnd)
        self.output = output.readEnd
        address = try Self.readLine(output.readEnd)
    }

    /// Stops the daemon and removes its directory.
    public func stop() {
        if process.isRunning {
            // SIGKILL: children of a test inherit its worker thread's signal mask, where SIGTERM is blocked.
            kill(process.pid, SIGKILL)
        }
        process.wait()
        if stopped.exchange(true, ordering: .relaxed) == false { close(output) }
        directory.remove()
    }

    deinit { stop() }

    private static func readLine(_ descriptor: Int32) throws -> String {
        var bytes: [UInt8] = []
        while true {
            var byte: UInt8 = 0
            let count = read(descriptor, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else { throw StartFailure() }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    struct StartFailure: Error, CustomStringConvertible {
        var description: String { "dbus-daemon exited before printing its address; is the dbus package installed?" }
    }
}

/// A program started in the background whose standard output and standard error are collected as they come,
/// such as `dbus-monitor` or the daemon. Killed on `stop()`.
public final class BackgroundProcess: @unchecked Sendable {
    private let process: SpawnedProcess
    /// Guards what is collected, and is signalled each time output comes or ends.
    private let lock = NSCondition()
    private var collected = Data()
    private var ended = false
    private let auditsTokens: Bool
    private var audited = false

    /// - Parameter auditsTokens: When it has stopped, the process's output must contain no token minted by
    ///   ``TestJWT`` in this test process; each one it contains is a test issue. By default, when the program or
    ///   one of its arguments is exponea-authd, which must never log a token (a wrapper such as
    ///   `systemd-socket-activate` prints what the daemon prints).
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, auditsTokens: Bool? = nil
    ) throws {
        self.auditsTokens =
            auditsTokens ?? ([executable] + arguments).contains { $0.split(separator: "/").last == "exponea-authd" }
        let output = try SpawnPipe()
        do {
            process = try SpawnedProcess(
                executable, arguments, environment: environment, standardOutput: .descriptor(output.writeEnd),
                standardError: .descriptor(output.writeEnd))
        } catch {
            output.close()
            throw error
        }
        close(output.writeEnd)
        PipeReader.start(
            output.readEnd,
            received: { [weak self] data in
                guard let self else { return }
                self.lock.withLock {
                    self.collected.append(data)
                    self.lock.broadcast()
                }
                // Not inside the lock above: a wait over several processes reads each one's output under `printed`.
                Self.printed.withLock { Self.printed.broadcast() }
            },
            ended: { [weak self] in
                guard let self else { return }
                self.lock.withLock {
                    self.ended = true
                    self.lock.broadcast()
                }
            })
    }

    /// Signalled whenever any background process prints, for a wait over several processes' output.
    private static let printed = NSCondition()

    /// Waits until `condition` holds, checking it each time any background process prints (no polling), or until
    /// `timeout` passes; returns whether it holds. For a condition over the output of several processes.
    public static func waitUntilPrinted(timeout: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        return printed.withLock {
            while !condition() {
                guard printed.wait(until: deadline) else { return condition() }
            }
            return true
        }
    }

    /// Everything the process printed so far.
    public var output: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

    /// Waits until the output's whole lines so far satisfy `condition`, checking them each time output comes (no
    /// polling), or until `timeout` passes or the output ends without it. Only whole lines: a test that goes on to
    /// read ``output`` finds the line it waited for complete.
    public func waitForOutput(timeout: Duration = .seconds(5), _ condition: (String) -> Bool) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        lock.lock()
        defer { lock.unlock() }
        while true {
            let lines = collected.lastIndex(of: UInt8(ascii: "\n")).map { collected[...$0] } ?? Data()
            if condition(String(decoding: lines, as: UTF8.self)) { return true }
            if ended || !lock.wait(until: deadline) { return condition(String(decoding: collected, as: UTF8.self)) }
        }
    }

    /// Waits until `condition` holds for the whole lines so far that start with `prefix`, in order, checking each
    /// time output comes (no polling), or until `timeout` passes or the output ends without it. Each check reads
    /// only the lines that came since the one before, so a wait over tens of thousands of lines (a debug line per
    /// connection) costs what came, not the whole output each time; the lines before the wait count as well.
    public func waitForLines(
        startingWith prefix: String, timeout: Duration = .seconds(5), _ condition: ([String]) -> Bool
    ) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        let wanted = Array(prefix.utf8)
        var lines: [String] = []
        var scanned = 0
        lock.lock()
        defer { lock.unlock() }
        var last = false
        while true {
            collected.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                while scanned < bytes.count,
                    let newline = memchr(base + scanned, Int32(UInt8(ascii: "\n")), bytes.count - scanned)
                {
                    let end = UnsafeRawPointer(newline) - base
                    if end - scanned >= wanted.count && memcmp(base + scanned, wanted, wanted.count) == 0 {
                        lines.append(
                            String(decoding: UnsafeRawBufferPointer(rebasing: bytes[scanned..<end]), as: UTF8.self))
                    }
                    scanned = end + 1
                }
            }
            if condition(lines) { return true }
            if last { return false }
            // Once more after the end or the bound: what came last is read.
            if ended || !lock.wait(until: deadline) { last = true }
        }
    }

    /// The process id.
    public var pid: Int32 { process.pid }

    /// Whether it still runs.
    public var isRunning: Bool { process.isRunning }

    /// Waits until it ends (its pidfd, no polling) and its output is read to the end, or `timeout` passes;
    /// returns whether it ended.
    public func waitForExit(timeout: Duration = .seconds(5)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        guard process.waitForExit(timeout: timeout) else { return false }
        // The end of the output comes a moment after the exit (once the reader has read the rest).
        _ = waitForOutput(timeout: max(.zero, ContinuousClock.now.duration(to: deadline))) { _ in false }
        return true
    }

    /// Sends `signal` and waits for the process to end; returns its exit status, or the signal that ended it.
    ///
    /// SIGKILL by default: a child of a test inherits the signal mask of the test's worker thread, which blocks
    /// SIGTERM, so only a program that waits for its signals itself (as exponea-authd does) sees SIGTERM.
    @discardableResult
    public func stop(signal: Int32 = SIGKILL) -> Int32 {
        if process.isRunning { kill(process.pid, signal) }
        let status = process.wait()
        auditOutput()
        return status
    }

    /// Once: checks the whole output (read up to its end, which comes a moment after the exit) for tokens.
    private func auditOutput() {
        guard auditsTokens, lock.withLock({ !audited }) else { return }
        _ = waitForOutput(timeout: .seconds(2)) { _ in false }  // returns at the output's end
        let (text, first) = lock.withLock {
            defer { audited = true }
            return (String(decoding: collected, as: UTF8.self), !audited)
        }
        guard first else { return }
        TestJWT.expectNoMintedToken(in: text, from: "\(process.name) (pid \(process.pid))")
    }

    /// Polls `condition` every 20 ms until it holds or `timeout` passes.
    public static func waitUntil(timeout: Duration = .seconds(5), _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }

    /// Polls `condition` every 20 ms until it holds or `timeout` passes, without blocking a thread: for
    /// async tests, whose pool has as few threads as the machine has cores.
    public static func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    deinit { stop() }
}
