// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// The library against the real daemon binary on its real socket.
@Suite("ExponeaAuth client against exponea-authd")
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
        let notified = Recorder<UInt64>()
        let observer = NotificationCenter.default.addObserver(
            forName: ExponeaAuthClient.tokenRefreshedNotification, object: nil, queue: nil
        ) { notification in
            if notification.userInfo?["group"] as? String == "shop",
                let generation = notification.userInfo?["generation"] as? UInt64
            {
                notified.append(generation)
            }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        #expect(try await daemon.waitForSubscribers(1))

        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "ann"])
        try await auth.setSdkAuthToken(token)
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == token)
        #expect(try await auth.preflight().state == .valid)
        #expect(await refreshes.waitFor(count: 1))
        #expect(refreshes.all == [TokenRefresh(group: "shop", generation: 1)])
        #expect(await notified.waitFor(count: 1))  // the SDK's shape, for those who want it
        #expect(notified.all.first == 1)

        // R7: with a token both are stored; without one the token is cleared.
        let bob = TestJWT().token(expiringIn: 3600, ids: ["registered": "bob"])
        try await auth.identifyCustomer(CustomerIdentity(customerIds: ["registered": "bob"], jwtToken: bob))
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == bob)
        try await auth.identifyCustomer(CustomerIdentity(customerIds: ["registered": "bob"]))
        #expect(try await auth.daemon.getToken(group: "shop").token == nil)

        for clear in [auth.anonymize, auth.stopIntegration, auth.clearLocalCustomerData] {
            try await auth.setSdkAuthToken(token)
            try await clear()
            #expect(try await auth.daemon.getToken(group: "shop").token == nil)
        }
        #expect(await events.waitFor(count: 11))
        #expect(
            events.all == [
                "tokenRefreshed", "tokenRefreshed",
                "tokenRefreshed", "flushRequested", "cleared",
                "tokenRefreshed", "flushRequested", "cleared",
                "tokenRefreshed", "flushRequested", "cleared",
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
        var contexts: [JwtErrorContext] = []
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
        #expect(await eventually { await !loop.contexts.isEmpty })
        #expect(await loop.contexts == [JwtErrorContext(reason: .expiredSoon, customerIds: ["registered": "dan"])])
    }
}
