// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import AuthDaemonCommand
import AuthProtocol
import AuthStore
import AuthTestKit
import Foundation
import Logging
import Synchronization
import Testing

@Suite("The service's method semantics")
struct AuthServiceTests {
    /// A service over a fresh store, with a clock the test moves and whose timers fire only when told.
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let store: TokenStore
        let clock = ManualClock(Date(timeIntervalSince1970: 1_900_000_000))
        let service: AuthService
        /// The loop the service's actor runs on, as in the daemon.
        let loop: TestLoop
        let shop = try! AppGroup("shop")
        let signer = TestJWT()

        init(flushTimeout: Duration = .seconds(2)) throws {
            loop = try TestLoop()
            directory = try TemporaryDirectory(prefix: "authd-service")
            let key = try StoreKey(material: Array(repeating: 7, count: 32))
            store = try TokenStore(directory: directory.appending("state"), key: key, logger: Logger(label: "test"))
            service = AuthService(
                store: store,
                records: [],
                flushTimeout: flushTimeout,
                clock: clock,
                storeWriters: StoreWriters.shared, executor: loop.executor, logger: Logger(label: "test")
            )
        }

        deinit {
            loop.stop()
            directory.remove()
        }

        var now: Date { clock.now }
        func advance(_ seconds: TimeInterval) { clock.advance(by: seconds) }
        func token(expiringIn seconds: TimeInterval, ids: [String: String] = ["registered": "alice"]) -> String {
            signer.token(expiringIn: seconds, from: now, ids: ids)
        }
    }

    /// Collects a stream's events in the background; a test waits for them on a barrier, never by sleeping.
    final class Collector: Sendable {
        let arrivals = Arrivals<AuthEvent>()
        let task: Task<Void, Never>

        init(_ stream: AsyncStream<AuthEvent>) {
            let arrivals = self.arrivals
            // The state every subscription starts with is left out: these tests look at what happens next.
            task = Task {
                for await event in stream where event.kind != .state { arrivals.append(event) }
            }
        }

        var all: [AuthEvent] { arrivals.all }
        var kinds: [AuthEvent.Kind] { all.map(\.kind) }

        /// Waits until `count` events arrived (bounded).
        func waitFor(count: Int) async -> Bool { await arrivals.waitFor(count: count) }

        deinit { task.cancel() }
    }

    @Test func setTokenStoresItAndTellsEveryAppEvenWhenItHasExpired() async throws {
        let fixture = try Fixture()
        let events = Collector(await fixture.service.subscribe(fixture.shop, pid: 1)!)
        let expired = fixture.token(expiringIn: -10)

        let (generation, jwt) = try await fixture.service.setToken(expired, for: fixture.shop)

        #expect(generation == 1)
        #expect(jwt.compact == expired)
        #expect(try fixture.store.load(fixture.shop)?.token?.compact == expired)
        #expect(await events.waitFor(count: 2))
        #expect(
            events.all == [
                AuthEvent(kind: .tokenRefreshed, group: "shop", generation: 1),
                // The expiry timer finds it expired at once (R13); with nobody identified, the handler is
                // asked for the customer the token names.
                AuthEvent(
                    kind: .jwtError, group: "shop", generation: 1, reason: .expired,
                    customerIds: ["registered": "alice"]),
            ]
        )
        let (current, currentGeneration) = await fixture.service.token(for: fixture.shop)
        #expect(current?.compact == expired && currentGeneration == 1)
    }

    @Test func aMalformedTokenIsRefusedAndNothingChanges() async throws {
        let fixture = try Fixture()
        _ = try await fixture.service.setToken(fixture.token(expiringIn: 3600), for: fixture.shop)
        await #expect {
            try await fixture.service.setToken("a.b", for: fixture.shop)
        } throws: { error in
            guard case .malformedToken(.notThreeParts(found: 2))? = error as? AuthServiceError else { return false }
            return true
        }
        #expect(await fixture.service.token(for: fixture.shop).generation == 1)
    }

    @Test func aStoreFailureKeepsThePreviousToken() async throws {
        let fixture = try Fixture()
        let first = fixture.token(expiringIn: 3600)
        _ = try await fixture.service.setToken(first, for: fixture.shop)
        try FileManager.default.removeItem(atPath: fixture.directory.appending("state"))

        await #expect {
            try await fixture.service.setToken(fixture.token(expiringIn: 7200), for: fixture.shop)
        } throws: { error in
            guard case .storeFailure? = error as? AuthServiceError else { return false }
            return true
        }
        let (token, generation) = await fixture.service.token(for: fixture.shop)
        #expect(token?.compact == first && generation == 1)
    }

    @Test func preflightReportsEachStateAndSendsOneJwtErrorPerWindow() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let events = Collector(await service.subscribe(fixture.shop, pid: 1)!)

        let none = await service.preflight(fixture.shop)
        #expect(none.state == .notProvided && none.reason == .notProvided && none.token == nil)
        _ = await service.preflight(fixture.shop)  // within the window: no second event

        _ = try await service.identifyCustomer(
            fixture.shop, customerIds: ["registered": "bob"], token: fixture.token(expiringIn: 30))
        let soon = await service.preflight(fixture.shop)
        #expect(soon.state == .expiredSoon && soon.reason == .expiredSoon && soon.token != nil)

        fixture.advance(31)
        let expired = await service.preflight(fixture.shop)
        #expect(expired.state == .expired && expired.reason == .expired)
        #expect(expired.token != nil)  // R16: the expired token is still sent

        fixture.advance(10)
        _ = await service.preflight(fixture.shop)  // a new window: the same reason again

        #expect(await events.waitFor(count: 5))
        let errors = events.all.filter { $0.kind == .jwtError }
        #expect(errors.map(\.reason) == [.notProvided, .expiredSoon, .expired, .expired])
        #expect(errors.last?.customerIds == ["registered": "bob"])

        _ = try await service.setToken(fixture.token(expiringIn: 3600), for: fixture.shop)
        let valid = await service.preflight(fixture.shop)
        #expect(valid.state == .valid && valid.reason == nil)
    }

    @Test func authFailuresFollowTheRetryRules() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let first = fixture.token(expiringIn: 3600)
        _ = try await service.setToken(first, for: fixture.shop)
        _ = try await service.setToken(first, for: fixture.shop)
        // The same token again (generation 2) replaced nothing: a 401 with it calls the handler (R19).
        let same = await service.reportAuthFailure(
            fixture.shop, status: 401, sentGeneration: 1, serverSaysExpired: false)
        #expect(same == RetryDecision(retry: true, reason: .invalid))
        _ = try await service.setToken(fixture.token(expiringIn: 3600, ids: ["registered": "bob"]), for: fixture.shop)

        // The request carried generation 1, but another token is current: retry at once, no handler.
        let replaced = await service.reportAuthFailure(
            fixture.shop, status: 401, sentGeneration: 1, serverSaysExpired: false)
        #expect(replaced == RetryDecision(retry: true, reason: nil))
        let invalid = await service.reportAuthFailure(
            fixture.shop, status: 401, sentGeneration: 3, serverSaysExpired: false)
        #expect(invalid == RetryDecision(retry: true, reason: .invalid))
        let expired = await service.reportAuthFailure(
            fixture.shop, status: 401, sentGeneration: 3, serverSaysExpired: true)
        #expect(expired == RetryDecision(retry: true, reason: .expired))
        let scope = await service.reportAuthFailure(
            fixture.shop, status: 403, sentGeneration: 3, serverSaysExpired: false)
        #expect(scope == RetryDecision(retry: false, reason: nil))
        // A request without a token, while there is one now: it was set since, so retry at once with it.
        let setSince = await service.reportAuthFailure(
            fixture.shop, status: 403, sentGeneration: nil, serverSaysExpired: false)
        #expect(setSince == RetryDecision(retry: true, reason: nil))
        let news = try AppGroup("news")
        let none = await service.reportAuthFailure(news, status: 403, sentGeneration: nil, serverSaysExpired: false)
        #expect(none == RetryDecision(retry: true, reason: .notProvided))
    }

    @Test func waitForTokenEndsAsSoonAsANewerTokenIsSet() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let token = fixture.token(expiringIn: 3600)

        let waiting = Task { await service.waitForToken(fixture.shop, after: 0, timeout: .seconds(60)) }
        #expect(await fixture.clock.waitForTimers(armed: 1))  // a barrier: the call waits, its bound armed
        _ = try await service.setToken(token, for: fixture.shop)
        let (jwt, generation) = await waiting.value
        #expect(jwt?.compact == token && generation == 1)
        #expect(fixture.clock.now == Date(timeIntervalSince1970: 1_900_000_000))  // the bound never came

        // Already newer: at once, with no timer.
        #expect(await service.waitForToken(fixture.shop, after: 0, timeout: .seconds(5)).1 == 1)
        #expect(fixture.clock.armedCount == 1)

        // Nothing newer: when the bound passes, with the current generation.
        let bounded = Task { await service.waitForToken(fixture.shop, after: 1, timeout: .milliseconds(100)) }
        #expect(await fixture.clock.waitForTimers(armed: 2))
        await fixture.clock.advance(by: 0.1, firing: true)
        #expect(await bounded.value.1 == 1)
    }

    /// The same token stored again is no new token (R19, R22): a waiter keeps waiting until its bound.
    @Test func waitForTokenIsNotEndedByTheSameTokenStoredAgain() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let token = fixture.token(expiringIn: 3600)
        _ = try await service.setToken(token, for: fixture.shop)
        let waiting = Task { await service.waitForToken(fixture.shop, after: 1, timeout: .seconds(3)) }
        #expect(await fixture.clock.waitForTimers(armed: 1))
        _ = try await service.setToken(token, for: fixture.shop)
        await fixture.clock.advance(by: 3, firing: true)
        let (jwt, generation) = await waiting.value
        #expect(jwt?.compact == token && generation == 2)
    }

    @Test func identifyWithoutATokenClearsTheTokenAndKeepsTheIds() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let generation = try await service.identifyCustomer(
            fixture.shop,
            customerIds: ["registered": "carol"],
            token: fixture.token(expiringIn: 3600)
        )
        #expect(generation == 1)
        #expect(try await service.identifyCustomer(fixture.shop, customerIds: ["registered": "dave"], token: nil) == 2)
        #expect(await service.token(for: fixture.shop).token == nil)
        let record = try fixture.store.load(fixture.shop)
        #expect(record?.token == nil && record?.customerIds == ["registered": "dave"])
    }

    /// Store writes run off the actor, so calls overlap them; one group's writes still happen one at a time.
    @Test func concurrentWritesOfOneGroupTakeOneGenerationEachAndTheLastIsStored() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let tokens = (0..<40).map { fixture.token(expiringIn: 3600 + Double($0)) }
        _ = try await service.identifyCustomer(fixture.shop, customerIds: ["registered": "gina"], token: nil)
        let generations = try await withThrowingTaskGroup(of: (UInt64, String).self) { group in
            for token in tokens {
                group.addTask { (try await service.setToken(token, for: fixture.shop).0, token) }
            }
            return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
        }
        #expect(generations.keys.sorted() == Array(2...41))
        let record = try #require(try fixture.store.load(fixture.shop))
        #expect(record.generation == 41 && record.token?.compact == generations[41])
        #expect(record.customerIds == ["registered": "gina"])  // each set kept the identity
        #expect(await service.token(for: fixture.shop).token?.compact == generations[41])
    }

    @Test func writesOfManyGroupsAllLand() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let groups = try (0..<32).map { try AppGroup("group-\($0)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for name in groups {
                group.addTask {
                    for round in 0..<5 {
                        _ = try await service.setToken(fixture.token(expiringIn: 60 + Double(round)), for: name)
                    }
                }
            }
            try await group.waitForAll()
        }
        for name in groups {
            #expect(try fixture.store.load(name)?.generation == 5)
            #expect(await service.token(for: name).generation == 5)
        }
    }

    @Test func onlyOneOfManyConcurrentClaimsIsGrantedUntilTheLeaseLapses() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        _ = try await service.setToken(fixture.token(expiringIn: 30), for: fixture.shop)
        let grants = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 { group.addTask { await service.claimRefresh(fixture.shop, generation: 1) } }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(grants == 1)
        fixture.advance(service.refreshLease + 1)
        #expect(await service.claimRefresh(fixture.shop, generation: 1))
        _ = try await service.setToken(fixture.token(expiringIn: 3600), for: fixture.shop)
        #expect(!(await service.claimRefresh(fixture.shop, generation: 1)))  // already refreshed
        #expect(await service.claimRefresh(fixture.shop, generation: 2))
    }

    @Test func clearWaitsForEveryAppsFlushThenRemovesTokenAndIdentity() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        _ = try await service.identifyCustomer(
            fixture.shop, customerIds: ["registered": "erin"], token: fixture.token(expiringIn: 3600))
        let first = Collector(await service.subscribe(fixture.shop, pid: 101)!)
        let second = Collector(await service.subscribe(fixture.shop, pid: 101)!)

        let clearing = Task { try await service.clear(fixture.shop, cause: .anonymize) }
        #expect(await first.waitFor(count: 1))
        #expect(await second.waitFor(count: 1))
        let firstId = try #require(first.all.first?.flushId)
        let secondId = try #require(second.all.first?.flushId)
        #expect(first.kinds == [.flushRequested])
        #expect(firstId != secondId)  // one per subscription, even of one process
        await service.acknowledgeFlush(fixture.shop, flushId: firstId)
        await service.acknowledgeFlush(fixture.shop, flushId: firstId)  // twice counts once
        await service.acknowledgeFlush(fixture.shop, flushId: "not-a-flush")
        #expect(try fixture.store.load(fixture.shop) != nil)  // still waiting for the second
        await service.acknowledgeFlush(fixture.shop, flushId: secondId)
        #expect(try await clearing.value == ClearResult(asked: 2, unconfirmed: []))

        #expect(try fixture.store.load(fixture.shop) == nil)
        #expect(await service.token(for: fixture.shop).token == nil)
        #expect(await first.waitFor(count: 2))
        let cleared = try #require(first.all.last)
        #expect(cleared.kind == .cleared && cleared.cause == "anonymize" && cleared.generation == 2)
    }

    @Test func anonymizeCompletesAfterTheBoundWhenAnAppNeverAcknowledgesAndSaysSo() async throws {
        let fixture = try Fixture(flushTimeout: .milliseconds(200))
        let service = fixture.service
        _ = try await service.setToken(fixture.token(expiringIn: 3600), for: fixture.shop)
        let silent = Collector(await service.subscribe(fixture.shop, pid: 7)!)
        let clearing = Task { try await service.clear(fixture.shop, cause: .anonymize) }
        #expect(await silent.waitFor(count: 1))  // asked to flush
        #expect(await fixture.clock.waitForTimers(armed: 1))  // the bound runs
        #expect(try fixture.store.load(fixture.shop) != nil)  // and nothing is cleared before it
        await fixture.clock.advance(by: 0.2, firing: true)
        let result = try await clearing.value
        #expect(result == ClearResult(asked: 1, unconfirmed: [UnconfirmedFlush(pid: 7, reason: .timedOut)]))
        #expect(try fixture.store.load(fixture.shop) == nil)
        #expect(await silent.waitFor(count: 2))
        #expect(silent.kinds == [.flushRequested, .cleared])
    }

    /// R28: a claim whose lease runs out ends, and the group's pending jwtError goes out again, so that another
    /// app refreshes; a renewed claim holds on.
    @Test func aLapsedLeaseEndsTheClaimAndSendsTheJwtErrorAgain() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        let events = Collector(await service.subscribe(fixture.shop, pid: 1)!)
        _ = try await service.setToken(fixture.token(expiringIn: 30), for: fixture.shop)
        #expect(await events.waitFor(count: 2))  // tokenRefreshed, then expiredSoon at once (R13)
        #expect(await service.claimRefresh(fixture.shop, generation: 1, holder: 9, lease: 5))
        #expect(await fixture.clock.waitForTimers(armed: 1))

        // Renewed within the lease: the timer finds it renewed and waits again.
        fixture.advance(4)
        #expect(await service.claimRefresh(fixture.shop, generation: 1, holder: 9, renew: true, lease: 5))
        await fixture.clock.advance(by: 1, firing: true)
        #expect(!(await service.claimRefresh(fixture.shop, generation: 1, holder: 8)))
        #expect(fixture.clock.pendingCount == 1)

        await fixture.clock.advance(by: 4, firing: true)
        #expect(await events.waitFor(count: 3))
        #expect(events.all.last?.kind == .jwtError && events.all.last?.reason == .expiredSoon)
        #expect(await service.claimRefresh(fixture.shop, generation: 1, holder: 8))
    }

    /// R9: clearLocalCustomerData is the wipe: no flush is asked for, nothing is waited for.
    @Test func clearLocalCustomerDataDoesNotFlush() async throws {
        let fixture = try Fixture(flushTimeout: .seconds(600))
        let service = fixture.service
        _ = try await service.setToken(fixture.token(expiringIn: 3600), for: fixture.shop)
        let silent = Collector(await service.subscribe(fixture.shop, pid: 7)!)
        let result = try await service.clear(fixture.shop, cause: .clearLocalCustomerData)
        #expect(result == ClearResult(asked: 0, unconfirmed: []))
        #expect(try fixture.store.load(fixture.shop) == nil)
        #expect(await silent.waitFor(count: 1))
        #expect(silent.kinds == [.cleared])
        #expect(silent.all.first?.cause == "clearLocalCustomerData")
    }

    @Test func clearWithoutSubscribersIsImmediateAndSummariesFollow() async throws {
        let fixture = try Fixture()
        let service = fixture.service
        _ = try await service.setToken(fixture.token(expiringIn: 3600), for: fixture.shop)
        #expect(await service.summaries().map(\.hasToken) == [true])
        try await service.clear(fixture.shop, cause: .stopIntegration)
        let summary = try #require(await service.summaries().first)
        #expect(summary.name == "shop" && !summary.hasToken && summary.state == .notProvided && summary.generation == 2)
    }
}

