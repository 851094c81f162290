// SPDX-License-Identifier: Apache-2.0
import CSystemd
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Messages from any thread to the thread that runs a ``MainLoop``: ``send(_:)`` queues a message and makes an
/// `eventfd(2)` readable; the loop, which watches it, hands each message to the receiver on its own thread. The
/// only way into the loop from outside it, so the loop's state needs no lock.
///
/// With a ``limit``, the oldest messages are dropped when a sender gets that far ahead of the loop.
public final class LoopInbox<Message: Sendable>: Sendable {
    /// Readable while messages are queued.
    private let descriptor: Int32
    private let queue = Mutex<[Message]>([])
    /// The most messages kept; nil for no bound.
    public let limit: Int?

    /// Creates an empty inbox.
    ///
    /// - Throws: ``SystemdError`` from `eventfd`.
    public init(limit: Int? = nil) throws(SystemdError) {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard descriptor >= 0 else {
            throw SystemdError(code: .eventLoop, function: "eventfd", errno: errno, context: "cannot create an inbox")
        }
        self.descriptor = descriptor
        self.limit = limit
    }

    deinit { close(descriptor) }

    /// Queues `message` for the loop's thread; returns at once. Callable from any thread.
    public func send(_ message: Message) {
        let wake = queue.withLock { queue in
            queue.append(message)
            if let limit, queue.count > limit { queue.removeFirst(queue.count - limit) }
            return queue.count == 1
        }
        // One write per batch: the loop takes the whole queue when it wakes.
        if wake { _ = eventfd_write(descriptor, 1) }
    }

    /// Hands every message, in the order sent, to `receiver` on `loop`'s thread from now on.
    @discardableResult
    public func receive(on loop: MainLoop, _ receiver: @escaping (Message) -> Void) throws(SystemdError)
        -> EventSource
    {
        try loop.onReadable(descriptor) { [self] in
            var count: eventfd_t = 0
            _ = eventfd_read(descriptor, &count)
            let messages = queue.withLock { queue in
                defer { queue.removeAll() }
                return queue
            }
            for message in messages { receiver(message) }
        }
    }
}
