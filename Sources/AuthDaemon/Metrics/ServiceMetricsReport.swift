// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Writes what ``AuthService`` holds and counts as `io.systemd.Metrics` figures, family by family (a family's
/// figures together, as Prometheus' text format wants them), groups sorted by name.
struct ServiceMetricsReport {
    var table: GroupTable
    var metrics: ServiceMetrics
    var subscribers: Int
    var recordsSetAside: UInt64
    var now: Date

    func write(_ writer: inout MetricsReplyWriter, visible: (AppGroup) -> Bool) {
        var names = Set(table.groups.keys)
        names.formUnion(metrics.groups.keys)
        let groups = names.filter(visible).sorted { $0.name < $1.name }
        writeStates(groups, &writer)
        // Each group's state read once; each family's name made once.
        let states = groups.map { table[$0] }
        let secondsLeft = MetricsReplyWriter.Family(MetricFamily.tokenSecondsLeft.name)
        for (group, state) in zip(groups, states) {
            guard let expiresAt = state?.token?.expiresAt else { continue }
            let left = Int64(expiresAt.timeIntervalSince(now).rounded(.down))
            writer.append(secondsLeft, object: group.name, value: .signed(left))
        }
        let generation = MetricsReplyWriter.Family(MetricFamily.generation.name)
        for (group, state) in zip(groups, states) {
            writer.append(generation, object: group.name, value: .unsigned(state?.generation ?? 0))
        }
        let setTime = MetricsReplyWriter.Family(MetricFamily.tokenSetTime.name)
        for (group, state) in zip(groups, states) {
            guard let changedAt = state?.changedAt, changedAt != .distantPast else { continue }
            let seconds = Int64(changedAt.timeIntervalSince1970.rounded(.down))
            writer.append(setTime, object: group.name, value: .signed(seconds))
        }
        for group in groups {
            let asked = metrics.groups[group]?.refreshesAsked ?? ServiceMetrics.ReasonCounts()
            for (reason, count) in asked.nonZero {
                writer.append(
                    name: MetricFamily.refreshesAsked.name, object: group.name, fields: [("reason", reason.rawValue)],
                    value: .unsigned(count))
            }
        }
        let counted = groups.map { metrics.groups[$0] ?? ServiceMetrics.Group() }
        writePerGroup(.refreshesAnswered, groups, counted, &writer) { .unsigned($0.refreshesAnswered) }
        writePerGroup(.refreshDurationCount, groups, counted, &writer) { .unsigned($0.refreshSeconds.count) }
        writePerGroup(.refreshDurationSum, groups, counted, &writer) { .double($0.refreshSeconds.seconds) }
        writePerGroup(.expiriesUnrefreshed, groups, counted, &writer) { .unsigned($0.expiriesUnrefreshed) }
        for group in groups {
            let claims = metrics.groups[group]?.claims ?? ServiceMetrics.ClaimCounts()
            for outcome in ServiceMetrics.ClaimOutcome.allCases {
                let count = claims[outcome]
                guard count > 0 else { continue }
                writer.append(
                    name: MetricFamily.claims.name, object: group.name, fields: [("outcome", outcome.rawValue)],
                    value: .unsigned(count))
            }
        }
        writer.append(name: MetricFamily.subscribers.name, value: .unsigned(UInt64(subscribers)))
        writer.append(name: MetricFamily.storeWrites.name, value: .unsigned(metrics.storeWrites))
        writer.append(name: MetricFamily.storeWriteFailures.name, value: .unsigned(metrics.storeWriteFailures))
        writer.append(
            name: MetricFamily.storeWriteDurationCount.name, value: .unsigned(metrics.storeWriteSeconds.count))
        writer.append(name: MetricFamily.storeWriteDurationSum.name, value: .double(metrics.storeWriteSeconds.seconds))
        writer.append(name: MetricFamily.recordsSetAside.name, value: .unsigned(recordsSetAside))
    }

    /// The count of groups in each token state, every state listed.
    private func writeStates(_ groups: [AppGroup], _ writer: inout MetricsReplyWriter) {
        var counts: [TokenState: UInt64] = [:]
        for group in groups { counts[TokenState(table[group]?.token, at: now), default: 0] += 1 }
        for state in [TokenState.valid, .expiredSoon, .expired, .notProvided] {
            writer.append(
                name: MetricFamily.groups.name, fields: [("state", state.rawValue)],
                value: .unsigned(counts[state] ?? 0))
        }
    }

    /// One figure of `family` for every group, 0 for a group with nothing counted.
    private func writePerGroup(
        _ family: MetricFamily, _ groups: [AppGroup], _ counted: [ServiceMetrics.Group],
        _ writer: inout MetricsReplyWriter, _ value: (ServiceMetrics.Group) -> MetricsInterface.Value
    ) {
        let name = MetricsReplyWriter.Family(family.name)
        for (group, counts) in zip(groups, counted) {
            writer.append(name, object: group.name, value: value(counts))
        }
    }
}
