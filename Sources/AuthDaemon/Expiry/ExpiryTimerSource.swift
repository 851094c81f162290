// SPDX-License-Identifier: Apache-2.0
import Logging
import Systemd

/// Drives the service's expiry deadlines from its ``WallClockTimer``, watched by a ``MainLoop``: when the timer
/// fires at the earliest deadline, or reports that the wall clock was set, the service reads it, sends the events
/// and re-arms the timer, in the same callback (the service's actor runs on the loop). While no deadline is due
/// the loop does not wake for it.
public enum ExpiryTimerSource {
    /// Watches `service`'s expiry timer on `loop`, whose executor is the service's, for as long as the loop runs;
    /// nothing when the service has no timer. Call it on the loop.
    ///
    /// - Throws: ``SystemdError`` when the loop cannot watch the timer's descriptor.
    public static func watch(on loop: MainLoop, service: AuthService, logger: Logger) throws(SystemdError) {
        guard let descriptor = service.onLoop({ $0.expiryTimerDescriptor }) else { return }
        let watching = Watching()
        watching.source = try loop.onReadable(descriptor) { [unowned loop] in
            do {
                try service.onLoop { try $0.expiryTimerReadable() }
            } catch {
                // A descriptor that stays readable would wake the loop at once again: stop watching it, and
                // try again in a second, re-checking every deadline then.
                logger.error("The expiry timer failed", metadata: ["authd.error": "\(error)"])
                watching.source?.cancel()
                watching.source = nil
                _ = try? loop.after(.seconds(1)) { [unowned loop] in
                    service.onLoop { $0.wallClockChanged() }
                    try? watch(on: loop, service: service, logger: logger)
                }
            }
        }
    }

    /// The source of one watch, for its handler to cancel.
    private final class Watching {
        var source: EventSource?
    }
}
