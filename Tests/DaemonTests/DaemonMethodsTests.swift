// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Each `com.exponea.Auth` method and event, end to end: the real daemon binary, its real socket, and an app
/// subscribed to the group on a second connection.
@Suite("exponea-authd: every method and event", .offPool)
struct DaemonMethodsTests {
    /// A started daemon with one app calling and one subscribed to "shop".
    final class Session {
        let fixture: DaemonStartupTests.Fixture
        let daemon: BackgroundProcess
        let app: VarlinkTestClient
        let events: VarlinkTestClient

        init(arguments: [String] = []) throws {
            fixture = try DaemonStartupTests.Fixture()
            daemon = try fixture.start(arguments: arguments)
            guard fixture.notify.receive()?.hasPrefix("READY=1") == true else { throw POSIXError(.ETIMEDOUT) }
            app = try VarlinkTestClient(path: fixture.socketPath)
            events = try VarlinkTestClient(path: fixture.socketPath)
            try events.subscribe("shop")
            // Every subscription starts with where the group stands (here, nothing yet), sent once the daemon has
            // registered it: the barrier before the test's calls.
            guard Self.describe(try events.event()) == "state 0" else { throw POSIXError(.EPROTO) }
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

    @Test func authFailuresAreDecidedByTheTokenTheRequestCarried() throws {
        let session = try Session()
        let first = TestJWT().token(expiringIn: 3600, ids: ["registered": "first"])
        let valid = TestJWT().token(expiringIn: 3600)
        try session.app.call("SetToken", ["group": "shop", "token": first])
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        #expect(try session.nextEvent() == "tokenRefreshed 2")

        // A request that carried generation 1 failed, but another token is already here: retry at once, no
        // handler (R19).
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

    /// R19: "replaced" means another token. The same token stored again is announced (R6) but replaces
    /// nothing: a 401 with it runs the handler and waits, rather than retrying at once with the same token.
    @Test func theSameTokenStoredAgainIsNoReplacement() throws {
        let session = try Session()
        let valid = TestJWT().token(expiringIn: 3600)
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        #expect(try session.nextEvent() == "tokenRefreshed 2")

        let report = try session.app.call("ReportAuthFailure", ["group": "shop", "status": 401, "generation": 1])
        #expect(report["retry"] as? Bool == true)
        #expect(report["reason"] as? String == "invalid")
        #expect(try session.nextEvent() == "jwtError invalid 2")
        // R21 still holds: a 403 with a valid token never retries.
        let forbidden = try session.app.call("ReportAuthFailure", ["group": "shop", "status": 403, "generation": 1])
        #expect(forbidden["retry"] as? Bool == false)

        // The retry's wait (R19, R22) is not ended by the same token either, only by another one.
        let waiter = try VarlinkTestClient(path: session.fixture.socketPath)
        defer { waiter.close() }
        try waiter.send("WaitForToken", ["group": "shop", "after": 1, "timeoutMs": 5000])
        try session.app.call("SetToken", ["group": "shop", "token": valid])
        #expect(try session.nextEvent() == "tokenRefreshed 3")
        let next = TestJWT().token(expiringIn: 7200)
        try session.app.call("SetToken", ["group": "shop", "token": next])
        let woken = try waiter.reply()
        #expect(woken["generation"] as? Int == 4)
        #expect(woken["token"] as? String == next)
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

    @Test(arguments: [("Anonymize", "anonymize"), ("StopIntegration", "stopIntegration")])
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
        // The calling connection waits for its reply, so the app acknowledges on another one.
        let acknowledger = try VarlinkTestClient(path: session.fixture.socketPath)
        defer { acknowledger.close() }
        #expect(try acknowledger.call("AcknowledgeFlush", ["group": "shop", "flushId": flushId]).isEmpty)
        let reply = try session.app.reply()
        #expect(reply["asked"] as? Int == 1)
        #expect((reply["unconfirmed"] as? [Any])?.isEmpty == true)
        #expect(try session.nextEvent() == "cleared \(cause) 2")

        let get = try session.app.call("GetToken", ["group": "shop"])
        #expect(get["token"] == nil)
        try session.app.call("Preflight", ["group": "shop"])
        let error = try session.events.event()
        #expect(Session.describe(error) == "jwtError notProvided 2")
        #expect(error["customerIds"] as? [String: String] == [:])
        #expect(!FileManager.default.fileExists(atPath: session.fixture.stateDirectory + "/shop.token"))
    }

    /// R9: clearLocalCustomerData is the wipe. No flushRequested, no wait, even for an app that would never
    /// acknowledge and a flush bound of a minute.
    @Test func clearLocalCustomerDataWipesAtOnceWithoutAFlush() throws {
        let session = try Session(arguments: ["--flush-timeout", "60"])
        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "dora"])
        try session.app.call(
            "IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "dora"], "token": token])
        #expect(try session.nextEvent() == "tokenRefreshed 1")

        #expect(try session.app.call("ClearLocalCustomerData", ["group": "shop"]).isEmpty)
        #expect(try session.nextEvent() == "cleared clearLocalCustomerData 2")
        #expect(try session.app.call("GetToken", ["group": "shop"])["token"] == nil)
        #expect(!FileManager.default.fileExists(atPath: session.fixture.stateDirectory + "/shop.token"))
    }

    /// R8, R9: a flush nobody confirmed is not a success. The reply names each app that did not confirm, and
    /// why; the group is cleared all the same.
    @Test func anonymizeSaysWhichAppsDidNotConfirmTheirFlush() throws {
        let session = try Session(arguments: ["--flush-timeout", "0.5"])
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        // A second app that subscribes and then goes away before it acknowledges.
        let leaving = try VarlinkTestClient(path: session.fixture.socketPath)
        try leaving.subscribe("shop")
        #expect(try leaving.event()["kind"] as? String == "state")

        try session.app.send("Anonymize", ["group": "shop"])
        #expect(try session.events.event()["kind"] as? String == "flushRequested")  // and never acknowledged
        #expect(try leaving.event()["kind"] as? String == "flushRequested")
        leaving.close()
        let reply = try session.app.reply()
        #expect(reply["asked"] as? Int == 2)
        let unconfirmed = try #require(reply["unconfirmed"] as? [[String: Any]])
        let reasons = unconfirmed.compactMap { $0["reason"] as? String }.sorted()
        #expect(reasons == ["dropped", "timedOut"])
        #expect(unconfirmed.allSatisfy { ($0["pid"] as? Int) == Int(getpid()) })
        #expect(try session.nextEvent() == "cleared anonymize 2")
        #expect(try session.app.call("GetToken", ["group": "shop"])["token"] == nil)
    }

    /// A subscription first gets where the group stands, so that an app that connects after a timer fired
    /// acts as one that was there (R13): the expiry that nobody heard is told again.
    @Test func aLateSubscriberIsToldTheStateAndTheExpiryItMissed() throws {
        // A long lease: the claim below must not run out and send the jwtError again during the test.
        let session = try Session(arguments: ["--refresh-lease", "60"])
        let token = TestJWT().token(expiringIn: 30, ids: ["registered": "late"])
        try session.app.call("SetToken", ["group": "shop", "token": token])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
        #expect(try session.nextEvent() == "jwtError expiredSoon 1")  // the timer fired, at once
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 1])["granted"] as? Bool == true)

