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

    /// One group's counts: inline, with no allocation of their own (a daemon that asked 10,000 groups for a token
    /// held a dictionary for each).
    struct Group {
        var refreshesAsked = ReasonCounts()
        var refreshesAnswered: UInt64 = 0
        var refreshSeconds = Sum()
        var expiriesUnrefreshed: UInt64 = 0
        var claims = ClaimCounts()
        /// When the first jwtError since the last token was sent: a refresh is asked for.
        var refreshAskedAt: ContinuousClock.Instant?
    }

    /// A count per jwtError reason: the known ones inline, a reason this version does not know in a dictionary.
    struct ReasonCounts {
        private var known:
            (notProvided: UInt64, invalid: UInt64, expired: UInt64, expiredSoon: UInt64, insufficient: UInt64) =
                (0, 0, 0, 0, 0)
        private var unknown: [String: UInt64] = [:]

        subscript(reason: JwtErrorReason) -> UInt64 {
            get {
                switch reason {
                case .notProvided: known.notProvided
                case .invalid: known.invalid
                case .expired: known.expired
                case .expiredSoon: known.expiredSoon
                case .insufficient: known.insufficient
                case .unknown(let name): unknown[name] ?? 0
                }
            }
            set {
                switch reason {
                case .notProvided: known.notProvided = newValue
                case .invalid: known.invalid = newValue
                case .expired: known.expired = newValue
                case .expiredSoon: known.expiredSoon = newValue
                case .insufficient: known.insufficient = newValue
                case .unknown(let name): unknown[name] = newValue
                }
            }
        }

        /// The reasons counted at least once, with their counts, by the reason's name.
        var nonZero: [(reason: JwtErrorReason, count: UInt64)] {
            let reasons: [JwtErrorReason] =
                [.notProvided, .invalid, .expired, .expiredSoon, .insufficient] + unknown.keys.map { .unknown($0) }
            return reasons.map { ($0, self[$0]) }.filter { $0.count > 0 }.sorted {
                $0.reason.rawValue < $1.reason.rawValue
            }
        }
    }

    /// A count per claim outcome, inline.
    struct ClaimCounts {
        private var counts: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

        subscript(outcome: ClaimOutcome) -> UInt64 {
            get {
                switch outcome {
                case .granted: counts.0
                case .released: counts.1
                case .lapsed: counts.2
                case .holderGone: counts.3
                }
            }
            set {
                switch outcome {
                case .granted: counts.0 = newValue
                case .released: counts.1 = newValue
                case .lapsed: counts.2 = newValue
                case .holderGone: counts.3 = newValue
                }
            }
        }
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
        groups[group, default: Group()].refreshesAsked[reason] += 1
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
        groups[group, default: Group()].claims[outcome] += 1
    }

    /// A write of the store ended, after `duration`.
    mutating func storeWritten(taking duration: Duration, failed: Bool) {
        storeWrites += 1
        if failed { storeWriteFailures += 1 }
        storeWriteSeconds.add(duration)
    }
}
