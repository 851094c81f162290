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

/// ``AuthService``: subscriptions, observers, counts and metrics.
extension AuthService {
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
    func subscriptionEnded(_ ended: SubscriptionHub.Ended) {
        logUnsubscribed(ended.group, pid: ended.pid)
        finish(flushes.subscriptionEnded(ended.group, subscription: ended.id), of: ended.group)
    }

    /// The debug line that pairs with "Subscribed": with both, the log tells how many subscribers a group has.
    func logUnsubscribed(_ group: AppGroup, pid: Int32) {
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

    func countsMayHaveChanged() {
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
}
