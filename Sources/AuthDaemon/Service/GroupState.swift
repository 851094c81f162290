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
        var refreshLease: (generation: UInt64, until: Date)?
        var lastJwtError: [JwtErrorKey: Date] = [:]
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
    /// The ClaimRefresh lease: the generation it is for, and until when it holds.
    var refreshLease: (generation: UInt64, until: Date)? {
        get { inUse.refreshLease }
        _modify { yield &inUse.refreshLease }
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

    struct JwtErrorKey: Hashable {
        var reason: JwtErrorReason
        var generation: UInt64
    }

    struct PendingFlush {
        /// Tells this flush from a later one, for its timeout.
        var id: UInt64
        /// The flushIds not yet acknowledged, with the subscription each was sent to.
        var waitingFor: [String: UInt64]
        /// The clears waiting for the flush to end.
        var done: [CheckedContinuation<Void, Never>]
    }
}
