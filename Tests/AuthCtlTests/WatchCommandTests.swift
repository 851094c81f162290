// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@Suite("authctl watch against the daemon", .offPool)
struct WatchCommandTests {
    let signer = TestJWT()

    /// Starts `authctl watch` and waits until it prints the group's state, which the daemon sends once it has
    /// registered the subscription.
    func watch(_ daemon: DaemonFixture, _ arguments: [String] = []) throws -> BackgroundProcess {
        let watcher = try daemon.authctlInBackground(["watch", "shop"] + arguments)
        let subscribed = watcher.waitForOutput { $0.contains("tokenState") }
        #expect(subscribed, "\(watcher.output)")
        return watcher
    }

    @Test func printsOneLinePerEventAndAcknowledgesFlushesAtOnce() throws {
        let daemon = try DaemonFixture()
        let watcher = try watch(daemon)
        #expect(
            watcher.waitForOutput {
                $0.hasPrefix("state tokenState=notProvided refreshClaimed=false generation=0\n")
            })

        try daemon.set("shop", signer.token(expiringIn: 30, ids: ["registered": "jane"]))
        #expect(watcher.waitForOutput { $0.contains("tokenRefreshed generation=1\n") })

        _ = try daemon.authctl(["preflight", "shop"])
        #expect(
            watcher.waitForOutput {
                $0.contains("jwtError reason=expiredSoon generation=1 customerIds=registered=jane\n")
            }, "\(watcher.output)")

        // The watcher acknowledges the flush: the clear does not wait for the daemon's 2 s bound.
        #expect(try daemon.authctl(["anonymize", "shop"]).status == 0)
        #expect(watcher.waitForOutput { $0.contains("cleared cause=anonymize generation=2\n") })
        #expect(watcher.output.wholeMatch(of: /(?s).*flushRequested flushId=\S+ generation=1\ncleared.*/) != nil)
        #expect(!daemon.daemon.output.contains("Clearing without every app's flush acknowledgement"))

        #expect(watcher.isRunning)
        kill(watcher.pid, SIGINT)
        #expect(watcher.waitForExit())
        #expect(watcher.stop() == 0)
    }

    @Test func printsJSONLinesAndEndsWith0OnSIGTERM() throws {
        let daemon = try DaemonFixture()
        let watcher = try watch(daemon, ["--json"])

        try daemon.set("shop", signer.token(expiringIn: 3600))
        try daemon.set("shop", signer.token(expiringIn: 3600))
        #expect(watcher.waitForOutput { $0.split(separator: "\n").count == 3 })
        let lines = watcher.output.split(separator: "\n").map(String.init)
        // First, where the group stood when watch subscribed.
        let state = try parseJSON(lines[0])
        #expect(state["kind"] as? String == "state")
        #expect(state["tokenState"] as? String == "notProvided")
        #expect(state["refreshClaimed"] as? Bool == false)
        let events = try lines.dropFirst().map { try parseJSON($0) }
        #expect(events.map { $0["kind"] as? String } == ["tokenRefreshed", "tokenRefreshed"])
        #expect(events.map { $0["generation"] as? Int } == [1, 2])
        #expect(events.map { $0["group"] as? String } == ["shop", "shop"])

        // SIGTERM is blocked in the test's threads, and so in the child: watch unblocks it.
        kill(watcher.pid, SIGTERM)
        #expect(watcher.waitForExit())
        #expect(watcher.stop() == 0)
    }

    @Test(arguments: [SIGTERM, SIGKILL])
    func endsWith69WhenTheDaemonGoesAway(signal: Int32) throws {
        let daemon = try DaemonFixture()
        let watcher = try watch(daemon)

        daemon.daemon.stop(signal: signal)
        #expect(watcher.waitForExit())
        #expect(watcher.stop() == 69)
        // The group's state came first, then the loss.
        #expect(watcher.output.hasPrefix("state tokenState=notProvided refreshClaimed=false generation=0\n"))
        #expect(watcher.output.contains("\nauthctl: lost exponea-authd while watching app group 'shop': "))
    }

    @Test func endsWith69WhenNoDaemonListens() throws {
        let directory = try TemporaryDirectory(prefix: "authctl-test")
        defer { directory.remove() }
        let result = try runAuthctl(["watch", "shop", "--socket", directory.appending("io.socket")])
        #expect(result.status == 69)
        #expect(result.standardError.hasPrefix("authctl: exponea-authd is not reachable at "))
    }
}
