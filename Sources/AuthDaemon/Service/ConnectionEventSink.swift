// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import AuthTransport
import Synchronization

/// A Subscribe call's sink: hands each event, encoded once for all of the group's subscribers, straight to the
/// caller's connection, with no task in between. The call waits in ``end()`` until the subscription ends.
final class ConnectionEventSink: AuthEventSink {
    /// Why a subscription ended.
    enum Ending: Sendable {
        /// The connection is gone: a reply could not be sent.
        case connectionGone
        /// The call's task was cancelled: the transport cancels it when the connection closes.
        case cancelled
    }

    private enum State {
        case open(waiter: CheckedContinuation<Ending, Never>?)
        case ended(Ending)
    }

    private let replies: VarlinkReplies
    private let state = Mutex(State.open(waiter: nil))

    /// - Parameter replies: The Subscribe call's replies.
    init(replies: VarlinkReplies) {
        self.replies = replies
    }

    /// Hands the event's reply to the connection, which writes it at once: a subscriber that does not read is
    /// closed by its connection's bound on unsent output, not dropped here.
    func deliver(_ event: OutgoingEvent) -> AuthEventDelivery {
        do {
            try replies.send(event.subscribeReply())
            return .delivered
        } catch {
            finish(.connectionGone)
            return .gone
        }
    }

    /// Waits until the subscription ends, and tells why.
    func end() async -> Ending {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ended: Ending? = state.withLock { state in
                    guard case .ended(let ending) = state else {
                        state = .open(waiter: continuation)
                        return nil
                    }
                    return ending
                }
                if let ended { continuation.resume(returning: ended) }
            }
        } onCancel: {
            finish(.cancelled)
        }
    }

    private func finish(_ ending: Ending) {
        let waiter = state.withLock { state -> CheckedContinuation<Ending, Never>? in
            guard case .open(let waiter) = state else { return nil }
            state = .ended(ending)
            return waiter
        }
        waiter?.resume(returning: ending)
    }
}
