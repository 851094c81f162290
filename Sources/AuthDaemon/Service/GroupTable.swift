// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Every app group's token, identity, generation, refresh claim and jwtError window: the R-rules as synchronous
/// logic over plain values, with the time passed in.
///
/// No I/O, no clock, no tasks: each operation returns what should follow (the events to send, whether waiters
/// wake, a lease timer to arm), and ``AuthService`` carries it out. Tests drive it at fixed times.
struct GroupTable {
    /// Dense, for its memory at 100,000 groups.
    private(set) var groups = DenseGroupMap<GroupState>()
    /// The groups whose refresh claim each connection holds, to end them when it closes.
    private var claimsByHolder: [UInt64: Set<AppGroup>] = [:]
    /// How many groups have a token, kept as tokens come and go.
    private(set) var groupsWithToken = 0
    /// The window in which the same jwtError (group, reason, generation) is sent only once.
    let jwtErrorWindow: TimeInterval
    private var lastClaimID: UInt64 = 0

    /// A table of the loaded records (the last of a group wins).
    init(records: [TokenRecord], jwtErrorWindow: TimeInterval) {
        self.jwtErrorWindow = jwtErrorWindow
        groups.reserveCapacity(records.count)
        for record in records {
            let replaced = groups.updateValue(
                GroupState(
                    token: record.token, customerIds: record.customerIds, generation: record.generation,
                    changedAt: record.changedAt),
                forKey: record.group)
            if replaced?.token != nil { groupsWithToken -= 1 }
            if record.token != nil { groupsWithToken += 1 }
        }
    }

    subscript(group: AppGroup) -> GroupState? { groups[group] }

    /// How many groups the table holds.
    var count: Int { groups.count }

    /// Makes `group` known (a subscription or a wait names it before any token): whether it was new.
    mutating func add(_ group: AppGroup) -> Bool {
        guard groups[group] == nil else { return false }
        groups[group] = GroupState()
        return true
    }

    /// The generation since which the group's current token (or its absence) stands.
    func tokenSince(_ group: AppGroup) -> UInt64 { groups[group]?.tokenSince ?? 0 }

    // MARK: Pre-flight and failures (R15-R21)

    /// The check before a stream request (R15-R17): the token to send (even an expired one, R16), its state,
    /// and the jwtError to send when the state calls for the handler.
    mutating func preflight(_ group: AppGroup, now: Date) -> (PreflightResult, AuthEvent?) {
        let state = groups[group]
        let tokenState = TokenState(state?.token, at: now)
        let reason = tokenState.errorReason
        let result = PreflightResult(
            token: state?.token.map { CompactToken($0.compact) }, state: tokenState, reason: reason,
            generation: state?.generation ?? 0)
        return (result, reason.flatMap { jwtError(group, reason: $0, now: now) })
    }

    /// Decides about a failed stream request (R19-R21). A request that carried another token than the current
    /// one (set at a later generation, and not the same token stored again) is retried at once, with no
    /// handler; otherwise the decision's reason, if any, goes out as a jwtError.
    mutating func reportAuthFailure(
        _ group: AppGroup, status: Int, sentGeneration: UInt64?, serverSaysExpired: Bool, now: Date
    ) -> (RetryDecision, AuthEvent?) {
        let state = groups[group]
        // A request that carried no token while there is one now went out before the token was set.
        // Identity, not generation: the same token stored again is no replacement (R6, R19).
        let replaced = sentGeneration.map { $0 < (state?.tokenSince ?? 0) } ?? (state?.token != nil)
        let sent: TokenState = sentGeneration == nil ? .notProvided : TokenState(state?.token, at: now)
        let decision = RetryDecision(
            status: status, sentToken: sent, serverSaysExpired: serverSaysExpired, tokenReplaced: replaced)
        return (decision, decision.reason.flatMap { jwtError(group, reason: $0, now: now) })
    }

