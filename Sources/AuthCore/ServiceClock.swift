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

    /// Runs `action` once `delay` has passed, unless the returned timer is cancelled first. Its owner cancels it
    /// when its reason ends early (a wait answered, a claim ended), so that neither the timer nor what `action`
    /// holds outlives that reason; `action` still checks that it is wanted, as a cancel may cross its firing.
    func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> ServiceTimer
}

/// A timer armed on a ``ServiceClock``.
public struct ServiceTimer: Sendable {
    private let cancelling: @Sendable () -> Void

    /// A timer that `cancel` disarms.
    public init(cancel: @escaping @Sendable () -> Void) { cancelling = cancel }

    /// Disarms the timer and lets its action go: it does not run, unless it has started already.
    public func cancel() { cancelling() }
}
