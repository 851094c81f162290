// SPDX-License-Identifier: Apache-2.0
import Foundation
import Logging
import Synchronization

/// Drives the service's expiry deadlines from a ``WallClockTimer`` on a thread of its own: the timer fires at
/// the earliest deadline, or reports that the wall clock was set, and the loop tells the service, which sends
/// the events and re-arms the timer.
public final class ExpiryTimerLoop: Sendable {
    private let stopped = Atomic<Bool>(false)

    /// Starts the loop's thread for `service`, waiting on `timer`.
    public init(service: AuthService, timer: WallClockTimer, logger: Logger) {
        let thread = Thread { [self] in
            while !stopped.load(ordering: .relaxed) {
                do {
                    // A bounded wait, so that stop() is noticed.
                    switch try timer.wait(timeout: .milliseconds(500)) {
                    case .fired:
                        runBlocking { await service.expiryTimerFired() }
                    case .clockChanged:
                        runBlocking { await service.wallClockChanged() }
                    case .timedOut:
                        continue
                    }
                } catch {
                    logger.error("The expiry timer failed", metadata: ["authd.error": "\(error)"])
                    Thread.sleep(forTimeInterval: 1)
                }
            }
        }
        thread.name = "expiry-timer"
        thread.start()
    }

    /// Stops the loop within half a second.
    public func stop() { stopped.store(true, ordering: .relaxed) }
}
