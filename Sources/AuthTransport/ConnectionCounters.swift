// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// What a ``VarlinkServer`` counts of its connections, for the daemon's metrics: read from any thread.
public final class ConnectionCounters: Sendable {
    /// Why a connection was refused or could not be accepted.
    public enum Refusal: String, CaseIterable, Sendable {
        /// Every connection the server allows was open (`--max-connections`).
        case serverFull
        /// The user held its whole share (`--max-connections-per-user`).
        case userFull
        /// accept(2) failed for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM).
        case noResources
    }

    private let live = Atomic<Int>(0)
    private let refusals = Mutex<[UInt64]>(Array(repeating: 0, count: Refusal.allCases.count))

    public init() {}

    /// The connections the server holds now: open, or closed while a call of theirs still returns. Counted from
    /// the connection's making to its release, so a connection that something keeps after it closed shows here.
    public var connections: Int { live.load(ordering: .relaxed) }

    /// The refusals of `reason` since the start.
    public func refused(_ reason: Refusal) -> UInt64 {
        refusals.withLock { $0[Refusal.allCases.firstIndex(of: reason)!] }
    }

    func held() { live.add(1, ordering: .relaxed) }

    func released() { live.subtract(1, ordering: .relaxed) }

    func count(_ reason: Refusal) {
        refusals.withLock { $0[Refusal.allCases.firstIndex(of: reason)!] += 1 }
    }
}
