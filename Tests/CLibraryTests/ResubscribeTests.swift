// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// A token set while an app's subscription is down (the daemon restarted, and another app set a token before this
/// one subscribed again) still reaches the app's token-refreshed handler: every app hears every new token (R6;
/// issue 38). The token is set during the gap through a second daemon on the same store and another socket, which
/// the app never sees, so the gap is certain. On each architecture: arm64 and armhf under qemu-user, against the
/// native daemon.
@Suite("libexponea-auth: a token set while the subscription is down", .offPool)
struct ResubscribeTests {
    @Test(arguments: Architecture.allCases)
    func theAppHearsATokenSetWhileItWasAway(on architecture: Architecture) throws {
        let daemon = try DaemonUnderTest()
        let app = try InteractiveProcess(
            try CLibrary.testProgram("resubscribe", for: architecture), [daemon.socketPath, "shop"])
        defer { app.stop() }

        // Live: once the app's subscription is registered, it hears a token set now.
        #expect(daemon.waitForSubscribers("shop", count: 1))
        try CLibrary.setToken(TestJWT().token(expiringIn: 3600), group: "shop", socket: daemon.socketPath)
        #expect(try app.turn() == "refreshed 1")

        // The gap: the daemon stops; a token is set on the same store through another daemon; the daemon is back.
        daemon.stop(signal: SIGTERM)
        let other = try DaemonUnderTest(stateDirectory: daemon.stateDirectory)
        try CLibrary.setToken(TestJWT().token(expiringIn: 3600), group: "shop", socket: other.socketPath)
        other.stop(signal: SIGTERM)
        try daemon.start()
        #expect(try app.turn() == "refreshed 2")
    }
}
