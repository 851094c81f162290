// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// `authctl get --wait`: scripts wait, bounded, for the token an agent or app sets.
@Suite("authctl get --wait", .offPool)
struct GetWaitTests {
    let signer = TestJWT()

    @Test func returnsAsSoonAsATokenLands() throws {
        let daemon = try DaemonFixture()
        let watcher = try daemon.authctlInBackground(["watch", "shop"])
        defer { watcher.stop() }
        #expect(daemon.waitForSubscribers("shop", count: 1))

        // A wait far longer than the test allows: only the token can end it with a token printed.
        let waiting = try daemon.authctlInBackground(["get", "shop", "--wait=60"])
        defer { waiting.stop() }
        // Barrier: get --wait checked the group first, so the group's apps heard it needs a token.
        #expect(watcher.waitForOutput { $0.contains("jwtError reason=notProvided") })
        #expect(waiting.isRunning)

        let token = signer.token(expiringIn: 3600)
        try daemon.set("shop", token)
        #expect(waiting.waitForExit(timeout: .seconds(20)), "\(waiting.output)")
        #expect(waiting.stop() == 0)
        #expect(waiting.output == token + "\n")
    }

    @Test func anExpiringTokenIsReplacedBeforeItIsPrinted() throws {
        let daemon = try DaemonFixture()
        let watcher = try daemon.authctlInBackground(["watch", "shop"])
        defer { watcher.stop() }
        #expect(daemon.waitForSubscribers("shop", count: 1))
        try daemon.set("shop", signer.token(expiringIn: 30))

        let waiting = try daemon.authctlInBackground(["get", "shop", "--wait"])
        defer { waiting.stop() }
        #expect(watcher.waitForOutput { $0.contains("jwtError reason=expiredSoon") })
        let fresh = signer.token(expiringIn: 3600)
        try daemon.set("shop", fresh)
        #expect(waiting.waitForExit(timeout: .seconds(20)), "\(waiting.output)")
        #expect(waiting.stop() == 0)
        #expect(waiting.output == fresh + "\n")
    }

    @Test func noTokenInTimeExitsWith3AndPrintsNothing() throws {
        let daemon = try DaemonFixture()
        let result = try daemon.authctl(["get", "shop", "--wait=1"])
        #expect(result.status == 3)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("no fresh token for app group 'shop' came within 1 s"))
    }

    @Test func aValidTokenIsPrintedWithoutWaiting() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(expiringIn: 3600)
        try daemon.set("shop", token)
        let result = try daemon.authctl(["get", "shop", "--wait=3600"])
        #expect(result.status == 0)
        #expect(result.standardOutput == token + "\n")
        #expect(result.standardError.isEmpty)
    }

    @Test(arguments: [["--wait=-1"], ["--wait=3601"], ["--wait=x"]])
    func aWrongWaitExitsWith2(arguments: [String]) throws {
        let result = try runAuthctl(["get", "shop"] + arguments)
        #expect(result.status == 2)
    }
}
