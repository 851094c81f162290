// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

@testable import AuthDaemon

/// The service's events as `AsyncStream`s, for tests that read them in a task: the daemon hands them to
/// connections and to the bus, through sinks and observers.
extension AuthService {
    /// The group's events from now on, for the process `pid`, or nil when the group has its most subscriptions.
    /// The stream ends when the test falls more than ``streamBuffer`` events behind (a bound of the test's own,
    /// as the daemon's connections have theirs), or is cancelled.
    func subscribe(_ group: AppGroup, pid: Int32) -> AsyncStream<AuthEvent>? {
        let (stream, continuation) = AsyncStream.makeStream(
            of: AuthEvent.self, bufferingPolicy: .bufferingOldest(StreamEventSink.streamBuffer))
        guard let id = subscribe(group, pid: pid, sink: StreamEventSink(continuation: continuation)) else {
            return nil
        }
        continuation.onTermination = { [weak self, executor] _ in
            Task(executorPreference: executor) { await self?.unsubscribe(group, subscription: id) }
        }
        return stream
    }

    /// Every group's events as a stream, from now on (the observer stays as long as the service).
    func observeAll() -> AsyncStream<AuthEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: AuthEvent.self, bufferingPolicy: .bufferingNewest(1024))
        observeAll { continuation.yield($0) }
        return stream
    }
}

/// A sink that buffers the events in an `AsyncStream` (at most ``streamBuffer``): past it the stream ends, and
/// the service forgets the subscription as it forgets a closed connection's.
struct StreamEventSink: AuthEventSink {
    static let streamBuffer = 256
    let continuation: AsyncStream<AuthEvent>.Continuation

    func deliver(_ event: OutgoingEvent) -> AuthEventDelivery {
        switch continuation.yield(event.event) {
        case .enqueued:
            return .delivered
        case .dropped:
            continuation.finish()
            return .gone
        case .terminated:
            return .gone
        @unknown default:
            return .gone
        }
    }
}
