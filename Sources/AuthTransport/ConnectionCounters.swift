// SPDX-License-Identifier: Apache-2.0

/// What a ``VarlinkServer`` counts of its connections, for the daemon's metrics.
///
/// It belongs to the loop's thread, like the servers that count in it: not `Sendable`, so it needs no lock. The
/// metrics, which run elsewhere in the code but on the same loop, reach it through a `LoopBound`.
public final class ConnectionCounters {
    /// Why a connection was refused or could not be accepted.
    public enum Refusal: String, CaseIterable, Sendable {
        /// Every connection the server allows was open (`--max-connections`).
        case serverFull
        /// The user held its whole share (`--max-connections-per-user`).
        case userFull
        /// accept(2) failed for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM).
        case noResources
    }

    /// The connections the server holds now: open, or closed while a call of theirs still returns. Counted from
    /// the connection's making to its release, so a connection that something keeps after it closed shows here.
    public private(set) var connections = 0
    private var refusals = [UInt64](repeating: 0, count: Refusal.allCases.count)

    public init() {}

    /// The refusals of `reason` since the start.
    public func refused(_ reason: Refusal) -> UInt64 {
        refusals[Refusal.allCases.firstIndex(of: reason)!]
    }

    func held() { connections += 1 }

    func released() { connections -= 1 }

    func count(_ reason: Refusal) {
        refusals[Refusal.allCases.firstIndex(of: reason)!] += 1
    }
}
