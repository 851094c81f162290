// SPDX-License-Identifier: Apache-2.0
import CTimerFD
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// An `eventfd(2)`: one thread signals, another polls ``fileDescriptor`` among its other sources and is woken
/// at once, with no timeout to notice it.
final class WakeUpEvent: Sendable {
    /// Readable once ``signal()`` was called, until ``drain()``.
    let fileDescriptor: Int32

    init() {
        fileDescriptor = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        precondition(fileDescriptor >= 0, "eventfd: \(String(cString: strerror(errno)))")
    }

    deinit { close(fileDescriptor) }

    /// Makes ``fileDescriptor`` readable.
    func signal() {
        _ = eventfd_write(fileDescriptor, 1)
    }

    /// Makes ``fileDescriptor`` unreadable again.
    func drain() {
        var value: eventfd_t = 0
        _ = eventfd_read(fileDescriptor, &value)
    }

    /// Waits until ``signal()`` was called or `other` (when given) is readable, with no timeout.
    ///
    /// - Returns: Whether `other` is readable.
    func wait(orReadable other: Int32? = nil) -> Bool {
        var sources = [pollfd(fd: fileDescriptor, events: Int16(POLLIN), revents: 0)]
        if let other { sources.append(pollfd(fd: other, events: Int16(POLLIN), revents: 0)) }
        while poll(&sources, nfds_t(sources.count), -1) < 0 && errno == EINTR {}
        return sources.count > 1 && sources[1].revents != 0
    }
}

/// The outcome of work on another thread, handed to the thread that waits for it beside its signals.
final class Completion<Value: Sendable>: Sendable {
    /// Readable once the outcome is set.
    var fileDescriptor: Int32 { event.fileDescriptor }
    private let event = WakeUpEvent()
    private let outcome = Mutex<Result<Value, any Error>?>(nil)

    /// Sets the outcome and wakes the waiter.
    func finish(_ result: Result<Value, any Error>) {
        outcome.withLock { $0 = result }
        event.signal()
    }

    /// The outcome, once set.
    var result: Result<Value, any Error>? { outcome.withLock { $0 } }
}
