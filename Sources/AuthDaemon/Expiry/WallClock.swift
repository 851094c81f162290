// SPDX-License-Identifier: Apache-2.0
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where "now" comes from: the wall clock (CLOCK_REALTIME), since token deadlines are Unix time (R14).
///
/// Code that needs the time takes a `WallClock`, so tests inject a ``ManualWallClock`` and never sleep.
public protocol WallClock: Sendable {
    /// The current wall-clock time.
    var now: Date { get }
}