    /// The jwtError for the group's apps, or nil when the same (reason, generation) went out within
    /// ``jwtErrorWindow`` and `evenWithinWindow` is not set (a claimant went away: another app must hear it now).
    /// Notes it as the error the group waits on.
    mutating func jwtError(
        _ group: AppGroup, reason: JwtErrorReason, now: Date, evenWithinWindow: Bool = false
    ) -> AuthEvent? {
        var state = groups[group] ?? GroupState()
        let key = GroupState.JwtErrorKey(reason: reason, generation: state.generation)
        if !evenWithinWindow, let last = state.lastJwtError[key], now.timeIntervalSince(last) < jwtErrorWindow {
            return nil
        }
        state.lastJwtError = state.lastJwtError.filter { now.timeIntervalSince($0.value) < jwtErrorWindow }
        state.lastJwtError[key] = now
        state.pendingJwtError = key
        groups[group] = state
        return AuthEvent(
            kind: .jwtError, group: group.name, generation: state.generation, reason: reason,
            customerIds: state.customerIdsForHandler)
    }

    // MARK: Writes

    /// The record a write of the group's new token and identity stores (nil `customerIds` keeps the identity):
    /// the next generation. Nothing changes until ``commit(_:)``.
    func record(_ group: AppGroup, token: StreamJWT?, customerIds: [String: String]?, now: Date) -> TokenRecord {
        let state = groups[group] ?? GroupState()
        return TokenRecord(
            group: group, token: token, customerIds: customerIds ?? state.customerIds,
            generation: state.generation + 1, changedAt: now)
    }

    /// What a stored change means for the group's apps.
    struct Committed {
        /// The token is another one than before (or none where there was one): waiters wake (R19, R22).
        var replaced: Bool
        /// `tokenRefreshed`, when a token was set (R6: even the same one, even an expired one).
        var event: AuthEvent?
        /// The refresh claim the change ended.
        var endedClaim: GroupState.RefreshClaim?
    }

    /// Takes a stored record into memory: the token, identity and generation change, a refresh claim ends.
    mutating func commit(_ record: TokenRecord) -> Committed {
        var state = groups[record.group] ?? GroupState()
        let replaced = record.token?.compact != state.token?.compact
        let since = replaced ? record.generation : state.tokenSince
        let hadToken = state.token != nil
        state.token = record.token
        state.customerIds = record.customerIds
        state.generation = record.generation
        state.tokenSince = since
        state.changedAt = record.changedAt
        let claim = state.refreshClaim
        state.refreshClaim = nil
        groups[record.group] = state
        if let claim { forget(record.group, claimOf: claim.holder) }
        groupsWithToken += (record.token != nil ? 1 : 0) - (hadToken ? 1 : 0)
        let event =
            record.token == nil
            ? nil : AuthEvent(kind: .tokenRefreshed, group: record.group.name, generation: record.generation)
        return Committed(replaced: replaced, event: event, endedClaim: claim)
    }

    /// Takes a removed record into memory: no token, no identity, the next generation (R8, R9).
    ///
    /// - Returns: The `cleared` event.
    mutating func commitClear(_ group: AppGroup, cause: String, now: Date) -> AuthEvent {
        var state = groups[group] ?? GroupState()
        let hadToken = state.token != nil
        state.token = nil
        state.customerIds = [:]
        state.generation += 1
        state.tokenSince = state.generation
        state.changedAt = now
        let claim = state.refreshClaim
        state.refreshClaim = nil
        groups[group] = state
        if let claim { forget(group, claimOf: claim.holder) }
        if hadToken { groupsWithToken -= 1 }
        return AuthEvent(kind: .cleared, group: group.name, generation: state.generation, cause: cause)
    }

    // MARK: Refresh claims (R28)

    /// What became of a ClaimRefresh.
    enum ClaimOutcome: Equatable {
        /// Someone else holds it, or the generation was already refreshed.
        case refused
        /// The holder's lease was extended.
        case renewed
        /// Granted: arm the lease's timer for the claim `id`.
        case granted(id: UInt64, lease: TimeInterval)
    }

    /// Grants the group's refresh of `generation` to the first caller (R28); see ``AuthService/claimRefresh``.
    mutating func claimRefresh(
        _ group: AppGroup, generation: UInt64, holder: UInt64?, renew: Bool, lease: TimeInterval, now: Date
    ) -> ClaimOutcome {
        var state = groups[group] ?? GroupState()
        guard generation >= state.generation else { return .refused }
        if let claim = state.refreshClaim, claim.generation == generation, claim.until > now {
            guard renew, holder != nil, claim.holder == holder else { return .refused }
            state.refreshClaim?.until = now.addingTimeInterval(lease)
            groups[group] = state
            return .renewed
        }
        if let old = state.refreshClaim { forget(group, claimOf: old.holder) }
        lastClaimID += 1
        state.refreshClaim = GroupState.RefreshClaim(
            id: lastClaimID, generation: generation, holder: holder, lease: lease, until: now.addingTimeInterval(lease))
        groups[group] = state
        if let holder { claimsByHolder[holder, default: []].insert(group) }
        return .granted(id: lastClaimID, lease: lease)
    }

