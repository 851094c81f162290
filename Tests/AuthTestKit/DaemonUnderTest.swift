// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The real exponea-authd binary on a private socket, state directory and store key, for tests of its
/// clients: in user mode, or in system mode with an access configuration. Killed when released.
///
/// Whatever the daemon prints is checked, when it stops, for the tokens ``TestJWT`` minted: each one found is a
/// test issue, as the daemon must never log a token.
public final class DaemonUnderTest: @unchecked Sendable {
    public let root: TemporaryDirectory
    /// The socket it serves.
    public let socketPath: String
    /// Its token store.
    public let stateDirectory: String
    private let lock = NSLock()
    private var process: BackgroundProcess?
    private var earlierOutput = ""
    private let environment: [String: String]
    private let arguments: [String]

    /// Prepares the directories and, unless `start` is false, starts the daemon and waits until it serves.
    ///
    /// - Parameters:
    ///   - arguments: More command-line options for the daemon, such as `--flush-timeout`.
    ///   - configDirectory: Runs the daemon in system mode with this access configuration, its socket open
    ///     to other users.
    ///   - stateDirectory: Keeps the token store there instead of in the daemon's temporary directory.
    public init(
        start: Bool = true, environment: [String: String] = [:], arguments: [String] = [],
        configDirectory: String? = nil, stateDirectory: String? = nil
    ) throws {
        root = try TemporaryDirectory(prefix: "authd-client")
        socketPath = root.appending("io.socket")
        self.stateDirectory = stateDirectory ?? root.appending("state")
        let credentials = root.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false)
        try Data((0..<32).map { UInt8($0) }).write(
            to: URL(fileURLWithPath: credentials + "/exponea-authd.store-key"))
        var environment = environment
        environment["HOME"] = root.path
        environment["PATH"] = "/usr/bin:/bin"
        environment["CREDENTIALS_DIRECTORY"] = credentials
        // No bus for the daemon unless a test brings one: it serves the socket without.
        environment["DBUS_SESSION_BUS_ADDRESS"] = environment["DBUS_SESSION_BUS_ADDRESS"] ?? "unix:path=/nonexistent"
        self.environment = environment
        if let configDirectory {
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
            self.arguments = ["--config-directory", configDirectory] + arguments
        } else {
            self.arguments = ["--user"] + arguments
        }
        if start { try self.start() }
    }

    deinit {
        stop()
        root.remove()
    }

    /// Starts the daemon (again) and waits until it serves: its `READY=1`, which it sends once its socket
    /// listens and its store is loaded. The notification socket is the test's for the start only; what the
    /// daemon sends later finds none and is dropped, as the daemon ignores a failed notification.
    public func start() throws {
        let notify = try NotifySocket()
        var environment = environment
        environment["NOTIFY_SOCKET"] = notify.path
        let process = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            ["--log-target", "console", "--state-directory", stateDirectory, "--socket", socketPath]
                + (arguments.contains("--log-level") ? [] : ["--log-level", "debug"]) + arguments,
            environment: environment
        )
        lock.withLock { self.process = process }
        guard notify.receive(containing: "READY=1", timeout: .seconds(10)) != nil else {
            throw NotServing(output: process.output)
        }
    }

    /// Stops the daemon with `signal` and waits for it to end.
    @discardableResult
    public func stop(signal: Int32 = SIGKILL) -> Int32? {
        let process = lock.withLock {
            defer { self.process = nil }
            return self.process
        }
        let status = process?.stop(signal: signal)
        if let process { lock.withLock { earlierOutput += process.output } }
        return status
    }

    /// What the daemon printed so far since it was last started.
    public var output: String { lock.withLock { process?.output ?? "" } }

    /// Waits until the current run's output satisfies `condition`, checking it each time output comes.
    public func waitForOutput(timeout: Duration = .seconds(5), _ condition: (String) -> Bool) -> Bool {
        guard let process = lock.withLock({ process }) else { return false }
        return process.waitForOutput(timeout: timeout, condition)
    }

    /// Waits until `group` has `count` subscribers in the current run, from the daemon's "Subscribed" and
    /// "Unsubscribed" debug lines as they come (the daemon runs with `--log-level debug` unless the test says
    /// otherwise): the last of them for the group names its count.
    public func waitForSubscribers(_ group: String, count: Int, timeout: Duration = .seconds(10)) -> Bool {
        waitForOutput(timeout: timeout) { output in
            let last = output.split(separator: "\n").lazy.map { $0.split(separator: " ") }.last {
                ($0.starts(with: ["debug:", "Subscribed"]) || $0.starts(with: ["debug:", "Unsubscribed"]))
                    && $0.contains("authd.group=\(group)")
            }
            return last?.contains("authd.subscribers=\(count)") == true
        }
    }

    /// Waits until the daemon has accepted `count` connections in the current run, or more, from its debug lines
    /// "Accepted a connection" as they come (the daemon runs with `--log-level debug` unless the test says
    /// otherwise). The line is written once the connection is served: the daemon holds its descriptor.
    public func waitForAcceptedConnections(_ count: Int, timeout: Duration = .seconds(20)) -> Bool {
        guard let process = lock.withLock({ process }) else { return false }
        return process.waitForLines(startingWith: "debug: Accepted a connection ", timeout: timeout) {
            $0.count >= count
        }
    }

    /// Waits until the daemon has let go of `count` connections in the current run, or more, and the last of them
    /// left it holding `held` (nil: any number), from its debug lines "Released a connection" as they come: each
    /// is written once a connection is closed and nothing holds it any more, and names how many the daemon still
    /// holds (`authd.connections`). A test that closed every connection it made, `count` in all, waits for
    /// `held` 0: a connection that outlived its client never writes its line, and the wait fails at its bound.
    public func waitForReleasedConnections(
        _ count: Int, holding held: Int? = 0, timeout: Duration = .seconds(20)
    ) -> Bool {
        guard let process = lock.withLock({ process }) else { return false }
        return process.waitForLines(startingWith: "debug: Released a connection ", timeout: timeout) { lines in
            guard lines.count >= count, let last = lines.last else { return false }
            return held.map { last.split(separator: " ").contains("authd.connections=\($0)") } ?? true
        }
    }

    /// What the daemon printed in every run so far.
    public var outputOfEveryRun: String { lock.withLock { earlierOutput + (process?.output ?? "") } }

    /// The running daemon's process id.
    public var pid: Int32? { lock.withLock { process?.pid } }

    struct NotServing: Error, CustomStringConvertible {
        var output: String
        var description: String { "exponea-authd did not serve its socket; it printed:\n\(output)" }
    }
}
