// SPDX-License-Identifier: Apache-2.0
import Logging
import Systemd

/// Drives the service's expiry deadlines from a ``WallClockTimer`` watched by a ``MainLoop``: when the timer
/// fires at the earliest deadline, or reports that the wall clock was set, the service is told; it sends the
/// events and re-arms the timer, in the same callback (the service's actor runs on the loop). While no deadline is
/// due the loop does not wake for it.
public enum ExpiryTimerSource {
    /// Watches `timer` on `loop`, whose executor is `service`'s, for as long as the loop runs.
    ///
    /// - Throws: ``SystemdError`` when the loop cannot watch the timer's descriptor.
    public static func watch(_ timer: WallClockTimer, on loop: MainLoop, service: AuthService, logger: Logger)
        throws(SystemdError)
    {
        let watching = Watching()
        watching.source = try loop.onReadable(timer.fileDescriptor) { [unowned loop] in
            do {
                switch try timer.readEvent() {
                case .fired?:
                    service.onLoop { $0.expiryTimerFired() }
                case .clockChanged?:
                    service.onLoop { $0.wallClockChanged() }
                case nil:
                    break
                }
            } catch {
                // A descriptor that stays readable would wake the loop at once again: stop watching it, and
                // try again in a second, re-checking every deadline then.
                logger.error("The expiry timer failed", metadata: ["authd.error": "\(error)"])
                watching.source?.cancel()
                watching.source = nil
                _ = try? loop.after(.seconds(1)) { [unowned loop] in
                    service.onLoop { $0.wallClockChanged() }
                    try? watch(timer, on: loop, service: service, logger: logger)
                }
            }
        }
    }

    /// The source of one watch, for its handler to cancel.
    private final class Watching {
        var source: EventSource?
    }
}
