// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthStore
import AuthTestKit
import Foundation
import Logging
import Testing

/// The real exponea-authd binary, started as systemd would start it: a notification socket, a credential
/// directory with the store key, and signals to stop it.
@Suite("exponea-authd start-up, notification and shutdown", .offPool)
struct DaemonStartupTests {
    /// A state directory, a credential and a notification socket for one daemon.
    final class Fixture {
        let root: TemporaryDirectory
        let notify: NotifySocket
        var stateDirectory: String { root.appending("state") }
        var credentials: String { root.appending("credentials") }
        var socketPath: String { root.appending("io.socket") }

        init() throws {
            root = try TemporaryDirectory(prefix: "authd-daemon")
            notify = try NotifySocket()
            try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false)
            let key = Data((0..<32).map { UInt8($0) })
            try key.write(to: URL(fileURLWithPath: credentials + "/" + StoreKey.defaultCredentialName))
        }

        deinit { root.remove() }

        func store() throws -> TokenStore {
            let environment = ["CREDENTIALS_DIRECTORY": credentials]
            let key = try StoreKey.resolve(
                directory: stateDirectory, environment: environment, logger: Logger(label: "t"))
            return try TokenStore(directory: stateDirectory, key: key, logger: Logger(label: "t"))
        }

        func start(_ extra: [String: String] = [:], arguments: [String] = []) throws -> BackgroundProcess {
            var environment = [
                "HOME": root.path,
                "PATH": "/usr/bin:/bin",
                "NOTIFY_SOCKET": notify.path,
                "CREDENTIALS_DIRECTORY": credentials,
            ]
            environment.merge(extra) { _, new in new }
            return try BackgroundProcess(
                BuildProducts.executable("exponea-authd"),
                ["--user", "--log-target", "console", "--state-directory", stateDirectory, "--socket", socketPath]
                    + arguments,
                environment: environment
            )
        }

