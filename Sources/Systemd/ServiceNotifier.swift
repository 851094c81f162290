// SPDX-License-Identifier: Apache-2.0
import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// Tells the service manager how the service is doing (`sd_notify(3)`): ready, status, watchdog, stopping.
///
/// Without `$NOTIFY_SOCKET` (not started by systemd with `Type=notify`) every message is dropped, so the
/// daemon can call it unconditionally.
///
/// ```swift
/// let notifier = ServiceNotifier()
/// notifier.notify(.ready, .status("Serving 3 app groups"))
/// ```
public struct ServiceNotifier: Sendable {
    /// One assignment of a notification.
    public enum State: Hashable, Sendable {
        /// Start-up is finished (`READY=1`).
        case ready
        /// A one-line status for `systemctl status` (`STATUS=`); line breaks are replaced by spaces.
        case status(String)
        /// The service is alive (`WATCHDOG=1`).
        case watchdog
        /// The service is shutting down (`STOPPING=1`).
        case stopping
        /// The service is reloading its configuration (`RELOADING=1`).
        case reloading

        /// The `KEY=value` line sent for this state.
        public var assignment: String {
            switch self {
            case .ready: "READY=1"
            case .status(let text): "STATUS=" + Self.oneLine(text)
            case .watchdog: "WATCHDOG=1"
            case .stopping: "STOPPING=1"
            case .reloading: "RELOADING=1"
            }
        }

        /// A status with control characters replaced, so it can never inject another assignment.
        private static func oneLine(_ text: String) -> String {
            String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? " " : $0 }))
        }
    }

    public init() {}

    /// Whether a notification socket is configured (`$NOTIFY_SOCKET`).
    public var isEnabled: Bool { getenv("NOTIFY_SOCKET") != nil }

    /// Sends `states` in one datagram.
    ///
    /// - Returns: Whether it was sent; false when no notification socket is configured.
    /// - Throws: ``SystemdError`` when the socket is configured but the message could not be sent.
    @discardableResult
    public func send(_ states: [State]) throws(SystemdError) -> Bool {
        let message = states.map(\.assignment).joined(separator: "\n")
        let result = sd_notify(0, message)
        if result < 0 {
            throw SystemdError(code: .notify, function: "sd_notify", returned: result, context: "cannot notify systemd")
        }
        return result > 0
    }

    /// Sends `states`, ignoring failures: losing a status update must never stop the daemon.
    ///
    /// - Returns: Whether it was sent.
    @discardableResult
    public func notify(_ states: State...) -> Bool {
        (try? send(states)) ?? false
    }

    /// The watchdog timeout the service manager set (`WatchdogSec=`), or nil when it set none.
    ///
    /// Send ``State/watchdog`` at about half this interval, from the loop that does the work.
    public var watchdogInterval: Duration? {
        var microseconds: UInt64 = 0
        guard sd_watchdog_enabled(0, &microseconds) > 0, microseconds > 0 else { return nil }
        return .microseconds(Int64(clamping: microseconds))
    }
}
