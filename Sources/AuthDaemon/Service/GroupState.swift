// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What ``GroupTable`` holds for one app group.
///
/// Every group has a token and a generation; only a group in use has an identity set by IdentifyCustomer, a refresh
/// claim, recent jwtErrors, or a token set again without change. Those live out of line (``Activity``, allocated on
/// first use), so that each of 100,000 idle groups stays small. Subscribers, waiters, a pending flush and the write queue are
/// not here: ``SubscriptionHub``, ``WaitList``, ``FlushCoordinator`` and ``WriteQueue`` hold them, for the few
/// groups that have any.
struct GroupState {
    var token: StreamJWT?
    /// Grows on every change of token or identity, never goes back while the daemon runs.
    var generation: UInt64 = 0
    var changedAt: Date = .distantPast
    private var activity: ActivityBox?

    init(
        token: StreamJWT? = nil, customerIds: [String: String] = [:], generation: UInt64 = 0,
        changedAt: Date = .distantPast
    ) {
        self.token = token
        self.generation = generation
        self.changedAt = changedAt
        self.customerIds = customerIds
    }

    /// What only a group in use has.
    struct Activity {
        var customerIds: [String: String] = [:]
        var refreshClaim: RefreshClaim?
        var lastJwtError: [JwtErrorKey: Date] = [:]
        var pendingJwtError: JwtErrorKey?
        var tokenSince: UInt64?
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

    /// The identified customer (IdentifyCustomer, R7), or none. Kept out of line: most groups have none.
    var customerIds: [String: String] {
        get { activity?.value.customerIds ?? [:] }
        set {
            if !newValue.isEmpty || activity != nil { inUse.customerIds = newValue }
        }
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
        get { activity?.value.refreshClaim }
        _modify { yield &inUse.refreshClaim }
    }
    /// The last jwtError sent: the group waits on it while its generation is the current one, and sends it
    /// again when a claimant goes away, and to an app that subscribes.
    var pendingJwtError: JwtErrorKey? {
        get { activity?.value.pendingJwtError }
        _modify { yield &inUse.pendingJwtError }
    }
    /// When each (reason, generation) jwtError was last sent, to send it once per window.
    var lastJwtError: [JwtErrorKey: Date] {
        get { activity?.value.lastJwtError ?? [:] }
        _modify { yield &inUse.lastJwtError }
    }

    /// The customer a jwtError's handler should fetch a token for: the identified customer, or, when none
    /// was identified, the one the current token names.
    var customerIdsForHandler: [String: String] {
        customerIds.isEmpty ? (token?.claims.customerIds ?? [:]) : customerIds
    }

    /// A granted ClaimRefresh (R28).
    struct RefreshClaim: Equatable {
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
}
