// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import Logging
import Synchronization
import Systemd

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The app groups' tokens and what happens to them: the semantics of every `com.exponea.Auth` method,
/// independent of the transport that carries the calls.
///
/// An actor over plain values, each with one job and tested on its own:
/// - ``GroupTable``: tokens, identities, generations, refresh claims, the jwtError window (the R-rules);
/// - ``SubscriptionHub``: who hears a group's events;
/// - ``FlushCoordinator``: the flush handshake before a clear;
/// - ``WriteQueue``: one group's writes one at a time, in order;
/// - ``WaitList``: WaitForToken calls;
/// - `ExpiryScheduler`: the expiry deadlines (R13, R14).
///
/// The actor owns them, so a group's generation, events and waiters always agree; it does the I/O (the store,
/// through the injected ``StoreWriterPool``), arms timers on the injected ``ServiceClock``, and resumes
/// continuations.
///
/// Store writes happen before memory changes (a failed write leaves the group as it was) and run off the actor:
/// one group's writes one at a time, in order, other groups' writes and every other call meanwhile.
///
/// Its methods are in a file per area: this one (the tokens, and the commit every change goes through),
/// `AuthService+Expiry.swift`, `+RefreshClaims`, `+Clearing` and `+Events` (subscriptions, observers, metrics).
///
/// The actor runs on the daemon's loop: its executor is the loop's ``LoopExecutor``, so its turns, the tasks it
/// starts and the loop's sources share one thread, and the loop's callbacks enter it with ``onLoop(_:)``.
public actor AuthService {
    /// How long a refresh claim holds, unless renewed, when its holder neither sets a token, releases it, nor
    /// closes its connection: the bound for a claimant that is alive but hung. When it ends, the group's
    /// pending jwtError is sent again so that another app refreshes (R28).
    public nonisolated let refreshLease: TimeInterval
    /// The default ``refreshLease``: a token fetch is a backend round trip, well under it, and a backend slow
    /// by nature renews; a request waiting for a token (R19's second, R22) fails for at most this long
    /// behind a hung claimant. A claimant that exits or crashes is replaced at once, lease or not.
    public static let defaultRefreshLease: TimeInterval = 5
    /// The window in which the same jwtError (group, reason, generation) is sent only once.
    public nonisolated let jwtErrorWindow: TimeInterval
    /// How long a clear waits for the group's apps to acknowledge the flush (R8).
    public nonisolated let flushTimeout: Duration
    /// Subscriptions one group may have at once.
    public nonisolated let maximumSubscribersPerGroup: Int

    /// The loop the actor runs on.
    public nonisolated let executor: LoopExecutor
    let store: TokenStore
    let storeWriters: any StoreWriterPool
    let clock: any ServiceClock
    let logger: Logger
    /// The wall-clock timer armed for the earliest expiry deadline, when the daemon runs one.
    let timer: WallClockTimer?

    var table: GroupTable
    var hub: SubscriptionHub
    var flushes = FlushCoordinator<CheckedContinuation<ClearResult, Never>>()
    var writes = WriteQueue<CheckedContinuation<Void, Never>>()
    var waiters = WaitList<TokenWaiter>()
    /// The timers of the refresh claims' leases, by group, with the claim each is for.
    var leaseTimers: [AppGroup: (claim: UInt64, timer: ServiceTimer)] = [:]
    /// The timers bounding the flushes that clears wait for, by group.
    var flushTimers: [AppGroup: ServiceTimer] = [:]
    /// The groups' expiry deadlines (R13, R14).
    var expiry = ExpiryScheduler()
    /// What the metrics count of the groups and the store.
    var metrics = ServiceMetrics()
    /// Events the deadlines of the loaded tokens call for, sent by ``start()``.
    var startupEvents: [ExpiryEvent] = []
    /// GetToken's encoded replies, once per generation.
    var getTokenReplies = GetTokenReplies()
    /// Who is told when ``groupCounts()`` may have changed (the daemon's STATUS line).
    var countObservers: [UInt64: @Sendable () -> Void] = [:]
    /// Holds the "wall clock changed" notice to one line per interval: a clock set in a loop (a broken NTP
    /// client, a test rig) would otherwise write a journal line per step. Every step is still handled.
    var clockChangeLog = LogThrottle(now: { ContinuousClock.now })
    var lastID: UInt64 = 0

    /// Creates the service over an opened store, with its records loaded.
    ///
    /// - Parameters:
    ///   - records: The records loaded from `store` at start.
    ///   - clock: The wall clock the rules read and the timers they arm (a manual one in tests).
    ///   - storeWriters: Where the blocking store writes run.
    ///   - executor: The loop the actor runs on.
    ///   - timer: The wall-clock timer for the expiry deadlines, when the daemon runs one.
    public init(
        store: TokenStore,
        records: [TokenRecord],
        refreshLease: TimeInterval = AuthService.defaultRefreshLease,
        jwtErrorWindow: TimeInterval = 2,
        flushTimeout: Duration = .seconds(2),
        maximumSubscribersPerGroup: Int = 1024,
        clock: any ServiceClock,
        storeWriters: any StoreWriterPool,
        executor: LoopExecutor,
        timer: WallClockTimer? = nil,
        logger: Logger
    ) {
        self.executor = executor
        self.store = store
        self.storeWriters = storeWriters
        self.clock = clock
        self.timer = timer
        self.refreshLease = refreshLease
        self.jwtErrorWindow = jwtErrorWindow
        self.flushTimeout = flushTimeout
        self.maximumSubscribersPerGroup = maximumSubscribersPerGroup
        self.logger = logger
        table = GroupTable(records: records, jwtErrorWindow: jwtErrorWindow)
        hub = SubscriptionHub(maximumPerGroup: maximumSubscribersPerGroup)
        let now = clock.now
        expiry.reserveCapacity(records.count)
        for record in records {
            startupEvents += expiry.set(record.group, expiresAt: record.token?.expiresAt, now: now)
        }
    }

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Runs `body` in the actor's isolation, synchronously, from a callback of its loop; traps on another thread
    /// (``LoopExecutor/enter(_:_:)``: `assumeIsolated` with the loop's own thread test, which GetToken, the hottest
    /// call, would otherwise pay the runtime's executor lookup for). The hottest path enters through
    /// ``getTokenReplyOnLoop(for:encode:)``, whose function captures nothing.
    public nonisolated func onLoop<T>(_ body: (isolated AuthService) throws -> T) rethrows -> T {
        try executor.enter(self, body)
    }

    /// ``getTokenReply(for:encode:)`` from a callback of the loop, as ``onLoop(_:)`` would run it, without the
    /// closure context onLoop's closure needs on each call (GetToken is the hottest call): a function that
    /// captures nothing, cast as onLoop casts.
    nonisolated func getTokenReplyOnLoop(
        for group: AppGroup, encode: (StreamJWT?, UInt64) throws -> [UInt8]
    ) throws -> [UInt8] {
        executor.checkIsolated()
        typealias Encode = (StreamJWT?, UInt64) throws -> [UInt8]
        typealias Isolated = (isolated AuthService, AppGroup, Encode) throws -> [UInt8]
        typealias Plain = (AuthService, AppGroup, Encode) throws -> [UInt8]
        let read: Isolated = { try $0.getTokenReply(for: $1, encode: $2) }
        return try unsafeBitCast(read, to: Plain.self)(self, group, encode)
    }

    // MARK: Tokens

    /// Stores `token` for `group` and sends `tokenRefreshed` to its apps, even when the token has already
    /// expired (R4, R6).
    public func setToken(_ token: String, for group: AppGroup) async throws(AuthServiceError) -> (UInt64, StreamJWT) {
        let jwt: StreamJWT
        do {
            jwt = try StreamJWT(parsing: token)
        } catch {
            throw .malformedToken(error)
        }
        return (try await setToken(jwt, for: group), jwt)
    }

    /// Stores a parsed token for `group`, as ``setToken(_:for:)-(String,_)`` does: the generation it was stored at.
    public func setToken(_ jwt: StreamJWT, for group: AppGroup) async throws(AuthServiceError) -> UInt64 {
        try await commit(group, token: jwt, customerIds: nil)
    }

    /// The group's token and generation, with no side effects.
    public func token(for group: AppGroup) -> (token: StreamJWT?, generation: UInt64) {
        let state = table[group]
        return (state?.token, state?.generation ?? 0)
    }

    /// GetToken's encoded reply for `group`'s token and generation: `encode` runs only on the first read after a
    /// change. On the loop, a callback reads it in its own turn (``onLoop(_:)``).
    func getTokenReply(
        for group: AppGroup, encode: (StreamJWT?, UInt64) throws -> [UInt8]
    ) rethrows -> [UInt8] {
        if let kept = getTokenReplies[group] { return kept }
        guard let state = table[group] else { return try encode(nil, 0) }  // a group never set: nothing to keep
        let reply = try encode(state.token, state.generation)
        getTokenReplies.keep(reply, for: group)
        return reply
    }

    /// The check before a stream request (R15-R17): the token to send (even an expired one, R16) and its
    /// state; when the state calls for the handler, the group's apps get a `jwtError` event.
    public func preflight(_ group: AppGroup) -> PreflightResult {
        let (result, event) = table.preflight(group, now: clock.now)
        sendJwtError(event, to: group)
        return result
    }

    /// Decides about a failed stream request (R19-R21). A request that carried another token than the
    /// current one (set at a later generation, and not the same token stored again) is retried at once, with
    /// no handler; otherwise the group's apps get a `jwtError` event when the decision has a reason.
    public func reportAuthFailure(
        _ group: AppGroup,
        status: Int,
        sentGeneration: UInt64?,
        serverSaysExpired: Bool
    ) -> RetryDecision {
        let (decision, event) = table.reportAuthFailure(
            group, status: status, sentGeneration: sentGeneration, serverSaysExpired: serverSaysExpired,
            now: clock.now)
        sendJwtError(event, to: group)
        return decision
    }

    /// Returns as soon as another token than the one current at generation `after` is set (or the group is
    /// cleared), or when `timeout` has passed (R18, R22), with the token then current. The same token stored
    /// again does not end the wait.
    public func waitForToken(_ group: AppGroup, after: UInt64, timeout: Duration) async -> (StreamJWT?, UInt64) {
        if table.tokenSince(group) <= after && timeout > .zero {
            let id = makeID()
            if table.add(group) { countsMayHaveChanged() }
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    let bound = clock.schedule(after: timeout) { [weak self] in await self?.endWait(group, id) }
                    waiters.add(group, id: id, TokenWaiter(continuation: continuation, bound: bound))
                }
            } onCancel: { [executor] in
                // Called where the cancel happens (the loop, when the caller's connection closes).
                Task(executorPreference: executor) { [weak self] in await self?.endWait(group, id) }
            }
        }
        let state = table[group]
        return (state?.token, state?.generation ?? 0)
    }

    func endWait(_ group: AppGroup, _ id: UInt64) {
        waiters.remove(group, id: id)?.resume()
    }

    /// Stores the customer ids, and the token when given; without a token the stored one is cleared (R7).
    public func identifyCustomer(_ group: AppGroup, customerIds: [String: String], token: String?)
        async throws(AuthServiceError) -> UInt64
    {
        var jwt: StreamJWT?
        if let token {
            do {
                jwt = try StreamJWT(parsing: token)
            } catch {
                throw .malformedToken(error)
            }
        }
        return try await commit(group, token: jwt, customerIds: customerIds)
    }

    // MARK: Internals

    /// Stores the group's new token and identity (nil keeps the identity), then changes the group in memory and
    /// tells its apps. The write runs off the actor, alone among the group's writes; other groups' writes, and
    /// every other call, go on meanwhile.
    func commit(_ group: AppGroup, token: StreamJWT?, customerIds: [String: String]?)
        async throws(AuthServiceError) -> UInt64
    {
        try await writingAlone(group) { () async throws(AuthServiceError) in
            // Read the group inside its turn: the write before may have changed it.
            let record = table.record(group, token: token, customerIds: customerIds, now: clock.now)
            let started = ContinuousClock.now
            do throws(TokenStoreError) {
                try await storeWriters.run(isolation: self) { [store] () throws(TokenStoreError) in
                    try store.save(record)
                }
                metrics.storeWritten(taking: started.duration(to: .now), failed: false)
            } catch {
                metrics.storeWritten(taking: started.duration(to: .now), failed: true)
                logger.error(
                    "Cannot store the token", metadata: ["authd.group": "\(group)", "authd.error": "\(error)"])
                throw .storeFailure(error)
            }
            // The actor may have run other calls during the write, but none wrote this group.
            let countsBefore = groupCounts()
            let committed = table.commit(record)
            getTokenReplies.changed(group)
            if committed.endedClaim != nil { leaseEnded(group) }
            if token != nil { metrics.tokenSet(group, at: .now) }
            if groupCounts() != countsBefore { countsMayHaveChanged() }
            // The operator's "Token set", with who set it, is the dispatcher's.
            logger.debug(
                "Committed",
                metadata: [
                    "authd.group": "\(group)", "authd.generation": "\(record.generation)",
                    "authd.state": "\(TokenState(token, at: record.changedAt))",
                ]
            )
            if let event = committed.event { send(event, to: group) }
            // Waiters wait for another token (R19, R22): the same one stored again wakes none.
            if committed.replaced { for waiter in waiters.removeAll(group) { waiter.resume() } }
            deliver(expiry.set(group, expiresAt: token?.expiresAt, now: record.changedAt))
            return record.generation
        }
    }

    /// Runs `body`, which writes the group's record, once no other write of the group runs: one group's writes
    /// happen one at a time, in the order they were asked for.
    func writingAlone<T>(_ group: AppGroup, _ body: () async throws(AuthServiceError) -> T)
        async throws(AuthServiceError) -> T
    {
        if !writes.enter(group) {
            // The write before hands its turn over.
            await withCheckedContinuation { writes.wait(group, $0) }
        }
        defer { writes.leave(group)?.resume() }
        return try await body()
    }

    /// Sends a jwtError the table decided on to the group's apps, and logs it.
    func sendJwtError(_ event: AuthEvent?, to group: AppGroup) {
        guard let event else { return }
        if let reason = event.reason { metrics.refreshAsked(group, reason: reason, at: .now) }
        logger.notice(
            "JWT error: the group's apps are asked for a new token",
            metadata: OperatorEvent.refreshAsked.metadata(
                group: group.name, generation: event.generation, reason: event.reason.map { "\($0)" }
            ) { .string($0) })
        send(event, to: group)
    }

    func send(_ event: AuthEvent, to group: AppGroup) {
        for ended in hub.send(event, to: group) { subscriptionEnded(ended) }
    }

    func makeID() -> UInt64 {
        lastID += 1
        return lastID
    }
}

/// A WaitForToken call waiting for another token, with the timer that bounds its wait: whichever ends the wait
/// first, the other goes with it.
struct TokenWaiter {
    var continuation: CheckedContinuation<Void, Never>
    var bound: ServiceTimer

    func resume() {
        bound.cancel()
        continuation.resume()
    }
}