        let late = try VarlinkTestClient(path: session.fixture.socketPath)
        defer { late.close() }
        try late.subscribe("shop")
        let state = try late.event()
        #expect(state["kind"] as? String == "state")
        #expect(state["tokenState"] as? String == "expiredSoon")
        #expect(state["refreshClaimed"] as? Bool == true)
        #expect(state["generation"] as? Int == 1)
        let error = try late.event()
        #expect(Session.describe(error) == "jwtError expiredSoon 1")
        #expect(error["customerIds"] as? [String: String] == ["registered": "late"])
    }

    @Test func claimRefreshGrantsEachGenerationOnce() throws {
        let session = try Session()
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == false)
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == false)
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 1])["granted"] as? Bool == true)
    }

    /// A claim belongs to its connection: when the claimant goes away inside its fetch, the claim ends at once
    /// and the group's jwtError goes out again, so that another app refreshes, long before the lease ends.
    @Test func aClaimEndsWithItsConnectionAndTheJwtErrorIsSentAgain() throws {
        let session = try Session(arguments: ["--refresh-lease", "60"])
        try session.app.call("Preflight", ["group": "shop"])
        #expect(try session.nextEvent() == "jwtError notProvided 0")
        let claimant = try VarlinkTestClient(path: session.fixture.socketPath)
        let claim = try claimant.call("ClaimRefresh", ["group": "shop", "generation": 0])
        #expect(claim["granted"] as? Bool == true)
        #expect(claim["leaseMs"] as? Int == 60_000)
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == false)

        claimant.close()  // the app crashed inside its handler
        // At once: the lease is a minute, far past the wait for the event.
        #expect(try session.nextEvent() == "jwtError notProvided 0")
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
    }

    /// A fetch that failed gives its claim up at once; the next claim is granted without waiting for the lease.
    /// The jwtError is not sent again, so a failing backend is not asked in a loop.
    @Test func releaseRefreshFreesTheClaimAtOnce() throws {
        let session = try Session(arguments: ["--refresh-lease", "60"])
        let claimant = try VarlinkTestClient(path: session.fixture.socketPath)
        defer { claimant.close() }
        #expect(try claimant.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
        // Only the holder may release it.
        #expect(
            try session.app.call("ReleaseRefresh", ["group": "shop", "generation": 0])["released"] as? Bool == false)
        #expect(try claimant.call("ReleaseRefresh", ["group": "shop", "generation": 0])["released"] as? Bool == true)
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
        // Nothing was sent again: the next event is the one this test causes.
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        #expect(try session.nextEvent() == "tokenRefreshed 1")
    }

    /// A claimant alive but stuck is replaced when its lease runs out: the jwtError goes out again. One that
    /// renews keeps its claim.
    @Test func aHungClaimantIsReplacedAfterTheLeaseUnlessItRenews() throws {
        let session = try Session(arguments: ["--refresh-lease", "1"])
        try session.app.call("Preflight", ["group": "shop"])
        #expect(try session.nextEvent() == "jwtError notProvided 0")
        let claimant = try VarlinkTestClient(path: session.fixture.socketPath)
        defer { claimant.close() }
        let renew: [String: Any] = ["group": "shop", "generation": 0, "renew": true]
        #expect(try claimant.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
        // A renewal from another connection is refused; the holder's own extends the lease.
        #expect(try session.app.call("ClaimRefresh", renew)["granted"] as? Bool == false)
        let renewed = try claimant.call("ClaimRefresh", renew)
        #expect(renewed["granted"] as? Bool == true)
        #expect(renewed["leaseMs"] as? Int == 1000)

        // Then the claimant hangs: the lease runs out and the others hear the jwtError again (when, to the
        // millisecond, is AuthServiceTests' on a ManualClock).
        #expect(try session.nextEvent() == "jwtError notProvided 0")
        #expect(try session.app.call("ClaimRefresh", ["group": "shop", "generation": 0])["granted"] as? Bool == true)
    }

    @Test func waitForTokenIsBoundedAndEndsAtItsTimeout() throws {
        let session = try Session()
        let reply = try session.app.call("WaitForToken", ["group": "shop", "after": 0, "timeoutMs": 300])
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

    /// CountGroups counts what ListGroups lists, as changes come: a group with only a subscriber, a token set
    /// (an expired one counts as a token), an identity without a token, a wipe.
    @Test func countGroupsCountsWhatListGroupsLists() throws {
        let session = try Session()
        func counts() throws -> [String: Int] {
            let reply = try session.app.call("CountGroups")
            let groups = try #require(session.app.call("ListGroups")["groups"] as? [[String: Any]])
            #expect(reply["groups"] as? Int == groups.count, "\(reply)")
            #expect(reply["withToken"] as? Int == groups.count { $0["hasToken"] as? Bool == true }, "\(reply)")
            return reply.compactMapValues { $0 as? Int }
        }
        #expect(try counts() == ["groups": 1, "withToken": 0])
        try session.app.call("SetToken", ["group": "shop", "token": TestJWT().token(exp: 4_000_000_000)])
        try session.app.call("SetToken", ["group": "mail", "token": TestJWT().token(exp: 1_000_000_000)])
        try session.app.call("IdentifyCustomer", ["group": "news", "customerIds": ["cookie": "c-1"]])
        #expect(try counts() == ["groups": 3, "withToken": 2])
        try session.app.call("ClearLocalCustomerData", ["group": "shop"])
        #expect(try counts()["withToken"] == 1)
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
