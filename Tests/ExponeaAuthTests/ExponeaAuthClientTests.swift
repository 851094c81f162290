// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// The library against the real daemon binary on its real socket.
@Suite("ExponeaAuth client against exponea-authd", .offPool)
struct ExponeaAuthClientTests {
    @Test func everyOperationReachesTheDaemonAndComesBackAsEvents() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        let refreshes = Recorder<TokenRefresh>()
        let events = Recorder<String>()
        let refreshTask = Task { for await refresh in auth.tokenRefreshes { refreshes.append(refresh) } }
        let eventTask = Task { for await event in auth.events { events.append(event.kind.rawValue) } }
        defer {
            refreshTask.cancel()
            eventTask.cancel()
        }
        #expect(try await daemon.waitForSubscribers(1))

        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "ann"])
        try await auth.setSdkAuthToken(token)
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == token)
        #expect(try await auth.preflight().state == .valid)
        #expect(await refreshes.waitFor(count: 1))
        #expect(refreshes.all == [TokenRefresh(group: "shop", generation: 1)])

        // R7: with a token both are stored; without one the token is cleared.
        let bob = TestJWT().token(expiringIn: 3600, ids: ["registered": "bob"])
        try await auth.identifyCustomer(CustomerIdentity(customerIds: ["registered": "bob"], jwtToken: bob))
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == bob)
        try await auth.identifyCustomer(CustomerIdentity(customerIds: ["registered": "bob"]))
        #expect(try await auth.daemon.getToken(group: "shop").token == nil)

        for clear in [auth.anonymize, auth.stopIntegration] {
            try await auth.setSdkAuthToken(token)
            let result = try await clear()
            #expect(result.asked == 1 && result.confirmed)
            #expect(try await auth.daemon.getToken(group: "shop").token == nil)
        }
        try await auth.setSdkAuthToken(token)
        try await auth.clearLocalCustomerData()  // R9: the wipe, no flush
        #expect(try await auth.daemon.getToken(group: "shop").token == nil)
        #expect(await events.waitFor(count: 11))
        // The subscription began with where the group stood (no token yet).
        #expect(
            events.all.drop(while: { $0 == "state" }) == [
                "tokenRefreshed", "tokenRefreshed",
                "tokenRefreshed", "flushRequested", "cleared",
                "tokenRefreshed", "flushRequested", "cleared",
                "tokenRefreshed", "cleared",
            ])
    }

    @Test func aMalformedTokenIsRefusedWithWhatIsWrong() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        await #expect {
            try await auth.setSdkAuthToken("not-a-jwt")
        } throws: { error in
            let error = error as? AuthClientError
            return error?.code == .malformedToken && error?.parameters["code"] == "notThreeParts"
        }
    }

    /// A group name with what JSON must escape reaches the daemon whole: it answers that the name is not a
    /// group's, not that the call is not JSON.
    @Test(arguments: ["a\"b", "a\\b", "a\u{1}b", "a\nb", "é\"\\\u{1F}"])
    func aGroupNameIsEscapedInTheCall(group: String) async throws {
        let daemon = try DaemonUnderTest()
        let client = AuthDaemonClient(socketPath: daemon.socketPath)
        await #expect {
            _ = try await client.getToken(group: group)
        } throws: { error in
            (error as? AuthClientError)?.code == .invalidGroupName
        }
    }

    @Test func projectModeIgnoresStreamTokens() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client(
            integration: .project(ProjectSettings(projectToken: "p-1", authorization: "api-key")))
        defer { auth.close() }
        try await auth.setSdkAuthToken(TestJWT().token(expiringIn: 3600))
        #expect(try await auth.daemon.getToken(group: "shop").generation == 0)
    }

    @Test func theHandlerRunsOnTheMainActorWithReasonAndCustomerIds() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        let calls = Recorder<JwtErrorContext>()
        auth.setJwtErrorHandler { context in
            MainActor.assertIsolated()  // stops the test process if not
            calls.append(context)
        }
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.identifyCustomer(CustomerIdentity(customerIds: ["registered": "cleo"]))

        let preflight = try await auth.preflight()
        #expect(preflight.state == .notProvided && preflight.reason == .notProvided)
        #expect(await calls.waitFor(count: 1))
        #expect(calls.all == [JwtErrorContext(reason: .notProvided, customerIds: ["registered": "cleo"])])
    }

    actor AppLoop {
        let contexts = Arrivals<JwtErrorContext>()
        func record(_ context: JwtErrorContext) { contexts.append(context) }
    }

    @Test func theHandlerCanRunOnAnActorTheAppChooses() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        let loop = AppLoop()
        auth.setJwtErrorHandler(on: loop) { loop, context in
            loop.assertIsolated()
            loop.record(context)
        }
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.setSdkAuthToken(TestJWT().token(expiringIn: 30, ids: ["registered": "dan"]))
        // R13: a token inside its last minute is reported at once.
        #expect(await loop.contexts.waitFor(count: 1))
        #expect(loop.contexts.all == [JwtErrorContext(reason: .expiredSoon, customerIds: ["registered": "dan"])])
    }

    /// Issue 17: the expiry timer fired before any app was there. An app that connects later is told (the
    /// daemon replays the group's state on Subscribe) and its handler runs.
    @Test func anAppThatConnectsAfterTheTimerFiredStillRunsItsHandler() async throws {
        let daemon = try DaemonUnderTest()
        let setter = AuthDaemonClient(socketPath: daemon.socketPath)
        _ = try await setter.setToken(TestJWT().token(expiringIn: 30, ids: ["registered": "eve"]), group: "shop")

        let auth = daemon.client()
        defer { auth.close() }
        let calls = Recorder<JwtErrorContext>()
        auth.setJwtErrorHandler { context in calls.append(context) }
        #expect(await calls.waitFor(count: 1))
        #expect(calls.all == [JwtErrorContext(reason: .expiredSoon, customerIds: ["registered": "eve"])])
    }

    /// Issue 17: a token entered its last minute while the daemon was down. The start-up expiry reached no
    /// app (none was connected); the app that connects after the start still runs its handler.
    @Test func anAppThatConnectsAfterADaemonRestartStillHearsTheStartUpExpiry() async throws {
        let daemon = try DaemonUnderTest()
        let setter = AuthDaemonClient(socketPath: daemon.socketPath)
        _ = try await setter.setToken(TestJWT().token(expiringIn: 30, ids: ["registered": "fay"]), group: "shop")
        daemon.stop()
        try daemon.start()

        let auth = daemon.client()
        defer { auth.close() }
        let calls = Recorder<JwtErrorContext>()
        auth.setJwtErrorHandler { context in calls.append(context) }
        #expect(await calls.waitFor(count: 1))
        // Within the wait, only the replay can bring it: the token's next timer (expired) is 30 s away.
        #expect(calls.all == [JwtErrorContext(reason: .expiredSoon, customerIds: ["registered": "fay"])])
    }

    /// A handler registered after the group's jwtError came still gets it (the library's own replay).
    @Test func aHandlerRegisteredAfterTheJwtErrorStillRuns() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        let seen = Recorder<AuthEvent>()
        let watcher = Task { for await event in auth.events where event.kind == .jwtError { seen.append(event) } }
        defer { watcher.cancel() }
        #expect(try await daemon.waitForSubscribers(1))
        _ = try await auth.preflight()  // no token: notProvided, with no handler yet
        #expect(await seen.waitFor(count: 1))

        let calls = Recorder<JwtErrorContext>()
        auth.setJwtErrorHandler { context in calls.append(context) }
        #expect(await calls.waitFor(count: 1))
        #expect(calls.all.map(\.reason) == [.notProvided])
    }

    /// R8: an app that does not confirm its flush in time makes anonymize report it; the token is cleared.
    @Test func anonymizeReportsTheAppsThatDidNotConfirm() async throws {
        // Long enough for the app without a handler to agree on a loaded machine; the slow one never does.
        let daemon = try DaemonUnderTest(arguments: ["--flush-timeout", "3"])
        let slow = daemon.client()
        let caller = daemon.client()
        defer { for app in [slow, caller] { app.close() } }
        let gate = Gate()
        slow.setFlushHandler { await gate.wait() }  // never done within the bound
        #expect(try await daemon.waitForSubscribers(2))
        try await caller.setSdkAuthToken(TestJWT().token(expiringIn: 3600))

        let result = try await caller.anonymize()
        await gate.open()
        #expect(result.asked == 2)
        #expect(result.unconfirmed == [UnconfirmedFlush(pid: getpid(), reason: .timedOut)])
        #expect(!result.confirmed)
        #expect(try await caller.daemon.getToken(group: "shop").token == nil)
    }

    /// A flush handler held until the test opens it.
    actor Gate {
        private var waiting: [CheckedContinuation<Void, Never>] = []
        private var opened = false
        func wait() async {
            if opened { return }
            await withCheckedContinuation { waiting.append($0) }
        }
        func open() {
            opened = true
            for waiter in waiting { waiter.resume() }
            waiting = []
        }
    }
}
