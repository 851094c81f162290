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
/// A thin actor over plain values, each with one job and tested on its own:
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
    /// Events a subscriber may have unread before it is dropped.
    static let subscriberBuffer = 256

    /// The loop the actor runs on.
    public nonisolated let executor: LoopExecutor
    private let store: TokenStore
    private let storeWriters: any StoreWriterPool
    private let clock: any ServiceClock
    private let logger: Logger
    /// The wall-clock timer armed for the earliest expiry deadline, when the daemon runs one.
    private let timer: WallClockTimer?

    private var table: GroupTable
    private var hub: SubscriptionHub
    private var flushes = FlushCoordinator<CheckedContinuation<ClearResult, Never>>()
    private var writes = WriteQueue<CheckedContinuation<Void, Never>>()
    private var waiters = WaitList<TokenWaiter>()
    /// The timers of the refresh claims' leases, by group, with the claim each is for.
    private var leaseTimers: [AppGroup: (claim: UInt64, timer: ServiceTimer)] = [:]
    /// The timers bounding the flushes that clears wait for, by group.
    private var flushTimers: [AppGroup: ServiceTimer] = [:]
    /// The groups' expiry deadlines (R13, R14).
    private(set) var expiry = ExpiryScheduler()
    /// What the metrics count of the groups and the store.
    private var metrics = ServiceMetrics()
    /// Events the deadlines of the loaded tokens call for, sent by ``start()``.
    private var startupEvents: [ExpiryEvent] = []
    /// GetToken's encoded replies, once per generation.
    private var getTokenReplies = GetTokenReplies()
    /// Who is told when ``groupCounts()`` may have changed (the daemon's STATUS line).
    private var countObservers: [UInt64: @Sendable () -> Void] = [:]
    private var lastID: UInt64 = 0

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
        for group: AppGroup, encode: @escaping (StreamJWT?, UInt64) throws -> [UInt8]
    ) throws -> [UInt8] {
        executor.checkIsolated()
        typealias Encode = (StreamJWT?, UInt64) throws -> [UInt8]
        typealias Isolated = (isolated AuthService, AppGroup, Encode) throws -> [UInt8]
        typealias Plain = (AuthService, AppGroup, Encode) throws -> [UInt8]
        let read: Isolated = { try $0.getTokenReply(for: $1, encode: $2) }
        return try unsafeBitCast(read, to: Plain.self)(self, group, encode)
    }

    // MARK: Expiry

    /// Sends what the loaded tokens' deadlines call for (a token that entered its last minute, or expired,
    /// while the daemon was down fires at once, R13) and arms the timer. Call once observers are attached.
    public func start() {
        let events = startupEvents
        startupEvents = []
        deliver(events, atStart: true)
    }

    /// The expiry timer's descriptor, for the loop to watch (``ExpiryTimerSource``); nil when the service has no
    /// timer.
    public var expiryTimerDescriptor: Int32? { timer?.fileDescriptor }

    /// The expiry timer's descriptor is readable: the timer fired, or the wall clock was set.
    ///
    /// - Throws: ``WallClockTimerError`` when the timer cannot be read or re-armed.
    public func expiryTimerReadable() throws(WallClockTimerError) {
        switch try timer?.readEvent() {
        case .fired?: expiryTimerFired()
        case .clockChanged?: wallClockChanged()
        case nil: break
        }
    }

    /// The wall-clock timer fired: sends the events that are due and re-arms.
    public func expiryTimerFired() {
        deliver(expiry.fireDue(now: clock.now))
    }

    /// The wall clock was set: re-evaluates every deadline against the new time and re-arms (R14).
    public func wallClockChanged() {
        logger.notice("The wall clock changed; re-checking every token's expiry")
        deliver(expiry.clockChanged(now: clock.now))
    }

    /// Sends the events' jwtErrors and re-arms the timer. A token that expires while the daemon runs is an
    /// operator's event, logged; one found expired at start is not logged twice: its jwtError line (reason
    /// `expired`) says it, and the metrics count it.
    private func deliver(_ events: [ExpiryEvent], atStart: Bool = false) {
        let now = clock.now
        for event in events {
            if event.reason == .expired {
                metrics.expiryReached(event.group)
                if !atStart {
                    logger.warning(
                        "Token expired and no new token was set",
                        metadata: OperatorEvent.expiredUnrefreshed.metadata(
                            group: event.group.name, generation: table[event.group]?.generation
                        ) { .string($0) })
                }
            }
            sendJwtError(table.jwtError(event.group, reason: event.reason, now: now), to: event.group)
        }
        guard let timer else { return }
        do {
            try timer.arm(at: expiry.nextDeadline)
        } catch {
            logger.error("Cannot arm the expiry timer", metadata: ["authd.error": "\(error)"])
        }
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

    private func endWait(_ group: AppGroup, _ id: UInt64) {
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

    // MARK: Refresh claims (R28)

    /// Grants the group's refresh of `generation` to the first caller (R28). The claim ends when a token is
    /// set, when the holder releases it or its connection closes, or after ``refreshLease`` seconds; the last
    /// two send the group's pending jwtError again, so that another app takes over. A generation older than
    /// the current one has already been refreshed and is not granted.
    ///
    /// - Parameters:
    ///   - holder: The connection that asks (see ``connectionClosed(_:)``); nil for a caller without one.
    ///   - renew: The holder extends its claim by another lease, for a fetch that takes long. A claim held by
    ///     someone else is still refused; a free one is granted.
    ///   - lease: The group's own lease (authd.conf), instead of ``refreshLease``.
    public func claimRefresh(
        _ group: AppGroup, generation: UInt64, holder: UInt64? = nil, renew: Bool = false, lease: TimeInterval? = nil
    ) -> Bool {
        let outcome = table.claimRefresh(
            group, generation: generation, holder: holder, renew: renew, lease: lease ?? refreshLease,
            now: clock.now)
        switch outcome {
        case .refused: return false
        case .renewed: return true
        case .granted(let id, let lease):
            metrics.claim(group, .granted)
            armLease(of: group, claim: id, after: lease)
            return true
        }
    }

    /// The holder gives up its claim on the refresh of `generation` (its fetch failed): the next ClaimRefresh
    /// is granted at once. The pending jwtError is not sent again, so that a failing backend is not asked in a
    /// loop; the next request's jwtError finds the claim free.
    ///
    /// - Returns: Whether `holder` held the claim.
    public func releaseRefresh(_ group: AppGroup, generation: UInt64, holder: UInt64?) -> Bool {
        guard table.releaseRefresh(group, generation: generation, holder: holder) else { return false }
        leaseEnded(group)
        metrics.claim(group, .released)
        logClaimEnded(group, generation: generation, why: "released by its holder")
        return true
    }

    /// The connection `holder` closed: every claim it holds ends at once, and each group's pending jwtError
    /// goes out again, so that another app refreshes (the claimant exited or crashed inside its fetch).
    public func connectionClosed(_ holder: UInt64) {
        for (group, event) in table.connectionClosed(holder, now: clock.now) {
            leaseEnded(group)
            metrics.claim(group, .holderGone)
            logClaimEnded(group, generation: table[group]?.generation ?? 0, why: "its holder's connection closed")
            sendJwtError(event, to: group)
        }
    }

    /// Arms the timer of a claim's lease: when it runs out, unless renewed, the claim ends.
    private func armLease(of group: AppGroup, claim id: UInt64, after seconds: TimeInterval) {
        let wait = Duration.milliseconds(Int64((max(seconds, 0) * 1000).rounded(.up)))
        let timer = clock.schedule(after: wait) { [weak self] in await self?.leaseTimerFired(group, claim: id) }
        leaseTimers.updateValue((id, timer), forKey: group)?.timer.cancel()
    }

    /// The group's claim ended before its lease: its timer goes.
    private func leaseEnded(_ group: AppGroup) {
        leaseTimers.removeValue(forKey: group)?.timer.cancel()
    }

    private func leaseTimerFired(_ group: AppGroup, claim id: UInt64) {
        if leaseTimers[group]?.claim == id { leaseTimers[group] = nil }
        switch table.leaseTimerFired(group, claim: id, now: clock.now) {
        case .gone:
            break
        case .renewed(let left):
            armLease(of: group, claim: id, after: left)
        case .ended(let event):
            metrics.claim(group, .lapsed)
            logger.warning(
                "Refresh abandoned: the claim's lease ran out before its holder set a token",
                metadata: OperatorEvent.refreshAbandoned.metadata(
                    group: group.name, generation: table[group]?.generation
                ) { .string($0) })
            sendJwtError(event, to: group)
        }
    }

    private func logClaimEnded(_ group: AppGroup, generation: UInt64, why: String) {
        logger.notice(
            "Refresh claim ended: \(why)", metadata: ["authd.group": "\(group)", "authd.generation": "\(generation)"])
    }

    // MARK: Clearing

    /// Why a group's data was cleared.
    public enum ClearCause: String, Sendable {
        case anonymize, stopIntegration, clearLocalCustomerData
    }

    /// Removes token and identity from memory and disk and tells the apps (`cleared`) (R8, R9). For
    /// `anonymize` and `stopIntegration`, first asks the group's apps to flush and waits until each has
    /// acknowledged or ``flushTimeout`` passed; `clearLocalCustomerData` is the wipe and clears at once (R9).
    ///
    /// - Returns: The subscriptions asked to flush and those that did not confirm (timed out, or ended
    ///   first). The group is cleared either way.
    @discardableResult
    public func clear(_ group: AppGroup, cause: ClearCause) async throws(AuthServiceError) -> ClearResult {
        let result = cause == .clearLocalCustomerData ? ClearResult(asked: 0, unconfirmed: []) : await flush(group)
        try await writingAlone(group) { () async throws(AuthServiceError) in
            try await removeRecord(group, cause: cause)
        }
        return result
    }

    /// Asks the group's apps to flush and waits until each has acknowledged or ``flushTimeout`` passed.
    private func flush(_ group: AppGroup) async -> ClearResult {
        if flushes.isPending(group) {
            // Another clear is waiting for this group's flush: wait for the same one.
            return await withCheckedContinuation { _ = flushes.join(group, $0) }
        }
        let subscribers = hub.subscribers(of: group)
        guard !subscribers.isEmpty else { return ClearResult(asked: 0, unconfirmed: []) }
        // Each subscription gets a flushId of its own, so two apps in one process are told apart.
        let requests = Dictionary(
            uniqueKeysWithValues: subscribers.map { (UUID().uuidString, (subscription: $0.key, pid: $0.value.pid)) })
        let id = makeID()
        return await withCheckedContinuation { continuation in
            flushes.begin(group, id: id, requests: requests, waiter: continuation)
            let generation = table[group]?.generation ?? 0
            for (flushId, entry) in requests {
                let request = AuthEvent(
                    kind: .flushRequested, group: group.name, generation: generation, flushId: flushId)
                if let ended = hub.send(request, to: group, subscription: entry.subscription) {
                    subscriptionEnded(ended)
                }
            }
            flushTimers[group] = clock.schedule(after: flushTimeout) { [weak self] in
                await self?.flushTimedOut(group, id)
            }
        }
    }

    private func flushTimedOut(_ group: AppGroup, _ id: UInt64) {
        finish(flushes.timedOut(group, flush: id), of: group)
    }

    private func finish(
        _ flush: FlushCoordinator<CheckedContinuation<ClearResult, Never>>.Finished?, of group: AppGroup
    ) {
        guard let flush else { return }
        flushTimers.removeValue(forKey: group)?.cancel()
        if !flush.result.confirmed {
            logger.warning(
                "Clearing without every app's flush acknowledgement",
                metadata: [
                    "authd.group": "\(group)", "authd.timed_out": "\(flush.timedOut)",
                    "authd.dropped": "\(flush.dropped)",
                ]
            )
        }
        for waiter in flush.waiters { waiter.resume(returning: flush.result) }
    }

    private func removeRecord(_ group: AppGroup, cause: ClearCause) async throws(AuthServiceError) {
        let started = ContinuousClock.now
        do {
            try await storeWriters.run(isolation: self) { [store] () throws(TokenStoreError) in
                try store.remove(group)
            }
        } catch {
            metrics.storeWritten(taking: started.duration(to: .now), failed: true)
            throw .storeFailure(error)
        }
        metrics.storeWritten(taking: started.duration(to: .now), failed: false)
        metrics.cleared(group)
        let event = table.commitClear(group, cause: cause.rawValue, now: clock.now)
        getTokenReplies.changed(group)
        leaseEnded(group)
        countsMayHaveChanged()
        expiry.remove(group)
        deliver([])
        // The operator's "Cleared app group", with who asked, is the dispatcher's.
        logger.debug("Cleared app group", metadata: ["authd.group": "\(group)", "authd.cause": "\(cause.rawValue)"])
        send(event, to: group)
        for waiter in waiters.removeAll(group) { waiter.resume() }
    }

    /// The app that was sent `flushId` has flushed.
    public func acknowledgeFlush(_ group: AppGroup, flushId: String) {
        finish(flushes.acknowledge(group, flushId: flushId), of: group)
    }

    // MARK: Events

    /// Hands the group's events from now on to `sink`, for the process `pid`, until ``unsubscribe(_:subscription:)``
    /// or the sink says its subscriber is gone or too far behind. The sink first gets the group's current state
    /// (``GroupTable/currentState(of:now:)``).
    ///
    /// - Returns: The subscription's id, or nil when the group already has ``maximumSubscribersPerGroup``.
    func subscribe(_ group: AppGroup, pid: Int32, sink: some AuthEventSink) -> UInt64? {
        let id = makeID()
        guard hub.add(group, id: id, SubscriptionHub.Subscriber(pid: pid, sink: sink)) else {
            logger.warning("Refusing a subscription: the group has too many", metadata: ["authd.group": "\(group)"])
            return nil
        }
        if table.add(group) { countsMayHaveChanged() }
        logger.debug(
            "Subscribed",
            metadata: [
                "authd.group": "\(group)", "authd.pid": "\(pid)", "authd.subscribers": "\(hub.count(of: group))",
            ])
        for event in table.currentState(of: group, now: clock.now) {
            // Gone already: the sink ends the subscription, and the caller's unsubscribe finds nothing.
            if let ended = hub.send(event, to: group, subscription: id) {
                subscriptionEnded(ended)
                break
            }
        }
        return id
    }

    /// Forgets a subscription; a flush waiting for its acknowledgement no longer does, and counts it as not
    /// confirmed.
    func unsubscribe(_ group: AppGroup, subscription id: UInt64) {
        guard let subscriber = hub.remove(group, id: id) else { return }
        logUnsubscribed(group, pid: subscriber.pid)
        finish(flushes.subscriptionEnded(group, subscription: id), of: group)
    }

    /// A subscription the hub found gone or too far behind while handing it an event.
    private func subscriptionEnded(_ ended: SubscriptionHub.Ended) {
        if ended.overflowed {
            logger.warning(
                "Dropping a subscriber that does not read its events",
                metadata: ["authd.group": "\(ended.group)", "authd.pid": "\(ended.pid)"]
            )
        }
        logUnsubscribed(ended.group, pid: ended.pid)
        finish(flushes.subscriptionEnded(ended.group, subscription: ended.id), of: ended.group)
    }

    /// The debug line that pairs with "Subscribed": with both, the log tells how many subscribers a group has.
    private func logUnsubscribed(_ group: AppGroup, pid: Int32) {
        logger.debug(
            "Unsubscribed",
            metadata: [
                "authd.group": "\(group)", "authd.pid": "\(pid)", "authd.subscribers": "\(hub.count(of: group))",
            ])
    }

    /// Calls `observer` with every group's event, in order, in the turn of the actor that sends it: for the
    /// D-Bus announcer, which the daemon's loop runs on the same thread. It must not block.
    public func observeAll(_ observer: @escaping @Sendable (AuthEvent) -> Void) {
        hub.addObserver(makeID(), observer)
    }

    /// How many groups the service holds, and how many of them have a token: the status line's and
    /// CountGroups' figures, without building every group's summary.
    public func groupCounts() -> (groups: Int, withToken: Int) {
        (table.count, table.groupsWithToken)
    }

    /// Calls `observer` each time ``groupCounts()`` may have changed, in the turn that changed them: for the
    /// daemon's STATUS line, which is then current without polling. It must not block.
    public func observeCounts(_ observer: @escaping @Sendable () -> Void) {
        countObservers[makeID()] = observer
    }

    private func countsMayHaveChanged() {
        for observer in countObservers.values { observer() }
    }

    /// Writes the figures of the groups that `visible` lets the caller see, then the subscriptions' and the
    /// store's, for `io.systemd.Metrics.List`.
    func writeMetrics(_ writer: inout MetricsReplyWriter, visible: @Sendable (AppGroup) -> Bool) {
        writer.reserveCapacity(table.count * 8 * 110)
        ServiceMetricsReport(
            table: table, metrics: metrics, subscribers: hub.total, recordsSetAside: store.recordsSetAside,
            now: clock.now
        )
        .write(&writer, visible: visible)
    }

    /// A summary of every group.
    public func summaries() -> [GroupSummary] {
        table.summaries(now: clock.now) { hub.count(of: $0) }
    }

    // MARK: Internals

    /// Stores the group's new token and identity (nil keeps the identity), then changes the group in memory and
    /// tells its apps. The write runs off the actor, alone among the group's writes; other groups' writes, and
    /// every other call, go on meanwhile.
    private func commit(_ group: AppGroup, token: StreamJWT?, customerIds: [String: String]?)
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
    private func writingAlone<T>(_ group: AppGroup, _ body: () async throws(AuthServiceError) -> T)
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
    private func sendJwtError(_ event: AuthEvent?, to group: AppGroup) {
        guard let event else { return }
        if let reason = event.reason { metrics.refreshAsked(group, reason: reason, at: .now) }
        logger.notice(
            "JWT error: the group's apps are asked for a new token",
            metadata: OperatorEvent.refreshAsked.metadata(
                group: group.name, generation: event.generation, reason: event.reason.map { "\($0)" }
            ) { .string($0) })
        send(event, to: group)
    }

    private func send(_ event: AuthEvent, to group: AppGroup) {
        for ended in hub.send(event, to: group) { subscriptionEnded(ended) }
    }

    private func makeID() -> UInt64 {
        lastID += 1
        return lastID
    }
}

/// A WaitForToken call waiting for another token, with the timer that bounds its wait: whichever ends the wait
/// first, the other goes with it.
private struct TokenWaiter {
    var continuation: CheckedContinuation<Void, Never>
    var bound: ServiceTimer

    func resume() {
        bound.cancel()
        continuation.resume()
    }
}
