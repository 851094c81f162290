// SPDX-License-Identifier: Apache-2.0
import AuthProtocol

/// Where one subscription's events go. The service hands each event over on its actor, in order, and waits for
/// nothing: a sink passes the event on at once (to a connection's output).
protocol AuthEventSink: Sendable {
    /// Passes `event` on, unless the subscriber is gone or has ``AuthService/subscriberBuffer`` events it has
    /// not taken yet.
    func deliver(_ event: OutgoingEvent) -> AuthEventDelivery

    /// The service dropped the subscription for falling behind: no event comes any more.
    func dropped()
}

/// What became of an event handed to a subscription's sink.
enum AuthEventDelivery: Sendable {
    /// Passed on.
    case delivered
    /// Not passed on: the subscriber has too many events it has not taken yet, and the service drops it.
    case overflowed
    /// Not passed on: the subscriber is gone, and the service forgets it.
    case gone
}
