// SPDX-License-Identifier: Apache-2.0
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The one clock the daemon's rules run on: the wall-clock time they read (`exp` is absolute Unix time), and the
/// short timers they arm (a WaitForToken's bound, a refresh claim's lease, a flush's bound).
///
/// The daemon passes the system's (`SystemClock` in AuthDaemon); tests pass a manual one that stands still until
/// moved and fires its timers when told, so no test sleeps for a timer.
public protocol ServiceClock: Sendable {
    /// The wall-clock time now.
    var now: Date { get }

    /// Runs `action` once `delay` has passed. Timers are not cancelled: `action` checks whether it is still
    /// wanted (its owner keeps an id for that).
    func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void)
}