    /// The holder gives up its claim on `generation`: whether it held it. The pending jwtError is not sent
    /// again (a failing backend is not asked in a loop).
    mutating func releaseRefresh(_ group: AppGroup, generation: UInt64, holder: UInt64?) -> Bool {
        guard let claim = groups[group]?.refreshClaim, claim.generation == generation, claim.holder == holder else {
            return false
        }
        _ = endClaim(group, resend: false, now: .distantPast)
        return true
    }

    /// The connection `holder` closed: every claim it holds ends, and each group's pending jwtError goes out
    /// again (returned), so that another app refreshes.
    mutating func connectionClosed(_ holder: UInt64, now: Date) -> [(AppGroup, AuthEvent?)] {
        guard let claimed = claimsByHolder.removeValue(forKey: holder) else { return [] }
        return claimed.sorted().compactMap { group in
            guard groups[group]?.refreshClaim?.holder == holder else { return nil }
            return (group, endClaim(group, resend: true, now: now))
        }
    }

    /// What a lease timer found.
    enum LeaseCheck: Equatable {
        /// The claim already ended (a token was set, it was released, another claim replaced it).
        case gone
        /// Renewed meanwhile: check again after this many seconds.
        case renewed(TimeInterval)
        /// The lease ran out and the claim ended; the group's pending jwtError goes out again, if any.
        case ended(AuthEvent?)
    }

    /// The timer of claim `id`'s lease fired at `now`.
    mutating func leaseTimerFired(_ group: AppGroup, claim id: UInt64, now: Date) -> LeaseCheck {
        guard let claim = groups[group]?.refreshClaim, claim.id == id else { return .gone }
        let left = claim.until.timeIntervalSince(now)
        // At most one lease: a wall clock set back must not stretch it.
        if left > 0 { return .renewed(min(left, claim.lease)) }
        return .ended(endClaim(group, resend: true, now: now))
    }

    /// Ends the group's claim; with `resend`, the jwtError the group waits on for the claimed generation.
    private mutating func endClaim(_ group: AppGroup, resend: Bool, now: Date) -> AuthEvent? {
        guard let claim = groups[group]?.refreshClaim else { return nil }
        groups[group]?.refreshClaim = nil
        forget(group, claimOf: claim.holder)
        guard resend, let state = groups[group], let pending = state.pendingJwtError,
            pending.generation == state.generation, claim.generation == state.generation
        else { return nil }
        return jwtError(group, reason: pending.reason, now: now, evenWithinWindow: true)
    }

    private mutating func forget(_ group: AppGroup, claimOf holder: UInt64?) {
        guard let holder else { return }
        claimsByHolder[holder]?.remove(group)
        if claimsByHolder[holder]?.isEmpty == true { claimsByHolder[holder] = nil }
    }

    // MARK: Reading

    /// What a new subscriber is told first, so that it acts as one that was there all along: a `state` event
    /// (the token's state, whether a refresh is claimed), then the jwtError the group waits on, if any: the
    /// token's expiry when it is in its last minute or past it (the timer may have fired before anyone listened,
    /// or while the daemon was down, R13), or else the last jwtError of the current generation.
    func currentState(of group: AppGroup, now: Date) -> [AuthEvent] {
        let state = groups[group] ?? GroupState()
        let tokenState = TokenState(state.token, at: now)
        let claimed = state.refreshClaim.map { $0.generation == state.generation && $0.until > now } ?? false
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

    /// A summary of every group, by name.
    func summaries(now: Date, subscribers: (AppGroup) -> Int) -> [GroupSummary] {
        groups.sorted { $0.key < $1.key }.map { group, state in
            GroupSummary(
                name: group.name, hasToken: state.token != nil, state: TokenState(state.token, at: now),
                expiresAt: state.token?.expiresAt.timeIntervalSince1970, generation: state.generation,
                subscribers: subscribers(group))
        }
    }
}
