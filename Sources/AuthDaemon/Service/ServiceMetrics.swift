// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What ``AuthService`` counts for the metrics, in its actor's turns: per group, the refreshes and claims; for
/// the store, its writes. Counters only grow while the daemon runs; a cleared group keeps its counts.
struct ServiceMetrics {
    /// How a refresh claim ended, or that it was granted.
    enum ClaimOutcome: String, CaseIterable {
        case granted
        case released
        case lapsed
        case holderGone
    }

    /// One group's counts.
    struct Group {
        var refreshesAsked: [JwtErrorReason: UInt64] = [:]
        var refreshesAnswered: UInt64 = 0
        var refreshSeconds = Sum()
        var expiriesUnrefreshed: UInt64 = 0
        var claims: [ClaimOutcome: UInt64] = [:]
        /// When the first jwtError since the last token was sent: a refresh is asked for.
        var refreshAskedAt: ContinuousClock.Instant?
    }

    /// A count of observations and their sum, as Prometheus' summaries without quantiles.
    struct Sum {
        var count: UInt64 = 0
        var seconds: Double = 0

        mutating func add(_ duration: Duration) {
            count += 1
            seconds += Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
    }

    private(set) var groups: [AppGroup: Group] = [:]
    private(set) var storeWrites: UInt64 = 0
    private(set) var storeWriteFailures: UInt64 = 0
    private(set) var storeWriteSeconds = Sum()

    /// A jwtError went to the group's apps.
    mutating func refreshAsked(_ group: AppGroup, reason: JwtErrorReason, at now: ContinuousClock.Instant) {
        groups[group, default: Group()].refreshesAsked[reason, default: 0] += 1
        if groups[group]!.refreshAskedAt == nil { groups[group]!.refreshAskedAt = now }
    }

    /// The group's token reached its expiry (the timer's `expired`) with no new token set.
    mutating func expiryReached(_ group: AppGroup) {
        groups[group, default: Group()].expiriesUnrefreshed += 1
    }

    /// A token was set for the group: it answers a refresh asked for since the last one.
    mutating func tokenSet(_ group: AppGroup, at now: ContinuousClock.Instant) {
        guard let asked = groups[group]?.refreshAskedAt else { return }
        groups[group]!.refreshAskedAt = nil
        groups[group]!.refreshesAnswered += 1
        groups[group]!.refreshSeconds.add(asked.duration(to: now))
    }

    /// The group's data was cleared: a refresh asked for before is no longer awaited.
    mutating func cleared(_ group: AppGroup) {
        guard groups[group]?.refreshAskedAt != nil else { return }
        groups[group]!.refreshAskedAt = nil
    }

    mutating func claim(_ group: AppGroup, _ outcome: ClaimOutcome) {
        groups[group, default: Group()].claims[outcome, default: 0] += 1
    }

    /// A write of the store ended, after `duration`.
    mutating func storeWritten(taking duration: Duration, failed: Bool) {
        storeWrites += 1
        if failed { storeWriteFailures += 1 }
        storeWriteSeconds.add(duration)
    }
}
