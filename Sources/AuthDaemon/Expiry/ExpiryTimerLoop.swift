// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Drives the service's expiry deadlines from a ``WallClockTimer`` on a thread of its own: the timer fires at
/// the earliest deadline, or reports that the wall clock was set, and the loop tells the service, which sends
/// the events and re-arms the timer.
///
/// The thread sleeps in `poll` on the timer and a stop event, with no timeout: while no deadline is due it never
/// wakes.
public final class ExpiryTimerLoop: Sendable {
    private let stopped = Atomic<Bool>(false)
    private let stopEvent = WakeUpEvent()

    /// Starts the loop's thread for `service`, waiting on `timer`.
    public init(service: AuthService, timer: WallClockTimer, logger: Logger) {
        DaemonThread.start(name: "expiry-timer") { [self] in
            while !stopped.load(ordering: .acquiring) {
                guard stopEvent.wait(orReadable: timer.fileDescriptor) else { continue }
                do {
                    switch try timer.readEvent() {
                    case .fired?:
                        runBlocking { await service.expiryTimerFired() }
                    case .clockChanged?:
                        runBlocking { await service.wallClockChanged() }
                    case .timedOut?, nil:
                        continue
                    }
                } catch {
                    logger.error("The expiry timer failed", metadata: ["authd.error": "\(error)"])
                    sleep(1)
                }
            }
        }
    }

    /// Stops the loop: its thread wakes at once and ends.
    public func stop() {
        stopped.store(true, ordering: .releasing)
        stopEvent.signal()
    }
}
