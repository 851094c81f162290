// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Apps of both libraries in one group: the claim and the tokens are the daemon's, so a Swift app (`authd-test-app`,
/// linking ExponeaAuth) and C apps (`poll-app`, linking libexponea-auth) refresh for each other.
@Suite("libexponea-auth beside ExponeaAuth: one group", .offPool)
struct MixedGroupTests {
    @Test func aSwiftClaimantThatDiesIsReplacedByACAppWhoseTokenASwiftAppSends() throws {
        // A lease far longer than the test: only the claimant's death can end its claim in time.
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "60"])
        let backend = try TestBackend()
        let claimant = try AppProcess("swift-claimant", daemon: daemon)
        defer { claimant.kill() }
        // The Swift app's request makes the empty group ask for a token; its handler claims the refresh and, given no
        // command, hangs alive.
        claimant.send("request")
        #expect(claimant.waitForLine("handler notProvided"), "\(claimant.output)")

        // Two C apps. Barrier: each one's first request failed with no token, so each had subscribed and heard the
        // group's request for a token, and its claim was refused while the Swift app held it.
        let apps = try (0..<2).map { _ in try ExampleApp.poll(["8", "250"], daemon: daemon, backend: backend) }
        defer { for app in apps { app.kill() } }
        for app in apps { #expect(app.waitForLine { $0 == "request 1: 403" }, "\(app.output)") }
        #expect(try backend.stats().fetches == 0)

        claimant.kill()
        // Only the claim's release hands it on within the wait's 10 s: the lease is a minute.
        let replaced = BackgroundProcess.waitUntilPrinted {
            apps.contains { $0.lines.contains { FiveAppsTests.fetch($0)?.generation == "0" } }
        }
        #expect(replaced, "\(apps.map(\.output))")
        #expect(try backend.stats().fetchesPerGeneration == ["0": 1])

        for app in apps {
            #expect(app.waitForLine { $0.hasPrefix("request ") && $0.hasSuffix(": 200") }, "\(app.output)")
        }

        // A Swift app that comes now sends the C app's token (its stand-in backend accepts the test backend's ids),
        // with no refresh of its own.
        let sender = try AppProcess("swift-sender", daemon: daemon)
        defer { sender.kill() }
        sender.send("accept test-backend")
        sender.send("request")
        #expect(sender.waitForLine("response "), "\(sender.output)")
        #expect(sender.lines("response ") == ["response 200"])
        #expect(sender.lines("handler").isEmpty)
        #expect(try backend.stats().fetches == 1)
    }
}
