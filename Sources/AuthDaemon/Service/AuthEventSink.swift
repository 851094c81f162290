// SPDX-License-Identifier: Apache-2.0
import AuthProtocol

/// Where one subscription's events go. The service hands each event over on its actor, in order, and waits for
/// nothing: a sink passes the event on at once (to a connection's output).
protocol AuthEventSink: Sendable {
    /// Passes `event` on, unless the subscriber is gone. A subscriber that does not read is the transport's to
    /// bound: its connection closes past its bound on unsent output.
    func deliver(_ event: OutgoingEvent) -> AuthEventDelivery
}

/// What became of an event handed to a subscription's sink.
enum AuthEventDelivery: Sendable {
    /// Passed on.
    case delivered
    /// Not passed on: the subscriber is gone, and the service forgets it.
    case gone
}
