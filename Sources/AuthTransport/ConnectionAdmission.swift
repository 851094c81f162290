// SPDX-License-Identifier: Apache-2.0

/// Who may open one more connection: a bound on all connections and a share per user, with a reserve that
/// other users' connections cannot take, kept for root and the server's own user.
///
/// An ordinary user may hold at most ``maximumPerUser`` connections, and ordinary users together at most
/// ``maximumConnections`` minus ``reserve``; root and the server's own user are bound by
/// ``maximumConnections`` only. So one user that holds its whole share, or many that hold the rest, still
/// leave room for everyone else and for root.
struct ConnectionAdmission: Sendable {
    /// Why a connection is refused.
    enum Refusal: Equatable, Sendable {
        /// Every connection the server allows is open (or every one ordinary users may take).
        case serverFull(limit: Int)
        /// The user holds its whole share.
        case userFull(limit: Int)

        /// The refusal as ``ConnectionCounters`` counts it.
        var counted: ConnectionCounters.Refusal {
            switch self {
            case .serverFull: .serverFull
            case .userFull: .userFull
            }
        }
    }

    /// The bound on all connections.
    let maximumConnections: Int
    /// The bound on one ordinary user's connections.
    let maximumPerUser: Int
    /// The users bound by ``maximumConnections`` only: root and the server's own user.
    let privileged: Set<UInt32>

    /// The connections that ordinary users cannot take: a sixteenth of the bound.
    var reserve: Int { maximumConnections / 16 }

    private(set) var total = 0
    private(set) var ordinary = 0
    private var perUser: [UInt32: Int] = [:]

    init(maximumConnections: Int, maximumPerUser: Int, privileged: Set<UInt32>) {
        self.maximumConnections = maximumConnections
        self.maximumPerUser = maximumPerUser
        self.privileged = privileged
    }

    /// The open connections of `uid`.
    func count(of uid: UInt32) -> Int { perUser[uid] ?? 0 }

    /// Counts one more connection of `uid`, or says why it is refused (and counts nothing).
    mutating func admit(_ uid: UInt32) -> Refusal? {
        guard total < maximumConnections else { return .serverFull(limit: maximumConnections) }
        let isPrivileged = privileged.contains(uid)
        if !isPrivileged {
            guard ordinary < maximumConnections - reserve else {
                return .serverFull(limit: maximumConnections - reserve)
            }
            guard count(of: uid) < maximumPerUser else { return .userFull(limit: maximumPerUser) }
            ordinary += 1
        }
        total += 1
        perUser[uid, default: 0] += 1
        return nil
    }

    /// Counts a connection of `uid`, admitted before, as closed.
    mutating func release(_ uid: UInt32) {
        guard let count = perUser[uid] else { return }
        perUser[uid] = count > 1 ? count - 1 : nil
        total -= 1
        if !privileged.contains(uid) { ordinary -= 1 }
    }
}
