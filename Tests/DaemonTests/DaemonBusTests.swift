import AuthCore
import AuthStore
import AuthTestKit
import Foundation
import Testing

@Suite("exponea-authd on D-Bus")
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
        #expect(BackgroundProcess.waitUntil { monitor.output.contains("member=NameLost") })  // monitoring now

        let daemon = try fixture.start(["DBUS_SESSION_BUS_ADDRESS": bus.address])
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        #expect(BackgroundProcess.waitUntil { monitor.output.contains("member=JwtError") })
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
        let daemon = try fixture.start(["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"])
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        #expect(BackgroundProcess.waitUntil { daemon.output.contains("D-Bus is not reachable") })
        usleep(600_000)  // a few retries
        #expect(daemon.stop(signal: SIGTERM) == 0)
        #expect(daemon.output.components(separatedBy: "D-Bus is not reachable").count == 2)
    }
}
