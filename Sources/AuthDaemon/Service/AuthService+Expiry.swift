// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import Logging
import Synchronization
import Systemd

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// ``AuthService``: the expiry timer's events (R13, R14).
extension AuthService {
    /// Sends what the loaded tokens' deadlines call for (a token that entered its last minute, or expired,
    /// while the daemon was down fires at once, R13) and arms the timer. Call once observers are attached.
    public func start() {
        let events = startupEvents
        startupEvents = []
        deliver(events, atStart: true)
    }

    /// The expiry timer's descriptor, for the loop to watch (``ExpiryTimerSource``); nil when the service has no
    /// timer.
    public var expiryTimerDescriptor: Int32? { timer?.fileDescriptor }

    /// The expiry timer's descriptor is readable: the timer fired, or the wall clock was set.
    ///
    /// - Throws: ``WallClockTimerError`` when the timer cannot be read or re-armed.
    public func expiryTimerReadable() throws(WallClockTimerError) {
        switch try timer?.readEvent() {
        case .fired?: expiryTimerFired()
        case .clockChanged?: wallClockChanged()
        case nil: break
        }
    }

    /// The wall-clock timer fired: sends the events that are due and re-arms.
    public func expiryTimerFired() {
        deliver(expiry.fireDue(now: clock.now))
    }

    /// The wall clock was set: re-evaluates every deadline against the new time and re-arms (R14). Logs a notice,
    /// at most one per ``LogThrottle/defaultInterval`` with the count of the sets since the last.
    public func wallClockChanged() {
        if let count = clockChangeLog.admit("wall clock set") {
            logger.notice("The wall clock changed; re-checking every token's expiry\(LogThrottle.suffix(count))")
        }
        deliver(expiry.clockChanged(now: clock.now))
    }

    /// Sends the events' jwtErrors and re-arms the timer. A token that expires while the daemon runs is an
    /// operator's event, logged; one found expired at start is not logged twice: its jwtError line (reason
    /// `expired`) says it, and the metrics count it.
    func deliver(_ events: [ExpiryEvent], atStart: Bool = false) {
        let now = clock.now
        for event in events {
            if event.reason == .expired {
                metrics.expiryReached(event.group)
                if !atStart {
                    logger.warning(
                        "Token expired and no new token was set",
                        metadata: OperatorEvent.expiredUnrefreshed.metadata(
                            group: event.group.name, generation: table[event.group]?.generation
                        ) { .string($0) })
                }
            }
            sendJwtError(table.jwtError(event.group, reason: event.reason, now: now), to: event.group)
        }
        guard let timer else { return }
        do {
            try timer.arm(at: expiry.nextDeadline)
        } catch {
            logger.error("Cannot arm the expiry timer", metadata: ["authd.error": "\(error)"])
        }
    }
}
