// SPDX-License-Identifier: Apache-2.0
import CTimerFD

#if canImport(Glibc)
    import Glibc
#endif

/// Receives the daemon's control signals synchronously, through a `signalfd(2)`, instead of in a handler.
///
/// Create it on the main thread before any other thread starts: it blocks the signals for the calling thread,
/// and threads started later inherit the mask, so the signals stay pending until the main thread takes them.
/// Its descriptor is polled beside other sources (the start-up's completion, the watchdog's interval), so a
/// SIGTERM is taken at every point of the daemon's life, start-up included.
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

    /// What ended a wait.
    public enum Wake: Equatable, Sendable {
        /// A control signal arrived.
        case signal(Signal)
        /// The other descriptor became readable.
        case readable
        /// The timeout passed first.
        case timedOut
    }

    private var set = sigset_t()
    private let descriptor: Int32

    /// Blocks ``Signal``'s signals in the calling thread (and in the threads it starts from now on).
    public init() {
        sigemptyset(&set)
        for signal in Signal.allCases { sigaddset(&set, signal.rawValue) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        descriptor = signalfd(-1, &set, Int32(SFD_CLOEXEC | SFD_NONBLOCK))
        precondition(descriptor >= 0, "signalfd: \(String(cString: strerror(errno)))")
    }

    deinit { close(descriptor) }

    /// Waits for the next signal, at most `timeout` when one is given.
    ///
    /// - Returns: The signal, or nil when the timeout passed first.
    public mutating func next(timeout: Duration?) -> Signal? {
        if case .signal(let signal) = wait(orReadable: nil, timeout: timeout) { return signal }
        return nil
    }

    /// Waits for the next signal, or until `other` is readable, or `timeout` passed (nil: no timeout). A
    /// pending signal is reported first.
    public mutating func wait(orReadable other: Int32?, timeout: Duration?) -> Wake {
        let clock = ContinuousClock()
        let end = timeout.map { clock.now.advanced(by: $0) }
        while true {
            if let signal = take() { return .signal(signal) }
            var sources = [pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)]
            if let other { sources.append(pollfd(fd: other, events: Int16(POLLIN), revents: 0)) }
            var milliseconds: Int32 = -1
            if let end {
                let left = max(.zero, clock.now.duration(to: end))
                let (seconds, attoseconds) = left.components
                milliseconds = Int32(
                    clamping: seconds * 1_000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
            }
            let ready = poll(&sources, nfds_t(sources.count), milliseconds)
            if ready < 0 && errno != EINTR { return .timedOut }
            if let signal = take() { return .signal(signal) }
            if sources.count > 1 && sources[1].revents != 0 { return .readable }
            if let end, clock.now >= end { return .timedOut }
        }
    }

    /// A pending control signal, if any.
    private func take() -> Signal? {
        var info = signalfd_siginfo()
        while true {
            let count = read(descriptor, &info, MemoryLayout<signalfd_siginfo>.size)
            if count == MemoryLayout<signalfd_siginfo>.size {
                if let signal = Signal(rawValue: Int32(info.ssi_signo)) { return signal }
                continue
            }
            if count < 0 && errno == EINTR { continue }
            return nil
        }
    }
}
