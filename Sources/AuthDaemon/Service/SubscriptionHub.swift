// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

/// Who hears a group's events: its subscriptions (each a sink, bounded per group), and the observers of every
/// group's events (the D-Bus announcer). A plain value: ``AuthService`` owns it on its actor and hands each event
/// over in order; a sink passes it on at once and waits for nothing.
struct SubscriptionHub {
    struct Subscriber {
        /// The process that subscribed, for the log and the flush's result.
        var pid: Int32
        /// Where its events go.
        var sink: any AuthEventSink
    }

    /// A subscription that ended while an event was handed over.
    struct Ended: Equatable {
        var group: AppGroup
        var id: UInt64
        var pid: Int32
    }

    /// Subscriptions one group may have at once.
    let maximumPerGroup: Int
    private var subscribers: [AppGroup: [UInt64: Subscriber]] = [:]
    private var observers: [UInt64: @Sendable (AuthEvent) -> Void] = [:]

    init(maximumPerGroup: Int) { self.maximumPerGroup = maximumPerGroup }

    /// How many subscriptions `group` has.
    func count(of group: AppGroup) -> Int { subscribers[group]?.count ?? 0 }

    /// The subscriptions of every group.
    var total: Int { subscribers.values.reduce(0) { $0 + $1.count } }

    /// The group's subscriptions, by id.
    func subscribers(of group: AppGroup) -> [UInt64: Subscriber] { subscribers[group] ?? [:] }

    /// Adds a subscription, unless the group already has ``maximumPerGroup``.
    mutating func add(_ group: AppGroup, id: UInt64, _ subscriber: Subscriber) -> Bool {
        guard count(of: group) < maximumPerGroup else { return false }
        subscribers[group, default: [:]][id] = subscriber
        return true
    }

    /// Forgets a subscription; the one forgotten, or nil when it was not there.
    mutating func remove(_ group: AppGroup, id: UInt64) -> Subscriber? {
        guard let removed = subscribers[group]?.removeValue(forKey: id) else { return nil }
        if subscribers[group]?.isEmpty == true { subscribers[group] = nil }
        return removed
    }

    mutating func addObserver(_ id: UInt64, _ observer: @escaping @Sendable (AuthEvent) -> Void) {
        observers[id] = observer
    }

    mutating func removeObserver(_ id: UInt64) { observers[id] = nil }

    /// Hands `event` to every subscription of `group` and to every observer. The event is encoded once for all
    /// of them. A subscription that is gone is forgotten.
    ///
    /// - Returns: The subscriptions that ended.
    mutating func send(_ event: AuthEvent, to group: AppGroup) -> [Ended] {
        let outgoing = OutgoingEvent(event)
        var ended: [Ended] = []
        for (id, subscriber) in subscribers[group] ?? [:] {
            if let end = deliver(outgoing, to: subscriber, id, of: group) { ended.append(end) }
        }
        for observer in observers.values { observer(event) }
        return ended
    }

    /// Hands `event` to one subscription only (a flush request, the state a new subscriber is told first).
    mutating func send(_ event: AuthEvent, to group: AppGroup, subscription id: UInt64) -> Ended? {
        guard let subscriber = subscribers[group]?[id] else { return nil }
        return deliver(OutgoingEvent(event), to: subscriber, id, of: group)
    }

    private mutating func deliver(
        _ event: OutgoingEvent, to subscriber: Subscriber, _ id: UInt64, of group: AppGroup
    ) -> Ended? {
        switch subscriber.sink.deliver(event) {
        case .delivered:
            return nil
        case .gone:
            _ = remove(group, id: id)
            return Ended(group: group, id: id, pid: subscriber.pid)
        }
    }
}

/// One event on its way to a group's subscriptions: encoded as a Subscribe reply at most once, by the first sink
/// that needs the bytes, so a group's thousand subscribers share one encoding. Lives only while the hub hands it
/// over, on the service's actor.
final class OutgoingEvent {
    let event: AuthEvent
    private var reply: [UInt8]?

    init(_ event: AuthEvent) { self.event = event }

    /// The `continues: true` Subscribe reply carrying the event.
    func subscribeReply() throws -> [UInt8] {
        if let reply { return reply }
        let encoded = try VarlinkReplyEncoder.reply(SubscribeResult(event: event), continues: true)
        reply = encoded
        return encoded
    }
}
