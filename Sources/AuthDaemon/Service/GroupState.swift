import AuthCore
import AuthProtocol
import Foundation

/// What the service holds for one app group in memory.
struct GroupState {
    var token: StreamJWT?
    var customerIds: [String: String] = [:]
    /// Grows on every change of token or identity, never goes back while the daemon runs.
    var generation: UInt64 = 0
    var changedAt: Date = .distantPast
    /// Apps streaming the group's events, by subscription id.
    var subscribers: [UInt64: Subscriber] = [:]
    /// WaitForToken calls waiting for a newer generation, by waiter id.
    var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    /// The ClaimRefresh lease: the generation it is for, and until when it holds.
    var refreshLease: (generation: UInt64, until: Date)?
    /// When each (reason, generation) jwtError was last sent, to send it once per window.
    var lastJwtError: [JwtErrorKey: Date] = [:]
    /// The flush a clear is waiting for.
    var pendingFlush: PendingFlush?

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
