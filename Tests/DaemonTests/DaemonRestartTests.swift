// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// What survives a stop and start of the real daemon, and what it does about time that passed meanwhile.
@Suite("exponea-authd across a restart", .offPool)
struct DaemonRestartTests {
    @Test func aRestartKeepsTheTokensAndFiresTheTimersThatFellDueWhileDown() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let bus = try PrivateBus()
        defer { bus.stop() }
        let environment = ["DBUS_SESSION_BUS_ADDRESS": bus.address]

        let first = try fixture.start(environment)
        #expect(fixture.notify.receive(containing: "READY=1") != nil)
        let client = try VarlinkTestClient(path: fixture.socketPath)
        let keeps = TestJWT().token(expiringIn: 3600)
        let lapseAt = Date().timeIntervalSince1970.rounded(.down) + 3
        let lapses = TestJWT().token(exp: lapseAt)
        try client.call("SetToken", ["group": "shop", "token": keeps])
        try client.call("SetToken", ["group": "news", "token": lapses])
        client.close()
        #expect(first.stop(signal: SIGTERM) == 0)
        #expect(Date().timeIntervalSince1970 < lapseAt, "the daemon was stopped before news's token expired")

        // While it is down, news's token expires: time itself must pass, so one sleep to just after exp.
        let untilLapsed = lapseAt + 0.2 - Date().timeIntervalSince1970
        if untilLapsed > 0 { usleep(UInt32(untilLapsed * 1_000_000)) }

        let monitor = try BackgroundProcess(
            "/usr/bin/dbus-monitor",
            ["--address", bus.address, "type='signal',interface='com.exponea.AuthD1.Manager'"]
        )
        defer { monitor.stop() }
        #expect(monitor.waitForOutput { $0.contains("member=NameLost") })
        let second = try fixture.start(environment)
        defer { second.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive(containing: "READY=1") != nil)

        // The expiry that fell due while it was down is announced at start, before any call: nothing has asked
        // about news yet, so only the start-up can have sent it (a Preflight would send one of its own).
        // dbus-monitor prints a signal in pieces: wait for the whole of it, not only its first line.
        func signalLines(_ output: String) -> [String] {
            guard let signal = output.range(of: "member=JwtError").map({ output[$0.lowerBound...] }) else { return [] }
            return signal.split(separator: "\n").prefix(4).map { $0.trimmingCharacters(in: .whitespaces) }
        }
        #expect(monitor.waitForOutput { signalLines($0).count == 4 })
        #expect(
            signalLines(monitor.output) == ["member=JwtError", #"string "news""#, #"string "expired""#, "uint64 1"])

        // GetToken has no side effects: the tokens and generations are as they were.
        let again = try VarlinkTestClient(path: fixture.socketPath)
        defer { again.close() }
        let shop = try again.call("GetToken", ["group": "shop"])
        #expect(shop["token"] as? String == keeps)
        #expect(shop["generation"] as? Int == 1)
        let news = try again.call("GetToken", ["group": "news"])
        #expect(news["token"] as? String == lapses)
        #expect(news["generation"] as? Int == 1)
        #expect(!monitor.output.contains(#"string "shop""#))
    }
}
