// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Synchronization
import Testing

/// Several app instances of one group, each with its own client, against the real daemon.
@Suite("ExponeaAuth: apps of one group together")
struct GroupCoordinationTests {
    @Test func clearingWaitsForEveryAppsFlushHandler() async throws {
        // A bound far above the flush handler's time: a clear that ends well before it was acknowledged.
        let daemon = try DaemonUnderTest(arguments: ["--flush-timeout", "60"])
        let flushing = daemon.client()
        let silent = daemon.client()
        let caller = daemon.client()
        defer { for app in [flushing, silent, caller] { app.close() } }
        let order = Recorder<String>()
        flushing.setFlushHandler {
            try? await Task.sleep(for: .milliseconds(300))
            order.append("flushed")
        }
        let cleared = Task {
            for await event in flushing.events where event.kind == .cleared {
                order.append("cleared")
                return
            }
        }
        defer { cleared.cancel() }
        #expect(try await daemon.waitForSubscribers(3))
        try await caller.setSdkAuthToken(TestJWT().token(expiringIn: 3600))

        let started = ContinuousClock.now
        try await caller.anonymize()
        let took = ContinuousClock.now - started
        // The slow flush was waited for; the app without a handler agreed at once, so the bound was not hit.
        #expect(took >= .milliseconds(300))
        #expect(took < .seconds(30))
        #expect(await order.waitFor(count: 2))
        #expect(order.all == ["flushed", "cleared"])
        #expect(try await caller.daemon.getToken(group: "shop").token == nil)
    }

    @Test func onlyOneOfSeveralAppsRunsItsHandlerForOneExpiry() async throws {
        let daemon = try DaemonUnderTest()
        let apps = (0..<5).map { _ in daemon.client() }
        defer { for app in apps { app.close() } }
        let calls = Recorder<Int>()
        for (index, app) in apps.enumerated() {
            app.setJwtErrorHandler { _ in calls.append(index) }
        }
        #expect(try await daemon.waitForSubscribers(5))
        // A token inside its last minute: every app hears expiredSoon (R13), one refreshes (R28).
        try await apps[0].setSdkAuthToken(TestJWT().token(expiringIn: 30))
        #expect(await calls.waitFor(count: 1))
        try await Task.sleep(for: .milliseconds(500))
        #expect(calls.all.count == 1)

        // The refreshed token is the next generation: the next expiry is claimed anew.
        try await apps[1].setSdkAuthToken(TestJWT().token(expiringIn: 30))
        #expect(await calls.waitFor(count: 2))
        try await Task.sleep(for: .milliseconds(500))
        #expect(calls.all.count == 2)
    }

    @Test func withCoalescingOffEveryAppRunsItsHandler() async throws {
        let daemon = try DaemonUnderTest()
        let apps = (0..<3).map { _ in daemon.client() }
        defer { for app in apps { app.close() } }
        let calls = Recorder<Int>()
        for (index, app) in apps.enumerated() {
            app.coalescesRefresh = false
            app.setJwtErrorHandler { _ in calls.append(index) }
        }
        #expect(try await daemon.waitForSubscribers(3))
        try await apps[0].setSdkAuthToken(TestJWT().token(expiringIn: 30))
        #expect(await calls.waitFor(count: 3))
        #expect(Set(calls.all) == [0, 1, 2])
    }

    @Test func afterADaemonRestartTheClientSubscribesAgainAndCallsWork() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        let refreshes = Recorder<UInt64>()
        let watcher = Task { for await refresh in auth.tokenRefreshes { refreshes.append(refresh.generation) } }
        defer { watcher.cancel() }
        #expect(try await daemon.waitForSubscribers(1))
        let token = TestJWT().token(expiringIn: 3600)
        try await auth.setSdkAuthToken(token)
        #expect(await refreshes.waitFor(count: 1))

        daemon.stop()
        // A call while the daemon is away fails after the bound, saying so.
        let started = ContinuousClock.now
        await #expect {
            try await auth.preflight()
        } throws: { error in
            [.daemonUnavailable, .connectionLost].contains((error as? AuthClientError)?.code)
        }
        #expect(ContinuousClock.now - started < .seconds(5))

        try daemon.start()
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == token)  // kept across the restart
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.setSdkAuthToken(token)
        #expect(await refreshes.waitFor(count: 2))
        #expect(refreshes.all == [1, 2])
    }
}
