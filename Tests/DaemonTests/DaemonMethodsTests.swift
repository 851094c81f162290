// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Each `com.exponea.Auth` method and event, end to end: the real daemon binary, its real socket, and an app
/// subscribed to the group on a second connection.
@Suite("exponea-authd: every method and event")
struct DaemonMethodsTests {
    /// A started daemon with one app calling and one subscribed to "shop".
    final class Session {
        let fixture: DaemonStartupTests.Fixture
        let daemon: BackgroundProcess
        let app: VarlinkTestClient
        let events: VarlinkTestClient

        init() throws {
            fixture = try DaemonStartupTests.Fixture()
            daemon = try fixture.start()
            guard fixture.notify.receive()?.hasPrefix("READY=1") == true else { throw POSIXError(.ETIMEDOUT) }
            app = try VarlinkTestClient(path: fixture.socketPath)
            events = try VarlinkTestClient(path: fixture.socketPath)
            try events.subscribe("shop")
            let app = app
            let subscribed = BackgroundProcess.waitUntil {
                let groups = (try? app.call("ListGroups"))?["groups"] as? [[String: Any]] ?? []
                return groups.contains { $0["name"] as? String == "shop" && $0["subscribers"] as? Int == 1 }
            }
            guard subscribed else { throw POSIXError(.ETIMEDOUT) }
        }

        deinit {
            app.close()
            events.close()
            daemon.stop(signal: SIGTERM)
        }

        /// The next event as "kind [reason|cause] generation".
        func nextEvent() throws -> String { Self.describe(try events.event()) }

        static func describe(_ event: [String: Any]) -> String {
            let detail = (event["reason"] ?? event["cause"]) as? String
            return [event["kind"] as? String ?? "?", detail, "\(event["generation"] as? Int ?? -1)"]
                .compactMap { $0 }.joined(separator: " ")
        }
    }

    @Test func preflightWithoutATokenTellsTheAppsNotProvided() throws {
        let session = try Session()
        let reply = try session.app.call("Preflight", ["group": "shop"])
        #expect(reply["state"] as? String == "notProvided")
        #expect(reply["reason"] as? String == "notProvided")
        #expect(reply["generation"] as? Int == 0)
        #expect(reply["token"] == nil)
        #expect(try session.nextEvent() == "jwtError notProvided 0")
    }

    @Test func anExpiredTokenIsStoredAnnouncedAndReported() throws {
        let session = try Session()
        let expired = TestJWT().token(expiringIn: -10, ids: ["registered": "ann"])

        let set = try session.app.call("SetToken", ["group": "shop", "token": expired])
        #expect(set["generation"] as? Int == 1)
        let claims = try #require(set["claims"] as? [String: Any])
        #expect(claims["customerIds"] as? [String: String] == ["registered": "ann"])
        #expect(claims["algorithm"] as? String == "HS512")
        // R6: the refresh is announced even for an expired token; R14: then its expiry.
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        let error = try session.events.event()
        #expect(Session.describe(error) == "jwtError expired 1")
        #expect(error["customerIds"] as? [String: String] == ["registered": "ann"])

        let get = try session.app.call("GetToken", ["group": "shop"])
        #expect(get["token"] as? String == expired)
        #expect(get["generation"] as? Int == 1)
        // R16: the pre-flight still hands out the expired token, with the handler's reason.
        let preflight = try session.app.call("Preflight", ["group": "shop"])
        #expect(preflight["token"] as? String == expired)
        #expect(preflight["state"] as? String == "expired")
        #expect(preflight["reason"] as? String == "expired")
    }

    @Test func authFailuresAreDecidedByTheGenerationTheRequestCarried() throws {
        let session = try Session()
        let valid = TestJWT().token(expiringIn: 3600)
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        #expect(try session.nextEvent() == "tokenRefreshed 2")

        // A request that carried generation 1 failed, but 2 is already here: retry at once, no handler (R19).
        let stale = try session.app.call(
            "ReportAuthFailure", ["group": "shop", "status": 401, "generation": 1, "tokenExpired": true])
        #expect(stale["retry"] as? Bool == true)
        #expect(stale["reason"] == nil)
        // 403 with the current, valid token: fail, no handler (R21).
        let forbidden = try session.app.call("ReportAuthFailure", ["group": "shop", "status": 403, "generation": 2])
        #expect(forbidden["retry"] as? Bool == false)
        #expect(forbidden["reason"] == nil)
        // 401 with the current token, the body says it expired: retry, and the apps hear "expired" (R19).
        let current = try session.app.call(
            "ReportAuthFailure", ["group": "shop", "status": 401, "generation": 2, "tokenExpired": true])
        #expect(current["retry"] as? Bool == true)
        #expect(current["reason"] as? String == "expired")
        #expect(try session.nextEvent() == "jwtError expired 2")
        // The same report from a second app within the window does not make a second event.
        try session.app.call(
            "ReportAuthFailure", ["group": "shop", "status": 401, "generation": 2, "tokenExpired": true])
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        #expect(try session.nextEvent() == "tokenRefreshed 3")
    }

