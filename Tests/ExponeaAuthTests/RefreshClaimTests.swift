// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// The refresh claim across real app processes (`authd-test-app`, each linking ExponeaAuth) on the real
/// daemon: one app refreshes per expiry (R28), and a claim dies with its claimant. One test at a time: each
/// starts up to five app processes, and the suites that run beside it have deadlines of their own.
@Suite("ExponeaAuth: the refresh claim across app processes", .serialized, .offPool)
struct RefreshClaimTests {
    let signer = TestJWT()

    /// Starts `count` apps and waits until each is subscribed.
    func apps(_ count: Int, on daemon: DaemonUnderTest, sync: Bool = false) async throws -> [AppProcess] {
        let apps = try (0..<count).map { try AppProcess("app\($0)", daemon: daemon, sync: sync) }
        #expect(try await daemon.waitForSubscribers(count))
        return apps
    }

    func setToken(_ token: String, on daemon: DaemonUnderTest) async throws {
        _ = try await AuthDaemonClient(socketPath: daemon.socketPath).setToken(token, group: "shop")
    }

    /// Kills the app that runs its handler for `reason` and waits until another app runs its handler for the
    /// same reason, long before the lease (a minute) could run out: only the claim's release hands it on before the
    /// wait's bound (10 s). The time the handover took is printed; its figure belongs to the benchmarks.
    /// Returns the apps left alive and the one now refreshing.
    func killTheClaimHolder(
        of apps: [AppProcess], reason: String, label: String
    ) async throws -> (others: [AppProcess], next: AppProcess) {
        let holder = try #require(apps.printing("handler").first)
        let killed = ContinuousClock.now
        holder.kill()
        let others = apps.filter { $0 !== holder }
        #expect(others.waitUntil { $0.count("handler \(reason)") == 1 })
        print("RefreshClaim, \(label): another app's handler ran \(ContinuousClock.now - killed) after the kill")
        return (others, try #require(others.printing("handler").first))
    }

    /// `next` sets a new token (generation 2); every app in `apps` receives it, and ran its handler once in all.
    func refresh(by next: AppProcess, reaching apps: [AppProcess]) async throws {
        next.send("token " + signer.token(expiringIn: 3600, ids: ["registered": "v2"]))
        #expect(apps.waitUntil { $0.allSatisfy { !$0.lines("refreshed 2 v2").isEmpty } })
        #expect(apps.count("handler") == 1)
    }

    /// Issue 19: at an expiry, the app holding the claim is killed inside its handler. Another app's handler
    /// runs at once after the kill (the lease is a minute), and its token reaches every app.
    @Test func killingTheClaimHolderHandsTheRefreshOnAtAnExpiry() async throws {
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "60"])
        let apps = try await apps(3, on: daemon)
        try await setToken(signer.token(expiringIn: 30, ids: ["registered": "v1"]), on: daemon)
        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 1 })
        let (others, next) = try await killTheClaimHolder(of: apps, reason: "expiredSoon", label: "expiry")
        try await refresh(by: next, reaching: others)
    }

    /// Issue 19: after a revoke (the backend refuses the stored token with 401), the claim holder is killed
    /// inside its handler. Another app refreshes at once; the request that met the 401 succeeds with
    /// the new token, and so do every app's requests.
    @Test func killingTheClaimHolderHandsTheRefreshOnAfterARevoke() async throws {
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "60"])
        let apps = try await apps(3, on: daemon)
        try await setToken(signer.token(expiringIn: 3600, ids: ["registered": "v1"]), on: daemon)
        #expect(apps.waitUntil { $0.allSatisfy { !$0.lines("refreshed 1 v1").isEmpty } })
        for app in apps { app.send("accept v2") }  // the backend no longer takes v1
        let requester = apps[0]
        requester.send("request")
        #expect(apps.waitUntil { $0.count("handler invalid") == 1 })
        let (others, next) = try await killTheClaimHolder(of: apps, reason: "invalid", label: "revoke")
        try await refresh(by: next, reaching: others)
        if others.contains(where: { $0 === requester }) {
            // The request waited (R19, R22) and was retried with the token another app set.
            #expect([requester].waitUntil { _ in requester.lines("response") == ["response 200"] })
        }
        for app in others where app !== requester { app.send("request") }
        #expect(others.waitUntil { $0.allSatisfy { $0.lines("response") == ["response 200"] } })
    }

    /// The SDK's handler shape (it returns at once and fetches in a task of its own) holds its claim on a
    /// connection of its own too: killed inside that fetch, it is replaced at once.
    @Test func aHandlerThatFetchesInATaskOfItsOwnIsReplacedWhenKilled() async throws {
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "60"])
        let apps = try await apps(3, on: daemon, sync: true)
        try await setToken(signer.token(expiringIn: 30, ids: ["registered": "v1"]), on: daemon)
        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 1 })
        let (others, next) = try await killTheClaimHolder(
            of: apps, reason: "expiredSoon", label: "handler fetching in its own task")
        try await refresh(by: next, reaching: others)
    }

    /// A claimant alive but stuck in its handler is replaced when the configured lease runs out, not before;
    /// the stuck app does not run its handler a second time for the same token.
    @Test func aHungClaimantIsReplacedAfterTheLease() async throws {
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "1.5"])
        let apps = try await apps(3, on: daemon)
        try await setToken(signer.token(expiringIn: 30, ids: ["registered": "v1"]), on: daemon)
        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 1 })
        let holder = try #require(apps.printing("handler").first)  // and it never answers

        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 2 })
        #expect(holder.lines("handler").count == 1)

        let next = try #require(apps.filter { $0 !== holder }.printing("handler").first)
        next.send("token " + signer.token(expiringIn: 3600, ids: ["registered": "v2"]))
        #expect(apps.waitUntil { $0.allSatisfy { !$0.lines("refreshed 2 v2").isEmpty } })
    }

    /// A handler that ends without a token (its fetch failed) releases the claim at once: the next claim is
    /// granted long before the lease (a minute) would have run out.
    @Test func aFailedFetchReleasesTheClaimAtOnce() async throws {
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "60"])
        let apps = try await apps(2, on: daemon)
        try await setToken(signer.token(expiringIn: 30, ids: ["registered": "v1"]), on: daemon)
        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 1 })
        let other = AuthDaemonClient(socketPath: daemon.socketPath)
        #expect(try await !other.claimRefresh(group: "shop", generation: 1))  // held

        let holder = try #require(apps.printing("handler").first)
        holder.send("fail")
        // The holder's ReleaseRefresh ends the claim: the daemon's notice says so, and the next claim is granted.
        #expect(daemon.waitForOutput { $0.contains("Refresh claim ended: released by its holder") })
        #expect(try await other.claimRefresh(group: "shop", generation: 1))
    }

    /// R28 with the claim tied to its connection: five apps, two expiries, exactly one handler each.
    @Test func fiveAppsFetchOncePerExpiry() async throws {
        let daemon = try DaemonUnderTest()
        let apps = try await apps(5, on: daemon)
        try await setToken(signer.token(expiringIn: 30, ids: ["registered": "v1"]), on: daemon)
        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 1 })
        let first = try #require(apps.printing("handler").first)
        // The new token also enters its last minute at once: the next expiry.
        first.send("token " + signer.token(expiringIn: 30, ids: ["registered": "v2"]))
        #expect(apps.waitUntil { $0.allSatisfy { !$0.lines("refreshed 2 v2").isEmpty } })
        #expect(apps.waitUntil { $0.count("handler expiredSoon") == 2 })
        let second = try #require(apps.filter { $0.lines("handler").count + ($0 === first ? -1 : 0) == 1 }.first)
        second.send("token " + signer.token(expiringIn: 3600, ids: ["registered": "v3"]))
        // Every app has seen the last token: every jwtError before it was handled, and claimed once.
        #expect(apps.waitUntil { $0.allSatisfy { !$0.lines("refreshed 3 v3").isEmpty } })
        #expect(apps.count("handler") == 2)
    }
}