/// A value behind a lock, shareable between tasks and closures.
final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

@Suite("Bounded subscriptions")
struct SubscriptionBoundTests {
    @Test func aGroupTakesNoMoreThanItsBound() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-bound")
        defer { directory.remove() }
        let store = try TokenStore(
            directory: directory.appending("state"),
            key: StoreKey(material: Array(repeating: 9, count: 32)),
            logger: Logger(label: "test")
        )
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: store, records: [], maximumSubscribersPerGroup: 2, clock: SystemClock(executor: loop.executor),
            storeWriters: StoreWriters.shared, executor: loop.executor, logger: Logger(label: "test"))
        let shop = try AppGroup("shop")
        let first = await service.subscribe(shop, pid: 1)
        let second = await service.subscribe(shop, pid: 2)
        #expect(first != nil && second != nil)
        #expect(await service.subscribe(shop, pid: 3) == nil)
        #expect(await service.subscribe(try AppGroup("news"), pid: 3) != nil)  // per group

        let dispatcher = AuthCallDispatcher(
            service: service, access: AccessControl(owner: 0), logger: Logger(label: "t"))
        let reply = Locked<[UInt8]>([])
        try await dispatcher.handle(
            try VarlinkCall(
                decoding: Array(
                    #"{"method":"com.exponea.Auth.Subscribe","more":true,"parameters":{"group":"shop"}}"#.utf8)
            ),
            from: Caller(pid: 4, uid: 0, gid: 0), on: loop
        ) { bytes in reply.withLock { $0 = bytes } }
        #expect(
            String(decoding: reply.withLock { $0 }.dropLast(), as: UTF8.self)
                == #"{"error":"com.exponea.Auth.TooManySubscribers","parameters":{"group":"shop"}}"#
        )
        _ = (first, second)
    }
}
