// SPDX-License-Identifier: Apache-2.0

/// A connection's calls that its event loop does not answer at once, and the task that runs them in order.
///
/// The task starts with the first such call. A connection whose every call is answered on the loop (the one
/// GetToken of `authctl get` or of an app's first call) never starts one: its accept, call and close stay on
/// its event loop, and no other thread wakes for it.
///
/// Not `Sendable`: made and used on the connection's event loop.
final class ConnectionCallQueue {
    private let startTask: (AsyncStream<InboundCall>) -> Void
    private var continuation: AsyncStream<InboundCall>.Continuation?

    /// - Parameter startTask: Starts the task that takes the calls from the stream, called once, on the first
    ///   call ``yield(_:)`` is given.
    init(startTask: @escaping (AsyncStream<InboundCall>) -> Void) {
        self.startTask = startTask
    }

    /// Whether the task runs: once its last call is done, it closes a connection whose peer shut down its side.
    var hasTask: Bool { continuation != nil }

    /// Hands `call` to the task, starting the task first if it has not started.
    func yield(_ call: InboundCall) {
        if let continuation {
            continuation.yield(call)
            return
        }
        let (stream, continuation) = AsyncStream.makeStream(of: InboundCall.self)
        self.continuation = continuation
        startTask(stream)
        continuation.yield(call)
    }

    /// No more calls will come: the task ends after the ones it was given.
    func finish() {
        continuation?.finish()
    }
}
