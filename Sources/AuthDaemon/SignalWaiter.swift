// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// Receives the daemon's control signals synchronously, with `sigtimedwait`, instead of in a handler.
///
/// Create it on the main thread before any other thread starts: it blocks the signals for the calling thread,
/// and threads started later inherit the mask, so the signals stay pending until ``next(timeout:)`` takes them.
public struct SignalWaiter: ~Copyable {
    /// A signal the daemon acts on.
    public enum Signal: Int32, Sendable, CaseIterable {
        /// Stop gracefully (what `systemctl stop` sends).
        case terminate = 15  // SIGTERM
        /// Stop gracefully (Ctrl-C at a terminal).
        case interrupt = 2  // SIGINT
        /// Reload the configuration.
        case hangUp = 1  // SIGHUP
    }

    private var set = sigset_t()

    /// Blocks ``Signal``'s signals in the calling thread (and in the threads it starts from now on).
    public init() {
        sigemptyset(&set)
        for signal in Signal.allCases { sigaddset(&set, signal.rawValue) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Waits for the next signal, at most `timeout` when one is given.
    ///
    /// - Returns: The signal, or nil when the timeout passed first.
    public mutating func next(timeout: Duration?) -> Signal? {
        while true {
            let received: Int32
            if let timeout {
                let (seconds, attoseconds) = timeout.components
                var spec = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
                received = sigtimedwait(&set, nil, &spec)
            } else {
                received = sigwaitinfo(&set, nil)
            }
            if received < 0 {
                if errno == EINTR { continue }
                return nil  // EAGAIN: the timeout passed
            }
            if let signal = Signal(rawValue: received) { return signal }
        }
    }
}
