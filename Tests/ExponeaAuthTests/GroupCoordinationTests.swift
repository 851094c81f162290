// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Synchronization
import Testing

/// Several app instances of one group, each with its own client, against the real daemon.
@Suite("ExponeaAuth: apps of one group together", .offPool)
struct GroupCoordinationTests {
    @Test func clearingWaitsForEveryAppsFlushHandler() async throws {
        // A bound far above the test: a clear that ends before the handler let go was not waited for.
        let daemon = try DaemonUnderTest(arguments: ["--flush-timeout", "60"])
        let flushing = daemon.client()
        let silent = daemon.client()
        let caller = daemon.client()
        defer { for app in [flushing, silent, caller] { app.close() } }
        let order = Recorder<String>()
        let letGo = CountBarrier()
        flushing.setFlushHandler {
            order.append("flushing")
            _ = await letGo.wait(until: 1)  // the handler holds the flush until the test lets go
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

        let anonymizing = Task { try await caller.anonymize() }
        #expect(await order.waitFor(count: 1))  // the daemon asked for the flush
        // The app without a handler agreed at once; the handler still holds: nothing is cleared yet.
        #expect(try await caller.daemon.getToken(group: "shop").token != nil)
        letGo.increment()
        let result = try await anonymizing.value
        #expect(result.asked == 3 && result.confirmed)
        #expect(await order.waitFor(count: 3))
        #expect(order.all == ["flushing", "flushed", "cleared"])
        #expect(try await caller.daemon.getToken(group: "shop").token == nil)
    }

    @Test func onlyOneOfSeveralAppsRunsItsHandlerForOneExpiry() async throws {
        let daemon = try DaemonUnderTest()
        let apps = (0..<5).map { _ in daemon.client() }
        defer { for app in apps { app.close() } }
        // Each handler call, by the customer of the token that expires.
        let calls = Recorder<String>()
        let refreshes = apps.map { _ in Recorder<UInt64>() }
        var watchers: [Task<Void, Never>] = []
        for (app, refreshed) in zip(apps, refreshes) {
            app.setJwtErrorHandler { context in calls.append(context.customerIds["registered"] ?? "?") }
            let stream = app.events
            watchers.append(
                Task {
                    for await event in stream where event.kind == .tokenRefreshed { refreshed.append(event.generation) }
                })
        }
        defer { for watcher in watchers { watcher.cancel() } }
        #expect(try await daemon.waitForSubscribers(5))
        // A token inside its last minute: every app hears expiredSoon (R13), one refreshes (R28).
        try await apps[0].setSdkAuthToken(TestJWT().token(expiringIn: 30, ids: ["registered": "first"]))
        #expect(await calls.waitFor(count: 1))

        // The refreshed token is the next generation: its expiry is claimed anew.
        try await apps[1].setSdkAuthToken(TestJWT().token(expiringIn: 30, ids: ["registered": "second"]))
        #expect(await calls.waitFor(count: 2))

        // A barrier instead of a pause: an app reads its events in order and settles its claim on one before it
        // reads the next, so once every app has seen this refresh, every app has decided on both expiries.
        try await apps[2].setSdkAuthToken(TestJWT().token(expiringIn: 3600, ids: ["registered": "third"]))
        for refreshed in refreshes {
            #expect(await refreshed.waitFor(count: 3))
            #expect(refreshed.all == [1, 2, 3])
        }
        await MainActor.run {}  // the handlers run on the main actor: let any that was started run
        #expect(calls.all.sorted() == ["first", "second"])
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
        await #expect {
            try await auth.preflight()
        } throws: { error in
            [.daemonUnavailable, .connectionLost].contains((error as? AuthClientError)?.code)
        }

        try daemon.start()
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == token)  // kept across the restart
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.setSdkAuthToken(token)
        #expect(await refreshes.waitFor(count: 2))
        #expect(refreshes.all == [1, 2])
    }
}