    @Test func identifyCustomerStoresTheTokenOrClearsIt() throws {
        let session = try Session()
        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "bob"])
        let identified = try session.app.call(
            "IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "bob"], "token": token])
        #expect(identified["generation"] as? Int == 1)
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        #expect(try session.app.call("GetToken", ["group": "shop"])["token"] as? String == token)

        // R7: identifying without a token removes the stored one.
        let anonymous = try session.app.call(
            "IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "carl"]])
        #expect(anonymous["generation"] as? Int == 2)
        let get = try session.app.call("GetToken", ["group": "shop"])
        #expect(get["token"] == nil)
        #expect(get["generation"] as? Int == 2)
        // The customer ids stay, and are what the next jwtError names.
        try session.app.call("Preflight", ["group": "shop"])
        let error = try session.events.event()
        #expect(Session.describe(error) == "jwtError notProvided 2")
        #expect(error["customerIds"] as? [String: String] == ["registered": "carl"])
    }

    @Test(arguments: [
        ("Anonymize", "anonymize"), ("StopIntegration", "stopIntegration"),
        ("ClearLocalCustomerData", "clearLocalCustomerData"),
    ])
    func clearingFlushesTheAppsThenRemovesTokenAndIdentity(method: String, cause: String) throws {
        let session = try Session()
        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "dora"])
        try session.app.call(
            "IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "dora"], "token": token])
        #expect(try session.nextEvent() == "tokenRefreshed 1")

        try session.app.send(method, ["group": "shop"])
        let flush = try session.events.event()
        #expect(flush["kind"] as? String == "flushRequested")
        let flushId = try #require(flush["flushId"] as? String)
        let started = ContinuousClock.now
        // The calling connection waits for its reply, so the app acknowledges on another one.
        let acknowledger = try VarlinkTestClient(path: session.fixture.socketPath)
        defer { acknowledger.close() }
        #expect(try acknowledger.call("AcknowledgeFlush", ["group": "shop", "flushId": flushId]).isEmpty)
        #expect(try session.app.reply().isEmpty)
        // Acknowledged: the clear did not wait for the 2 s bound.
        #expect(ContinuousClock.now - started < .seconds(1.5))
        #expect(try session.nextEvent() == "cleared \(cause) 2")

        let get = try session.app.call("GetToken", ["group": "shop"])
        #expect(get["token"] == nil)
        try session.app.call("Preflight", ["group": "shop"])
        let error = try session.events.event()
        #expect(Session.describe(error) == "jwtError notProvided 2")
        #expect(error["customerIds"] as? [String: String] == [:])
        #expect(!FileManager.default.fileExists(atPath: session.fixture.stateDirectory + "/shop.token"))
    }

    @Test func claimRefreshGrantsEachGenerationOnce() throws {
        let session = try Session()
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == false)
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == false)
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 1])["granted"] as? Bool == true)
    }

    @Test func waitForTokenIsBoundedAndEndsAtItsTimeout() throws {
        let session = try Session()
        let started = ContinuousClock.now
        let reply = try session.app.call("WaitForToken", ["group": "shop", "after": 0, "timeoutMs": 300])
        #expect(ContinuousClock.now - started >= .milliseconds(250))
        #expect(reply["generation"] as? Int == 0)
        #expect(reply["token"] == nil)
        #expect {
            try session.app.call("WaitForToken", ["group": "shop", "after": 0, "timeoutMs": 60_000])
        } throws: { error in
            (error as? VarlinkTestClient.Failure)?.name == "org.varlink.service.InvalidParameter"
        }
    }

    @Test func listGroupsSummarisesEachGroup() throws {
        let session = try Session()
        let exp = Date().timeIntervalSince1970.rounded(.down) + 3600
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(exp: exp)])
        let groups = try #require(session.app.call("ListGroups")["groups"] as? [[String: Any]])
        #expect(groups.count == 1)
        let shop = try #require(groups.first)
        #expect(shop["name"] as? String == "shop")
        #expect(shop["hasToken"] as? Bool == true)
        #expect(shop["state"] as? String == "valid")
        #expect(shop["expiresAt"] as? Double == exp)
        #expect(shop["generation"] as? Int == 1)
        #expect(shop["subscribers"] as? Int == 1)
    }

    /// R13 through the real binary and the real wall clock: no injected time.
    @Test func expiredSoonArrivesAMinuteBeforeExp() throws {
        let session = try Session()
        let exp = Date().timeIntervalSince1970.rounded(.down) + 62
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(exp: exp)])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        let event = try session.nextEvent()
        let firedAt = Date().timeIntervalSince1970
        #expect(event == "jwtError expiredSoon 1")
        // Due at exp - 60 (1-2 s after the set, as exp is rounded down); allow for a slow machine.
        #expect(firedAt >= exp - 60 - 0.05)
        #expect(firedAt < exp - 60 + 2)
    }
}
