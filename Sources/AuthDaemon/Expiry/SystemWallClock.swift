// SPDX-License-Identifier: Apache-2.0
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The machine's wall clock (CLOCK_REALTIME): it follows NTP and manual settings, jumps included.
public struct SystemWallClock: WallClock {
    public init() {}

    public var now: Date { Date() }
}