        /// Starts the daemon in system mode with the access configuration in `configDirectory`, on the system bus
        /// at `busAddress`, and waits until it is ready and announcing on the bus.
        func startSystem(configDirectory: String, busAddress: String) throws -> BackgroundProcess {
            let daemon = try BackgroundProcess(
                BuildProducts.executable("exponea-authd"),
                [
                    "--log-target", "console", "--state-directory", stateDirectory, "--config-directory",
                    configDirectory, "--socket", socketPath,
                ],
                environment: [
                    "NOTIFY_SOCKET": notify.path, "CREDENTIALS_DIRECTORY": credentials,
                    "DBUS_SYSTEM_BUS_ADDRESS": busAddress,
                ]
            )
            #expect(notify.receive()?.hasPrefix("READY=1") == true)
            #expect(daemon.waitForOutput { $0.contains("Announcing on D-Bus") }, "\(daemon.output)")
            return daemon
        }
    }

    @Test(arguments: [
        ["--flush-timeout", "601"], ["--flush-timeout=-1"], ["--socket", "relative.socket"],
        ["--max-connections", "0"], ["--max-connections=2000000"],
        // One user's share must leave other users as many: 200 leaves 188 to users other than root.
        ["--max-connections-per-user", "95", "--max-connections", "200"], ["--max-connections-per-user", "0"],
    ])
    func refusesABadOptionWithWhatItNeeds(arguments: [String]) throws {
        let result = try ChildProcess.run(BuildProducts.executable("exponea-authd"), ["--user"] + arguments)
        #expect(result.status == 64)  // EX_USAGE
        let option = arguments[0].split(separator: "=")[0]
        #expect(result.standardError.contains(option + " needs"))
    }

    @Test func tellsSystemdItIsReadyAndStopsGracefullyOnSIGTERM() throws {
        let fixture = try Fixture()
        let daemon = try fixture.start()

        #expect(
            fixture.notify.receive() == "READY=1\nSTATUS=Holding 0 app groups (0 with a token), 0 clients connected")
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(fixture.notify.receive() == "STOPPING=1\nSTATUS=Stopping")
        #expect(daemon.output.contains("info: Stopping"))
    }

    /// The pages only the start-up ran go once, after both its last steps: READY=1, and the bus's first attempt,
    /// whether the bus answered or could not be reached.
    @Test(arguments: [true, false])
    func handsBackTheStartUpsPagesAfterReadyAndTheBusFirstAttempt(busReachable: Bool) throws {
        let fixture = try Fixture()
        let bus = busReachable ? try PrivateBus() : nil
        defer { bus?.stop() }
        let daemon = try fixture.start(
            ["DBUS_SESSION_BUS_ADDRESS": bus?.address ?? "unix:path=\(fixture.root.appending("no-bus"))"],
            arguments: ["--log-level", "debug"])
        defer { _ = daemon.stop(signal: SIGTERM) }
        #expect(daemon.waitForOutput { $0.contains("Released the start-up's pages") }, "\(daemon.output)")
        let lines = daemon.output.split(separator: "\n")
        let released = lines.firstIndex { $0.contains("Released the start-up's pages") }
        let ready = lines.firstIndex { $0.contains("info: Ready: ") }
        let attempted = lines.firstIndex {
            $0.contains(busReachable ? "Announcing on D-Bus" : "D-Bus is not reachable")
        }
        #expect(ready != nil && attempted != nil && released != nil)
        if let released, let ready, let attempted { #expect(released > ready && released > attempted) }
        #expect(lines.filter { $0.contains("Released the start-up's pages") }.count == 1)
        // Something was resident to hand back: the start-up's code.
        let kib = released.flatMap { lines[$0].split(separator: "authd.released_kib=").last }.flatMap { Int($0) }
        #expect((kib ?? 0) > 0)
    }

    @Test func loadsTheStoredGroupsAtStart() throws {
        let fixture = try Fixture()
        let store = try fixture.store()
        let token = TestJWT().token(expiringIn: 3600)
        try store.save(
            TokenRecord(
                group: AppGroup("shop"),
                token: StreamJWT(parsing: token),
                customerIds: ["registered": "alice"],
                generation: 3,
                changedAt: Date()
            )
        )
        try store.save(
            TokenRecord(
                group: AppGroup("news"), token: nil, customerIds: ["cookie": "c"], generation: 1, changedAt: Date())
        )

        let daemon = try fixture.start(arguments: ["--log-level", "debug"])
        #expect(
            fixture.notify.receive() == "READY=1\nSTATUS=Holding 2 app groups (1 with a token), 0 clients connected")
        #expect(daemon.stop(signal: SIGINT) == 0)
        let log = daemon.output
        #expect(log.contains("Loaded app group authd.generation=3 authd.group=shop authd.state=valid"))
        #expect(log.contains("Loaded app group authd.generation=1 authd.group=news authd.state=notProvided"))
        #expect(!log.contains(token.split(separator: ".")[1]))
        #expect(!log.contains("alice"))
    }

    @Test func aCorruptRecordIsSetAsideAndTheOthersStillLoad() throws {
        let fixture = try Fixture()
        let store = try fixture.store()
        let token = TestJWT().token(expiringIn: 30)
        try store.save(
            TokenRecord(group: AppGroup("shop"), token: StreamJWT(parsing: token), generation: 1, changedAt: Date())
        )
        try Data("not a record".utf8).write(to: URL(fileURLWithPath: fixture.stateDirectory + "/news.token"))
        chmod(fixture.stateDirectory + "/news.token", 0o600)  // as the daemon's own record: the content is bad

        let daemon = try fixture.start(arguments: ["--log-level", "debug"])
        #expect(fixture.notify.receive() == "READY=1\nSTATUS=Holding 1 app group (1 with a token), 0 clients connected")
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(FileManager.default.fileExists(atPath: fixture.stateDirectory + "/news.token.corrupt"))
        #expect(daemon.output.contains("authd.group=shop authd.state=expiredSoon"))
        // The record set aside is an operator's event: its group as GROUP= (the journal), `group=` here.
        #expect(daemon.output.split(separator: "\n").contains { $0.contains("Set aside") && $0.contains("group=news") })
        #expect(!daemon.output.contains(token.split(separator: ".")[2]))
    }

    @Test func pingsTheWatchdogAtHalfTheInterval() throws {
        let fixture = try Fixture()
        let daemon = try fixture.start(["WATCHDOG_USEC": "200000"])
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        let client = try UnixClient(path: fixture.socketPath)
        defer { client.close() }
        #expect(
            fixture.notify.receive(timeout: .seconds(2))?.hasPrefix("WATCHDOG=1\nSTATUS=Holding 0 app groups") == true)
        #expect(fixture.notify.receive(containing: "1 client connected", timeout: .seconds(2)) != nil)
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }

    @Test func sighupDoesNotStopIt() throws {
        let fixture = try Fixture()
        let daemon = try fixture.start()
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        kill(daemon.pid, SIGHUP)
        #expect(daemon.waitForOutput { $0.contains("SIGHUP") })
        #expect(daemon.isRunning)
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }

    @Test func refusesAStoreOthersCanEnterAndSaysHowToFixIt() throws {
        let fixture = try Fixture()
        try FileManager.default.createDirectory(
            atPath: fixture.stateDirectory,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o755]
        )
        let daemon = try fixture.start()
        #expect(daemon.waitForExit())
        #expect(daemon.stop() == 1)
        #expect(
            daemon.output.contains("critical: Cannot start: cannot open the token store in \(fixture.stateDirectory)"))
        #expect(daemon.output.contains("chmod 0700"))
        #expect(fixture.notify.receive(timeout: .milliseconds(100)) == nil)
    }

    /// A store keyed by its key file, with two records; the daemon is then started on it with `damage` done.
    func startOnDamagedKeyFileStore(_ damage: (String) throws -> Void) throws -> (Fixture, BackgroundProcess) {
        let fixture = try Fixture()
        let logger = Logger(label: "t")
        let key = try StoreKey.fromKeyFile(inDirectory: fixture.stateDirectory, logger: logger)
        let store = try TokenStore(directory: fixture.stateDirectory, key: key, logger: logger)
        for group in ["news", "shop"] {
            try store.save(
                TokenRecord(
                    group: AppGroup(group), token: StreamJWT(parsing: TestJWT().token(expiringIn: 3600)),
                    generation: 1, changedAt: Date()))
        }
        try damage(fixture.stateDirectory)
        // No credential: the key file is the key.
        let daemon = try fixture.start(["CREDENTIALS_DIRECTORY": fixture.root.appending("no-credentials")])
        return (fixture, daemon)
    }

    /// One flipped bit in the key, a deleted key, a FIFO in the key's place, or a record others can read: the
    /// daemon refuses to start, says why and names the file, and keeps every file as it was.
    @Test(
        arguments: [
            ("flipped", "not one of the 2 token records", "store.key"),
            ("deleted", "is missing, but", "store.key"),
            ("fifo", "not a regular file", "store.key"),
            ("open record", "has mode 0644", "news.token"),
        ])
    func aBadKeyOrRecordStopsTheStartAndLosesNothing(damage: String, reason: String, file: String) throws {
        let (fixture, daemon) = try startOnDamagedKeyFileStore { directory in
            let key = directory + "/store.key"
            switch damage {
            case "flipped":
                var bytes = try Data(contentsOf: URL(fileURLWithPath: key))
                bytes[0] ^= 0x01
                try bytes.write(to: URL(fileURLWithPath: key))
            case "deleted":
                unlink(key)
            case "fifo":
                unlink(key)
                mkfifo(key, 0o600)
            default:
                chmod(directory + "/news.token", 0o644)
            }
        }
        #expect(daemon.waitForExit(timeout: .seconds(20)))
        #expect(daemon.stop() == 1)
        #expect(daemon.output.contains("critical: Cannot start"), "\(daemon.output)")
        #expect(daemon.output.contains(reason), "\(daemon.output)")
        #expect(daemon.output.contains(fixture.stateDirectory + "/" + file), "\(daemon.output)")
        #expect(fixture.notify.receive(timeout: .milliseconds(100)) == nil)
        // Every file kept (the daemon's lock file aside).
        let files = try FileManager.default.contentsOfDirectory(atPath: fixture.stateDirectory).sorted()
            .filter { $0 != "daemon.lock" }
        let expected = damage == "deleted" ? ["news.token", "shop.token"] : ["news.token", "shop.token", "store.key"]
        #expect(files == expected)
    }

    @Test func userModeCreatesItsStateDirectoryUnderHome() throws {
        let home = try TemporaryDirectory(prefix: "authd-home")
        defer { home.remove() }
        let notify = try NotifySocket()
        let daemon = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            ["--user", "--log-target", "console"],
            environment: ["HOME": home.path, "NOTIFY_SOCKET": notify.path, "XDG_RUNTIME_DIR": home.path]
        )
        #expect(notify.receive()?.hasPrefix("READY=1") == true)
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(daemon.output.contains("Serving Varlink authd.socket=\(home.path)/exponea-authd/io.socket"))
        let state = home.appending(".local/state/exponea-authd")
        let attributes = try FileManager.default.attributesOfItem(atPath: state)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        #expect(FileManager.default.fileExists(atPath: state + "/store.key"))
        #expect(daemon.output.contains("not bound to this device"))
    }
}
