// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

/// The flush handshake before Anonymize and StopIntegration clear a group (R8): each subscription is asked with a
/// flushId of its own, and the clear waits until each has acknowledged, has ended, or the bound passed.
///
/// A plain value over the clears that wait (`Waiter`: a continuation in the service, anything in a test): it
/// decides when a flush is over and with what result; ``AuthService`` sends the requests, arms the bound's timer,
/// and resumes the waiters it gets back.
struct FlushCoordinator<Waiter> {
    /// A flush that ended: the clears to resume, and with what.
    struct Finished {
        var waiters: [Waiter]
        var result: ClearResult
        /// How many acknowledgements the bound cut off.
        var timedOut: Int
        /// How many subscriptions ended before they acknowledged.
        var dropped: Int
    }

    private struct Pending {
        /// Tells this flush from a later one, for its timeout.
        var id: UInt64
        /// The flushIds not yet acknowledged, with the subscription each was sent to and its process.
        var waitingFor: [String: (subscription: UInt64, pid: Int32)]
        /// The subscriptions that ended before they acknowledged.
        var dropped: [UnconfirmedFlush] = []
        /// How many subscriptions were asked.
        var asked: Int
        /// The clears waiting for the flush to end.
        var done: [Waiter]
    }

    private var pending: [AppGroup: Pending] = [:]

    /// Whether a flush of `group` is under way.
    func isPending(_ group: AppGroup) -> Bool { pending[group] != nil }

    /// Another clear waits for the flush under way: false when there is none.
    mutating func join(_ group: AppGroup, _ waiter: Waiter) -> Bool {
        guard pending[group] != nil else { return false }
        pending[group]?.done.append(waiter)
        return true
    }

    /// Starts flush `id` of `group`: the clear `waiter` waits until every flushId in `requests` is acknowledged
    /// or its subscription ends, or ``timedOut(_:flush:)``.
    mutating func begin(
        _ group: AppGroup, id: UInt64, requests: [String: (subscription: UInt64, pid: Int32)], waiter: Waiter
    ) {
        pending[group] = Pending(id: id, waitingFor: requests, asked: requests.count, done: [waiter])
    }

    /// The app that was sent `flushId` has flushed: the flush, when that was the last one.
    mutating func acknowledge(_ group: AppGroup, flushId: String) -> Finished? {
        guard pending[group]?.waitingFor.removeValue(forKey: flushId) != nil else { return nil }
        return finishIfDone(group)
    }

    /// A subscription ended: it will not acknowledge, and counts as not confirmed (dropped).
    mutating func subscriptionEnded(_ group: AppGroup, subscription: UInt64) -> Finished? {
        guard let flushId = pending[group]?.waitingFor.first(where: { $0.value.subscription == subscription })?.key,
            let entry = pending[group]?.waitingFor.removeValue(forKey: flushId)
        else { return nil }
        pending[group]?.dropped.append(UnconfirmedFlush(pid: entry.pid, reason: .dropped))
        return finishIfDone(group)
    }

    /// The bound of flush `id` passed: whoever has not acknowledged counts as not confirmed (timedOut).
    mutating func timedOut(_ group: AppGroup, flush id: UInt64) -> Finished? {
        guard let flush = pending[group], flush.id == id else { return nil }
        return finish(group)
    }

    private mutating func finishIfDone(_ group: AppGroup) -> Finished? {
        guard pending[group]?.waitingFor.isEmpty == true else { return nil }
        return finish(group)
    }

    private mutating func finish(_ group: AppGroup) -> Finished? {
        guard let flush = pending.removeValue(forKey: group) else { return nil }
        let late = flush.waitingFor.values.map { UnconfirmedFlush(pid: $0.pid, reason: .timedOut) }
        let unconfirmed = (flush.dropped + late).sorted { ($0.pid, $0.reason.rawValue) < ($1.pid, $1.reason.rawValue) }
        return Finished(
            waiters: flush.done, result: ClearResult(asked: flush.asked, unconfirmed: unconfirmed),
            timedOut: late.count, dropped: flush.dropped.count)
    }
}
