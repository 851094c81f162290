// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthStore
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The real exponea-authd binary on a scratch state directory and socket, started the way systemd starts it:
/// with a store-key credential and a notification socket, so start-up is timed to its `READY=1`.
final class DaemonProcess {
    /// The folder holding the state directory, the socket, the credential and the log.
    let directory: String
    let socketPath: String
    let stateDirectory: String
    private let credentials: String
    private var process: Process?
    private let executable: String

    /// Material of the store key, the same for the daemon and for the records the benchmark writes ahead.
    private static let keyMaterial = (0..<32).map { UInt8($0) }

    /// Prepares `directory` (created if missing) for a daemon run from `executable`.
    init(executable: String, directory: String) throws {
        self.executable = executable
        self.directory = directory
        socketPath = directory + "/io.socket"
        stateDirectory = directory + "/state"
        credentials = directory + "/credentials"
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        try Data(Self.keyMaterial).write(
            to: URL(fileURLWithPath: credentials + "/" + StoreKey.defaultCredentialName))
    }

    /// The store the daemon will load, for writing records ahead of a start.
    func openStore() throws -> TokenStore {
        try TokenStore(
            directory: stateDirectory, key: StoreKey(material: Self.keyMaterial),
            logger: Logger(label: "authd-bench", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    /// Starts the daemon and waits for `READY=1`; returns how long that took.
    ///
    /// - Parameter system: In system mode (give `--config-directory` in `arguments`), its socket open to other
    ///   users; in user mode otherwise.
    @discardableResult
    func start(busAddress: String? = nil, arguments: [String] = [], system: Bool = false) throws -> Duration {
        let notify = try NotificationSocket(path: directory + "/notify")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments =
            (system ? [] : ["--user"]) + [
                "--log-target", "console", "--state-directory", stateDirectory, "--socket", socketPath,
            ]
            + arguments
        process.environment = [
            "HOME": directory, "PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": credentials,
            "NOTIFY_SOCKET": notify.path,
            "DBUS_SESSION_BUS_ADDRESS": busAddress ?? "unix:path=/nonexistent",
            "DBUS_SYSTEM_BUS_ADDRESS": busAddress ?? "unix:path=/nonexistent",
        ]
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        let started = ContinuousClock.now
        try process.run()
        self.process = process
        // Alive while the process exists and is no zombie: a CI run saw Foundation's `isRunning` false for a daemon
        // still loading its store (it took the SIGTERM this guard sends, and logged it).
        let pid = process.processIdentifier
        guard notify.receive(containing: "READY=1", timeout: .seconds(120), while: { Self.isAlive(pid) }) else {
            stop()
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            throw BenchError.daemon("exponea-authd did not become ready; it printed:\n\(log)")
        }
        return ContinuousClock.now - started
    }

    /// Waits until the start-up is over, as on a device in use: the bus connection, which comes up on its own after
    /// `READY=1`, announced in the log (at most 10 s), then a GetToken of each of `groups`, which the daemon
    /// answers after it handed back the start-up's pages (at the turn after the bus came up), and which maps the
    /// code of a call.
    func settle(calling groups: [String]) throws {
        let announced = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < announced,
            (try? String(contentsOfFile: logPath, encoding: .utf8))?.contains("Announcing on D-Bus") != true
        {
            usleep(10_000)
        }
        let client = try UnixStream(connectingTo: socketPath)
        for group in groups { _ = try client.call(Requests.getToken(group)) }
    }

    /// Whether process `pid` runs: it exists, and `/proc` does not show it a zombie.
    private static func isAlive(_ pid: Int32) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return false }
        return !stat[stat.index(after: end)...].hasPrefix(" Z")
    }

    /// Where the daemon's output goes.
    var logPath: String { directory + "/daemon.log" }

    var pid: Int32 { process?.processIdentifier ?? 0 }

    /// The daemon's resident set and its peak, in KiB (`VmRSS`, `VmHWM`).
    var memory: (resident: Int, peak: Int) {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        func field(_ name: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// Resets the peak (`VmHWM`) to the resident size, and returns that size in KiB.
    func resetPeak() -> Int {
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
        return memory.resident
    }

    /// Stops the daemon with SIGTERM and waits for it.
    func stop() {
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        self.process = nil
    }

    deinit { stop() }
}

/// systemd's notification socket, as far as a benchmark needs it.
private final class NotificationSocket {
    let path: String
    private let descriptor: Int32

    init(path: String) throws(BenchError) {
        self.path = path
        unlink(path)
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let descriptor = self.descriptor
        guard UnixSocketAddress.withAddress(path, { bind(descriptor, $0, $1) }) == 0 else {
            throw .system("bind", errno)
        }
    }

    /// Waits for a datagram containing `needle`.
    func receive(containing needle: String, timeout: Duration, while alive: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline && alive() {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) == 1 else { continue }
            let count = recv(descriptor, &buffer, buffer.count, 0)
            if count > 0, String(decoding: buffer[..<count], as: UTF8.self).contains(needle) { return true }
        }
        return false
    }

    deinit {
        close(descriptor)
        unlink(path)
    }
}
