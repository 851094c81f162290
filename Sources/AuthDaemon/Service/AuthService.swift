// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import Logging
import NIOPosix

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The app groups' tokens and what happens to them: the semantics of every `com.exponea.Auth` method,
/// independent of the transport that carries the calls.
///
/// One actor holds every group's state, so a group's generation, events and waiters always agree. Store writes
/// happen before memory changes (a failed write leaves the group as it was) and run off the actor: one group's
/// writes one at a time, in order, other groups' writes and every other call meanwhile.
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
    /// How long a clear waits for the group's apps to acknowledge the flush (R9).
    public nonisolated let flushTimeout: Duration

    private let store: TokenStore
    private let now: @Sendable () -> Date
    private let logger: Logger
    private var groups: [AppGroup: GroupState] = [:]
    /// The token and generation of each group in `groups`, for readers that do not wait for the actor.
    private nonisolated let current: CurrentTokens
    private var nextID: UInt64 = 0
    private var observers: [UInt64: AsyncStream<AuthEvent>.Continuation] = [:]
    /// Who is told when ``groupCounts()`` may have changed (the daemon's STATUS line).
    private var countObservers: [UInt64: AsyncStream<Void>.Continuation] = [:]
    /// How many groups in `groups` have a token, kept as tokens come and go.
    private var groupsWithToken = 0
    /// The groups' expiry deadlines (R13, R14).
    private var expiry = ExpiryScheduler()
    /// The groups whose refresh claim each connection holds, to end them when it closes.
    private var claimsByHolder: [UInt64: Set<AppGroup>] = [:]
    /// Events the deadlines of the loaded tokens call for, sent by ``start()``.
    private var startupEvents: [ExpiryEvent] = []
    /// The wall-clock timer armed for the earliest deadline, when the daemon runs one.
    private let timer: WallClockTimer?

    /// Events a subscriber may have unread before it is dropped.
    static let subscriberBuffer = 256
    /// Subscriptions one group may have at once.
    public nonisolated let maximumSubscribersPerGroup: Int

    /// Creates the service over an opened store, with its records loaded.
    ///
    /// - Parameters:
    ///   - records: The records loaded from `store` at start.
    ///   - now: The wall clock (injectable for tests).
    public init(
        store: TokenStore,
        records: [TokenRecord],
        refreshLease: TimeInterval = AuthService.defaultRefreshLease,
        jwtErrorWindow: TimeInterval = 2,
        flushTimeout: Duration = .seconds(2),
        maximumSubscribersPerGroup: Int = 1024,
        now: @escaping @Sendable () -> Date = Date.init,
        timer: WallClockTimer? = nil,
        logger: Logger
    ) {
        self.store = store
        self.timer = timer
        self.refreshLease = refreshLease
        self.jwtErrorWindow = jwtErrorWindow
        self.flushTimeout = flushTimeout
        self.maximumSubscribersPerGroup = maximumSubscribersPerGroup
        self.now = now
        self.logger = logger
        self.current = CurrentTokens(
            Dictionary(
                records.map { ($0.group, CurrentTokens.Entry(token: $0.token, generation: $0.generation)) },
                uniquingKeysWith: { _, last in last }))
        groups.reserveCapacity(records.count)
        for record in records {
            groups[record.group] = GroupState(
                token: record.token,
                customerIds: record.customerIds,
                generation: record.generation,
                changedAt: record.changedAt
            )
            if record.token != nil { groupsWithToken += 1 }
            let instant = now()
            startupEvents += expiry.set(record.group, expiresAt: record.token?.expiresAt, now: instant)
        }
    }

    // MARK: Expiry

    /// Sends what the loaded tokens' deadlines call for (a token that entered its last minute, or expired,
    /// while the daemon was down fires at once, R13) and arms the timer. Call once observers are attached.
    public func start() {
        let events = startupEvents
        startupEvents = []
        deliver(events)
    }

    /// The wall-clock timer fired: sends the events that are due and re-arms.
    public func expiryTimerFired() {
        deliver(expiry.fireDue(now: now()))
    }

    /// The wall clock was set: re-evaluates every deadline against the new time and re-arms (R14).
    public func wallClockChanged() {
        logger.notice("The wall clock changed; re-checking every token's expiry")
        deliver(expiry.clockChanged(now: now()))
    }

    /// The earliest pending expiry deadline.
    public var nextExpiryDeadline: Date? { expiry.nextDeadline }

    private func deliver(_ events: [ExpiryEvent]) {
        for event in events { sendJwtError(event.group, reason: event.reason) }
        armTimer()
    }

    private func armTimer() {
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
        let generation = try await commit(group, token: jwt, customerIds: nil)
        return (generation, jwt)
    }

    /// The group's token and generation, with no side effects. Does not wait for the actor: it reads what the
    /// actor last committed.
    public nonisolated func token(for group: AppGroup) -> (token: StreamJWT?, generation: UInt64) {
        let entry = current[group]
        return (entry?.token, entry?.generation ?? 0)
    }

    /// The check before a stream request (R15-R17): the token to send (even an expired one, R16) and its
    /// state; when the state calls for the handler, the group's apps get a `jwtError` event.
    public func preflight(_ group: AppGroup) -> PreflightResult {
        let state = groups[group]
        let tokenState = TokenState(state?.token, at: now())
        let reason = tokenState.errorReason
        if let reason { sendJwtError(group, reason: reason) }
        return PreflightResult(
            token: state?.token.map { CompactToken($0.compact) },
            state: tokenState,
            reason: reason,
            generation: state?.generation ?? 0
        )
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
        let state = groups[group]
        // A request that carried no token while there is one now went out before the token was set.
        // Identity, not generation: the same token stored again is no replacement (R6, R19).
        let replaced = sentGeneration.map { $0 < (state?.tokenSince ?? 0) } ?? (state?.token != nil)
        let sent: TokenState = sentGeneration == nil ? .notProvided : TokenState(state?.token, at: now())
        let decision = RetryDecision(
            status: status,
            sentToken: sent,
            serverSaysExpired: serverSaysExpired,
            tokenReplaced: replaced
        )
        if let reason = decision.reason { sendJwtError(group, reason: reason) }
        return decision
    }

    /// Returns as soon as another token than the one current at generation `after` is set (or the group is
    /// cleared), or when `timeout` has passed (R18, R22), with the token then current. The same token stored
    /// again does not end the wait.
    public func waitForToken(_ group: AppGroup, after: UInt64, timeout: Duration) async -> (StreamJWT?, UInt64) {
        if (groups[group]?.tokenSince ?? 0) <= after && timeout > .zero {
            let id = makeID()
            await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    groups[group, default: GroupState()].waiters[id] = continuation
                    Task { [weak self] in
                        try? await Task.sleep(for: timeout)
                        await self?.resumeWaiter(group, id)
                    }
                }
            } onCancel: {
                Task { [weak self] in await self?.resumeWaiter(group, id) }
            }
        }
        let state = groups[group]
        return (state?.token, state?.generation ?? 0)
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
        let lease = lease ?? refreshLease
        var state = groups[group] ?? GroupState()
        guard generation >= state.generation else { return false }
        let instant = now()
        if let claim = state.refreshClaim, claim.generation == generation, claim.until > instant {
            guard renew, holder != nil, claim.holder == holder else { return false }
            state.refreshClaim?.until = instant.addingTimeInterval(lease)
            groups[group] = state
            return true
        }
        if let old = state.refreshClaim { forgetClaim(group, of: old.holder) }
        let claim = GroupState.RefreshClaim(
            id: makeID(), generation: generation, holder: holder, lease: lease,
            until: instant.addingTimeInterval(lease))
        state.refreshClaim = claim
        groups[group] = state
        if let holder { claimsByHolder[holder, default: []].insert(group) }
        endLease(of: group, claim: claim.id, after: lease)
        return true
    }

    /// The holder gives up its claim on the refresh of `generation` (its fetch failed): the next ClaimRefresh
    /// is granted at once. The pending jwtError is not sent again, so that a failing backend is not asked in a
    /// loop; the next request's jwtError finds the claim free.
    ///
    /// - Returns: Whether `holder` held the claim.
    public func releaseRefresh(_ group: AppGroup, generation: UInt64, holder: UInt64?) -> Bool {
        guard let claim = groups[group]?.refreshClaim, claim.generation == generation, claim.holder == holder else {
            return false
        }
        endClaim(group, resend: false, why: "released by its holder")
        return true
    }

    /// The connection `holder` closed: every claim it holds ends at once, and each group's pending jwtError
    /// goes out again, so that another app refreshes (the claimant exited or crashed inside its fetch).
    public func connectionClosed(_ holder: UInt64) {
        guard let claimed = claimsByHolder.removeValue(forKey: holder) else { return }
        for group in claimed where groups[group]?.refreshClaim?.holder == holder {
            endClaim(group, resend: true, why: "its holder's connection closed")
        }
    }

    /// Arms the timer of a claim's lease: when it runs out, unless renewed, the claim ends.
    private func endLease(of group: AppGroup, claim id: UInt64, after seconds: TimeInterval) {
        let wait = Duration.milliseconds(Int64((max(seconds, 0) * 1000).rounded(.up)))
        Task { [weak self] in
            try? await Task.sleep(for: wait)
            await self?.leaseTimerFired(group, claim: id)
        }
    }

    private func leaseTimerFired(_ group: AppGroup, claim id: UInt64) {
        guard let claim = groups[group]?.refreshClaim, claim.id == id else { return }
        let left = claim.until.timeIntervalSince(now())
        if left > 0 {
            // Renewed meanwhile. At most one lease: a wall clock set back must not stretch it.
            endLease(of: group, claim: id, after: min(left, claim.lease))
            return
        }
        endClaim(group, resend: true, why: "its lease ran out")
    }

    private func endClaim(_ group: AppGroup, resend: Bool, why: String) {
        guard let claim = groups[group]?.refreshClaim else { return }
        groups[group]?.refreshClaim = nil
        forgetClaim(group, of: claim.holder)
        logger.notice(
            "Refresh claim ended: \(why)",
            metadata: ["authd.group": "\(group)", "authd.generation": "\(claim.generation)"]
        )
        guard resend, let state = groups[group], let pending = state.pendingJwtError,
            pending.generation == state.generation, claim.generation == state.generation
        else { return }
        sendJwtError(group, reason: pending.reason, evenWithinWindow: true)
    }

    private func forgetClaim(_ group: AppGroup, of holder: UInt64?) {
        guard let holder else { return }
        claimsByHolder[holder]?.remove(group)
        if claimsByHolder[holder]?.isEmpty == true { claimsByHolder[holder] = nil }
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
        let subscribers = groups[group]?.subscribers ?? [:]
        if groups[group]?.pendingFlush != nil {
            // Another clear is waiting for this group's flush: wait for the same one.
            return await withCheckedContinuation { groups[group]?.pendingFlush?.done.append($0) }
        }
        guard !subscribers.isEmpty else { return ClearResult(asked: 0, unconfirmed: []) }
        // Each subscription gets a flushId of its own, so two apps in one process are told apart.
        let flushIds = Dictionary(
            uniqueKeysWithValues: subscribers.map { (UUID().uuidString, (subscription: $0.key, pid: $0.value.pid)) })
        let flush = makeID()
        return await withCheckedContinuation { continuation in
            groups[group, default: GroupState()].pendingFlush = GroupState.PendingFlush(
                id: flush,
                waitingFor: flushIds,
                asked: flushIds.count,
                done: [continuation]
            )
            for (flushId, entry) in flushIds {
                let id = entry.subscription
                guard let subscriber = subscribers[id] else { continue }
                let request = AuthEvent(
                    kind: .flushRequested,
                    group: group.name,
                    generation: generation(of: group),
                    flushId: flushId
                )
                deliver(request, to: subscriber, id, of: group)
            }
            Task { [weak self, flushTimeout] in
                try? await Task.sleep(for: flushTimeout)
                await self?.finishFlush(group, flush, timedOut: true)
            }
        }
    }

    private func removeRecord(_ group: AppGroup, cause: ClearCause) async throws(AuthServiceError) {
        do {
            try await offActor { [store] () throws(TokenStoreError) in try store.remove(group) }
        } catch {
            throw .storeFailure(error)
        }
        var state = groups[group] ?? GroupState()
        let hadToken = state.token != nil
        state.token = nil
        state.customerIds = [:]
        state.generation += 1
        state.tokenSince = state.generation
        state.changedAt = now()
        if let claim = state.refreshClaim { forgetClaim(group, of: claim.holder) }
        state.refreshClaim = nil
        groups[group] = state
        current.set(group, token: nil, generation: state.generation)
        tokenCountChanged(had: hadToken, has: false)
        expiry.remove(group)
        armTimer()
        logger.info("Cleared app group", metadata: ["authd.group": "\(group)", "authd.cause": "\(cause.rawValue)"])
        send(
            AuthEvent(kind: .cleared, group: group.name, generation: state.generation, cause: cause.rawValue), to: group
        )
        resumeAllWaiters(group)
    }

    /// The app that was sent `flushId` has flushed.
    public func acknowledgeFlush(_ group: AppGroup, flushId: String) {
        guard var flush = groups[group]?.pendingFlush, flush.waitingFor.removeValue(forKey: flushId) != nil else {
            return
        }
        groups[group]?.pendingFlush = flush
        if flush.waitingFor.isEmpty { finishFlush(group, flush.id, timedOut: false) }
    }

    // MARK: Events

    /// The group's events from now on, for the process `pid`, or nil when the group already has
    /// ``maximumSubscribersPerGroup`` subscriptions. The stream ends when the subscriber falls more than
    /// ``subscriberBuffer`` events behind, or is cancelled.
    public func subscribe(_ group: AppGroup, pid: Int32) -> AsyncStream<AuthEvent>? {
        let (stream, continuation) = AsyncStream.makeStream(
            of: AuthEvent.self,
            bufferingPolicy: .bufferingOldest(Self.subscriberBuffer)
        )
        guard let id = subscribe(group, pid: pid, sink: StreamEventSink(continuation: continuation)) else {
            return nil
        }
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(group, subscription: id) }
        }
        return stream
    }

    /// Hands the group's events from now on to `sink`, for the process `pid`, until ``unsubscribe(_:subscription:)``
    /// or the sink says its subscriber is gone or too far behind.
    ///
    /// - Returns: The subscription's id, or nil when the group already has ``maximumSubscribersPerGroup``.
    func subscribe(_ group: AppGroup, pid: Int32, sink: some AuthEventSink) -> UInt64? {
        guard (groups[group]?.subscribers.count ?? 0) < maximumSubscribersPerGroup else {
            logger.warning("Refusing a subscription: the group has too many", metadata: ["authd.group": "\(group)"])
            return nil
        }
        let id = makeID()
        let isNew = groups[group] == nil
        let subscriber = GroupState.Subscriber(pid: pid, sink: sink)
        groups[group, default: GroupState()].subscribers[id] = subscriber
        if isNew { countsMayHaveChanged() }
        for event in currentState(of: group) {
            deliver(event, to: subscriber, id, of: group)
            // Gone already: the sink ends the subscription, and the caller's unsubscribe finds nothing.
            guard groups[group]?.subscribers[id] != nil else { break }
        }
        return id
    }

    /// What a new subscriber is told first, so that it acts as one that was there all along: a `state`
    /// event (the token's state, whether a refresh is claimed), then the jwtError the group waits on, if any:
    /// the token's expiry when it is in its last minute or past it (the timer may have fired before anyone
    /// listened, or while the daemon was down, R13), or else the last jwtError of the current generation.
    private func currentState(of group: AppGroup) -> [AuthEvent] {
        let state = groups[group] ?? GroupState()
        let instant = now()
        let tokenState = TokenState(state.token, at: instant)
        let claimed = state.refreshClaim.map { $0.generation == state.generation && $0.until > instant } ?? false
        var events = [
            AuthEvent(
                kind: .state, group: group.name, generation: state.generation, tokenState: tokenState,
                refreshClaimed: claimed)
        ]
        var reason: JwtErrorReason?
        if tokenState == .expired || tokenState == .expiredSoon {
            reason = tokenState.errorReason
        } else if let pending = state.pendingJwtError, pending.generation == state.generation {
            reason = pending.reason
        }
        if let reason {
            events.append(
                AuthEvent(
                    kind: .jwtError, group: group.name, generation: state.generation, reason: reason,
                    customerIds: state.customerIdsForHandler))
        }
        return events
    }

    /// Forgets a subscription; a flush waiting for its acknowledgement no longer does, and counts it as not
    /// confirmed.
    func unsubscribe(_ group: AppGroup, subscription id: UInt64) {
        guard groups[group]?.subscribers.removeValue(forKey: id) != nil else { return }
        // An app that is gone will not acknowledge its flush.
        guard var flush = groups[group]?.pendingFlush,
            let flushId = flush.waitingFor.first(where: { $0.value.subscription == id })?.key,
            let entry = flush.waitingFor.removeValue(forKey: flushId)
        else { return }
        flush.dropped.append(UnconfirmedFlush(pid: entry.pid, reason: .dropped))
        groups[group]?.pendingFlush = flush
        if flush.waitingFor.isEmpty { finishFlush(group, flush.id, timedOut: false) }
    }

    /// Every group's events, for the D-Bus announcer.
    public func observeAll() -> AsyncStream<AuthEvent> {
        let id = makeID()
        let (stream, continuation) = AsyncStream.makeStream(of: AuthEvent.self, bufferingPolicy: .bufferingNewest(1024))
        observers[id] = continuation
        continuation.onTermination = { [weak self] _ in Task { await self?.stopObserving(id) } }
        return stream
    }

    /// How many groups the service holds, and how many of them have a token: the status line's figures,
    /// without building every group's summary.
    public func groupCounts() -> (groups: Int, withToken: Int) {
        (groups.count, groupsWithToken)
    }

    /// A wake-up each time ``groupCounts()`` may have changed, coalesced: a reader that is behind gets one, not
    /// one per change. For the daemon's STATUS line, which is then current without polling.
    public func observeCounts() -> AsyncStream<Void> {
        let id = makeID()
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        countObservers[id] = continuation
        continuation.onTermination = { [weak self] _ in Task { await self?.stopObservingCounts(id) } }
        return stream
    }

    private func stopObservingCounts(_ id: UInt64) { countObservers[id] = nil }

    private func tokenCountChanged(had: Bool, has: Bool) {
        groupsWithToken += (has ? 1 : 0) - (had ? 1 : 0)
        countsMayHaveChanged()
    }

    private func countsMayHaveChanged() {
        for observer in countObservers.values { observer.yield() }
    }

    /// A summary of every group.
    public func summaries() -> [GroupSummary] {
        let instant = now()
        return groups.sorted { $0.key < $1.key }.map { group, state in
            GroupSummary(
                name: group.name,
                hasToken: state.token != nil,
                state: TokenState(state.token, at: instant),
                expiresAt: state.token?.expiresAt.timeIntervalSince1970,
                generation: state.generation,
                subscribers: state.subscribers.count
            )
        }
    }

    // MARK: Internals

    /// Stores the group's new token and identity (nil keeps the identity), then changes the group in memory and
    /// tells its apps. The write runs off the actor, alone among the group's writes; other groups' writes, and
    /// every other call, go on meanwhile.
    private func commit(_ group: AppGroup, token: StreamJWT?, customerIds: [String: String]?)
        async throws(AuthServiceError) -> UInt64
    {
        try await writingAlone(group) { () async throws(AuthServiceError) in
            try await writeRecord(group, token: token, customerIds: customerIds)
        }
    }

    private func writeRecord(_ group: AppGroup, token: StreamJWT?, customerIds: [String: String]?)
        async throws(AuthServiceError) -> UInt64
    {
        var state = groups[group] ?? GroupState()
        let customerIds = customerIds ?? state.customerIds
        let record = TokenRecord(
            group: group,
            token: token,
            customerIds: customerIds,
            generation: state.generation + 1,
            changedAt: now()
        )
        do {
            try await offActor { [store] () throws(TokenStoreError) in try store.save(record) }
        } catch {
            logger.error("Cannot store the token", metadata: ["authd.group": "\(group)", "authd.error": "\(error)"])
            throw .storeFailure(error)
        }
        // The actor may have run other calls during the write, but none wrote this group: read it again.
        state = groups[group] ?? GroupState()
        let replaced = token?.compact != state.token?.compact
        let since = replaced ? record.generation : state.tokenSince
        let hadToken = state.token != nil
        state.token = token
        state.customerIds = customerIds
        state.generation = record.generation
        state.tokenSince = since
        state.changedAt = record.changedAt
        if let claim = state.refreshClaim { forgetClaim(group, of: claim.holder) }
        state.refreshClaim = nil
        groups[group] = state
        current.set(group, token: token, generation: record.generation)
        tokenCountChanged(had: hadToken, has: token != nil)
        logger.info(
            "Token set",
            metadata: [
                "authd.group": "\(group)", "authd.generation": "\(record.generation)",
                "authd.state": "\(TokenState(token, at: record.changedAt))",
            ]
        )
        if token != nil {
            send(AuthEvent(kind: .tokenRefreshed, group: group.name, generation: record.generation), to: group)
        }
        // Waiters wait for another token (R19, R22): the same one stored again wakes none.
        if replaced { resumeAllWaiters(group) }
        deliver(expiry.set(group, expiresAt: token?.expiresAt, now: record.changedAt))
        return record.generation
    }

    /// Runs `body`, which writes the group's record, once no other write of the group runs: one group's writes
    /// happen one at a time, in the order they were asked for.
    private func writingAlone<T>(_ group: AppGroup, _ body: () async throws(AuthServiceError) -> T)
        async throws(AuthServiceError) -> T
    {
        if groups[group]?.writing == true {
            // The write before hands its turn over: `writing` stays set.
            await withCheckedContinuation { groups[group, default: GroupState()].waitingToWrite.append($0) }
        } else {
            groups[group, default: GroupState()].writing = true
        }
        defer {
            if groups[group]?.waitingToWrite.isEmpty == false {
                groups[group]?.waitingToWrite.removeFirst().resume()
            } else {
                groups[group]?.writing = false
            }
        }
        return try await body()
    }

    /// Runs a blocking store operation (an fsync takes milliseconds on a real disk) on one of the store's
    /// threads, so that the actor answers other calls meanwhile.
    private nonisolated func offActor(_ work: @escaping @Sendable () throws(TokenStoreError) -> Void)
        async throws(TokenStoreError)
    {
        let failure: TokenStoreError?
        do {
            failure = try await Self.storeThreads.runIfActive { () -> TokenStoreError? in
                do throws(TokenStoreError) {
                    try work()
                    return nil
                } catch {
                    return error
                }
            }
        } catch {
            // The pool is never shut down, so it is always active.
            failure = TokenStoreError(code: .encodingFailed, message: "the store's threads are gone: \(error)")
        }
        if let failure { throw failure }
    }

    /// Where store operations run: a fixed set of threads, so that writes of different groups overlap their
    /// fsyncs (the file system commits overlapping ones together) without a thread per waiting client.
    private static let storeThreads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 8)
        pool.start()
        return pool
    }()

    /// Sends a jwtError to the group's apps, once per ``jwtErrorWindow`` for the same reason and generation
    /// unless `evenWithinWindow` (a claimant went away: another app must hear it now).
    private func sendJwtError(_ group: AppGroup, reason: JwtErrorReason, evenWithinWindow: Bool = false) {
        var state = groups[group] ?? GroupState()
        let key = GroupState.JwtErrorKey(reason: reason, generation: state.generation)
        let instant = now()
        if !evenWithinWindow, let last = state.lastJwtError[key], instant.timeIntervalSince(last) < jwtErrorWindow {
            return
        }
        state.lastJwtError = state.lastJwtError.filter { instant.timeIntervalSince($0.value) < jwtErrorWindow }
        state.lastJwtError[key] = instant
        state.pendingJwtError = key
        groups[group] = state
        logger.notice(
            "JWT error",
            metadata: [
                "authd.group": "\(group)", "authd.reason": "\(reason)", "authd.generation": "\(state.generation)",
            ]
        )
        send(
            AuthEvent(
                kind: .jwtError,
                group: group.name,
                generation: state.generation,
                reason: reason,
                customerIds: state.customerIdsForHandler
            ),
            to: group
        )
    }

    private func send(_ event: AuthEvent, to group: AppGroup) {
        for (id, subscriber) in groups[group]?.subscribers ?? [:] {
            deliver(event, to: subscriber, id, of: group)
        }
        for observer in observers.values { observer.yield(event) }
    }

    /// Hands `event` to one subscriber; drops the subscriber when it is too far behind, forgets it when gone.
    private func deliver(_ event: AuthEvent, to subscriber: GroupState.Subscriber, _ id: UInt64, of group: AppGroup) {
        switch subscriber.sink.deliver(event) {
        case .delivered:
            break
        case .overflowed:
            logger.warning(
                "Dropping a subscriber that does not read its events",
                metadata: ["authd.group": "\(group)", "authd.pid": "\(subscriber.pid)"]
            )
            subscriber.sink.dropped()
            unsubscribe(group, subscription: id)
        case .gone:
            unsubscribe(group, subscription: id)
        }
    }

    private func stopObserving(_ id: UInt64) { observers[id] = nil }

    private func finishFlush(_ group: AppGroup, _ id: UInt64, timedOut: Bool) {
        guard let flush = groups[group]?.pendingFlush, flush.id == id else { return }
        groups[group]?.pendingFlush = nil
        let late = flush.waitingFor.values.map { UnconfirmedFlush(pid: $0.pid, reason: .timedOut) }
        let unconfirmed = (flush.dropped + late).sorted { ($0.pid, $0.reason.rawValue) < ($1.pid, $1.reason.rawValue) }
        if !unconfirmed.isEmpty {
            logger.warning(
                "Clearing without every app's flush acknowledgement",
                metadata: [
                    "authd.group": "\(group)", "authd.timed_out": "\(late.count)",
                    "authd.dropped": "\(flush.dropped.count)",
                ]
            )
        }
        let result = ClearResult(asked: flush.asked, unconfirmed: unconfirmed)
        for waiting in flush.done { waiting.resume(returning: result) }
    }

    private func resumeWaiter(_ group: AppGroup, _ id: UInt64) {
        groups[group]?.waiters.removeValue(forKey: id)?.resume()
    }

    private func resumeAllWaiters(_ group: AppGroup) {
        guard let waiters = groups[group]?.waiters, !waiters.isEmpty else { return }
        groups[group]?.waiters = [:]
        for waiter in waiters.values { waiter.resume() }
    }

    private func generation(of group: AppGroup) -> UInt64 { groups[group]?.generation ?? 0 }

    private func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }
}
