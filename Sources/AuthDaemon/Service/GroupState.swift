// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the service holds for one app group in memory.
///
/// Every group has a token, an identity and a generation; only a group in use has subscribers, waiters, a
/// refresh lease, recent jwtErrors or a pending flush. Those live out of line (``Activity``, allocated on first
/// use), so that each of 100,000 idle groups takes 56 bytes here instead of 128.
struct GroupState {
    var token: StreamJWT?
    var customerIds: [String: String] = [:]
    /// Grows on every change of token or identity, never goes back while the daemon runs.
    var generation: UInt64 = 0
    var changedAt: Date = .distantPast
    private var activity: ActivityBox?

    init(
        token: StreamJWT? = nil, customerIds: [String: String] = [:], generation: UInt64 = 0,
        changedAt: Date = .distantPast
    ) {
        self.token = token
        self.customerIds = customerIds
        self.generation = generation
        self.changedAt = changedAt
    }

    /// What only a group in use has.
    struct Activity {
        var subscribers: [UInt64: Subscriber] = [:]
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var refreshClaim: RefreshClaim?
        var lastJwtError: [JwtErrorKey: Date] = [:]
        var pendingJwtError: JwtErrorKey?
        var tokenSince: UInt64?
        var pendingFlush: PendingFlush?
        var writing = false
        var waitingToWrite: [CheckedContinuation<Void, Never>] = []
    }

    /// The box ``activity`` lives in; copied before a change when shared, so `GroupState` keeps value semantics.
    private final class ActivityBox {
        var value: Activity
        init(_ value: Activity) { self.value = value }
    }

    private var inUse: Activity {
        get { activity?.value ?? Activity() }
        _modify {
            if activity == nil {
                activity = ActivityBox(Activity())
            } else if !isKnownUniquelyReferenced(&activity) {
                activity = ActivityBox(activity!.value)
            }
            yield &activity!.value
        }
    }

    /// Apps streaming the group's events, by subscription id.
    var subscribers: [UInt64: Subscriber] {
        get { inUse.subscribers }
        _modify { yield &inUse.subscribers }
    }
    /// WaitForToken calls waiting for a newer generation, by waiter id.
    var waiters: [UInt64: CheckedContinuation<Void, Never>] {
        get { inUse.waiters }
        _modify { yield &inUse.waiters }
    }
    /// The generation at which the current token (or its absence) was stored: a set of the same token again,
    /// or a change of identity alone, leaves it (R19: the token was replaced only when it is another token).
    /// Kept out of line, as it differs from ``generation`` only after such a set: an idle group stays small.
    var tokenSince: UInt64 {
        get { activity?.value.tokenSince ?? generation }
        set {
            if newValue != generation {
                inUse.tokenSince = newValue
            } else if activity != nil {
                inUse.tokenSince = nil
            }
        }
    }

    /// The refresh claim: who holds it, for which generation, until when.
    var refreshClaim: RefreshClaim? {
        get { inUse.refreshClaim }
        _modify { yield &inUse.refreshClaim }
    }
    /// The last jwtError sent: the group waits on it while its generation is the current one, and sends it
    /// again when a claimant goes away, and to an app that subscribes.
    var pendingJwtError: JwtErrorKey? {
        get { inUse.pendingJwtError }
        _modify { yield &inUse.pendingJwtError }
    }
    /// When each (reason, generation) jwtError was last sent, to send it once per window.
    var lastJwtError: [JwtErrorKey: Date] {
        get { inUse.lastJwtError }
        _modify { yield &inUse.lastJwtError }
    }
    /// The flush a clear is waiting for.
    var pendingFlush: PendingFlush? {
        get { inUse.pendingFlush }
        _modify { yield &inUse.pendingFlush }
    }

    /// A write of the group's record is running (see `AuthService.writingAlone`).
    var writing: Bool {
        get { inUse.writing }
        _modify { yield &inUse.writing }
    }
    /// Writes of the group's record waiting for the one running, in order.
    var waitingToWrite: [CheckedContinuation<Void, Never>] {
        get { inUse.waitingToWrite }
        _modify { yield &inUse.waitingToWrite }
    }

    /// The customer a jwtError's handler should fetch a token for: the identified customer, or, when none
    /// was identified, the one the current token names.
    var customerIdsForHandler: [String: String] {
        customerIds.isEmpty ? (token?.claims.customerIds ?? [:]) : customerIds
    }

    struct Subscriber {
        /// The process that subscribed, for the log.
        var pid: Int32
        /// Where its events go.
        var sink: any AuthEventSink
    }

    /// A granted ClaimRefresh (R28).
    struct RefreshClaim {
        /// Tells this claim from a later one, for its lease's timer.
        var id: UInt64
        /// The generation being refreshed.
        var generation: UInt64
        /// The connection that holds it; the claim ends when it closes. Nil for a caller without one.
        var holder: UInt64?
        /// How long the lease is: the group's own, or the daemon's.
        var lease: TimeInterval
        /// When the lease ends unless renewed.
        var until: Date
    }

    struct JwtErrorKey: Hashable {
        var reason: JwtErrorReason
        var generation: UInt64
    }

    struct PendingFlush {
        /// Tells this flush from a later one, for its timeout.
        var id: UInt64
        /// The flushIds not yet acknowledged, with the subscription each was sent to and its process.
        var waitingFor: [String: (subscription: UInt64, pid: Int32)]
        /// The subscriptions that ended before they acknowledged.
        var dropped: [UnconfirmedFlush] = []
        /// How many subscriptions were asked.
        var asked: Int
        /// The clears waiting for the flush to end, each told who did not confirm.
        var done: [CheckedContinuation<ClearResult, Never>]
    }
}
