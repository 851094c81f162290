// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthStore
import AuthTestKit
import Foundation
import Testing

@Suite("exponea-authd on D-Bus", .offPool)
struct DaemonBusTests {
    @Test func announcesATokenThatEnteredItsLastMinuteWhileItWasDown() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let bus = try PrivateBus()
        defer { bus.stop() }
        let store = try fixture.store()
        let token = TestJWT().token(expiringIn: 30, ids: ["registered": "secret-customer"])
        try store.save(
            TokenRecord(group: AppGroup("shop"), token: StreamJWT(parsing: token), generation: 9, changedAt: Date())
        )

        let monitor = try BackgroundProcess(
            "/usr/bin/dbus-monitor",
            ["--address", bus.address, "type='signal',interface='com.exponea.AuthD1.Manager'"]
        )
        defer { monitor.stop() }
        #expect(monitor.waitForOutput { $0.contains("member=NameLost") })  // monitoring now

        let daemon = try fixture.start(["DBUS_SESSION_BUS_ADDRESS": bus.address])
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        // The whole signal: its member line, then its three arguments' lines.
        #expect(
            monitor.waitForOutput { output in
                output.range(of: "member=JwtError").map { output[$0.upperBound...].contains("uint64") } ?? false
            })
        let output = monitor.output
        let signal = try #require(output.range(of: "member=JwtError").map { output[$0.lowerBound...] })
        let lines = signal.split(separator: "\n").prefix(4).map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(lines == ["member=JwtError", #"string "shop""#, #"string "expiredSoon""#, "uint64 9"])
        #expect(!output.contains("secret-customer"))

        let introspection = try ChildProcess.run(
            "/usr/bin/busctl",
            ["--address=\(bus.address)", "introspect", "com.exponea.AuthD1", "/com/exponea/AuthD1"]
        )
        #expect(introspection.standardOutput.contains(".TokenRefreshed"))
        #expect(introspection.standardOutput.contains(".Cleared"))
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }

    @Test func servesWithoutABusAndSaysSoOnce() throws {
        let fixture = try DaemonStartupTests.Fixture()
        // At debug level every retry is logged too, so the test can wait for them.
        let daemon = try fixture.start(
            ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"], arguments: ["--log-level", "debug"])
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        let message = "D-Bus is not reachable"
        #expect(daemon.waitForOutput { $0.components(separatedBy: message).count > 3 })  // 2 retries
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(daemon.output.components(separatedBy: "warning: \(message)").count == 2, "\(daemon.output)")
    }
}

@Suite("The shipped D-Bus policy", .offPool)
struct DaemonBusPolicyTests {
    static let policy = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../systemd/dbus/com.exponea.AuthD1.conf").standardized.path

    @Test(.enabled(if: getuid() == 0, "needs root to run the system service and to switch to nobody"))
    func letsTheServiceOwnItsNameOnASystemBusAndAnyoneIntrospect() throws {
        let bus = try PrivateBus(systemPolicy: Self.policy)
        defer { bus.stop() }
        let fixture = try DaemonStartupTests.Fixture()
        let config = try TemporaryDirectory(prefix: "authd-etc")
        defer { config.remove() }
        let daemon = try fixture.startSystem(configDirectory: config.path, busAddress: bus.address)

        // Anyone may introspect; nobody but the service's user (and root) may own the name.
        let asNobody = [
            "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/busctl", "--address=\(bus.address)",
        ]
        let introspection = try ChildProcess.run(
            "/usr/bin/setpriv",
            asNobody + ["introspect", "com.exponea.AuthD1", "/com/exponea/AuthD1"]
        )
        #expect(introspection.status == 0, "\(introspection.standardError) \(introspection.standardOutput)")
        #expect(introspection.standardOutput.contains(".JwtError"))
        let takeOver = try ChildProcess.run(
            "/usr/bin/setpriv",
            asNobody + [
                "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName", "su",
                "com.exponea.AuthD1", "0",
            ]
        )
        #expect(takeOver.status != 0)
        #expect(
            takeOver.standardError.contains("not allowed to own") || takeOver.standardError.contains("Access denied"))
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }
}
