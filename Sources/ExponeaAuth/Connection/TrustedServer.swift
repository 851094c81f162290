// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// Who a client accepts at the other end of the daemon's socket, checked with `SO_PEERCRED` as soon as the
/// connection is made and before anything is sent on it.
///
/// A socket path alone proves nothing: under `/tmp` another user can create the directory first and listen
/// there, to be handed the tokens that `SetToken` sends and to answer `GetToken` with a token of his own.
/// The kernel's credentials of the listening process cannot be forged, so the client accepts:
///
/// | socket | accepted server uids |
/// | --- | --- |
/// | the system daemon's, `/run/exponea-authd/io.socket` | root (socket activation: PID 1 listens) and the system user `exponea-authd` |
/// | the user daemon's (`$XDG_RUNTIME_DIR`, or the `/tmp` fallback) | this user and root |
/// | one given explicitly (`socketPath:`, `$EXPONEA_AUTHD_SOCKET`, `authctl --socket`) | this user, root and `exponea-authd` |
///
/// The system user's uid is looked up (NSS) only when the server is neither root nor this user, so that the common
/// case costs a process nothing at start-up.
struct TrustedServer: Hashable, Sendable {
    /// This process's effective uid, when a server running as this user is accepted.
    var user: UInt32?
    /// Whether the system user `exponea-authd` is accepted too. Root always is.
    var systemUser: Bool

    /// The system daemon's user, as `systemd/exponea-authd.sysusers` creates it.
    static let systemUserName = "exponea-authd"

    /// For the system daemon's socket.
    static var systemDaemon: TrustedServer { TrustedServer(user: nil, systemUser: true) }

    /// For the user daemon's socket: this user's (effective uid) or root's.
    static var userDaemon: TrustedServer { TrustedServer(user: geteuid(), systemUser: false) }

    /// For a socket given explicitly, which may be either daemon's.
    static var eitherDaemon: TrustedServer { TrustedServer(user: geteuid(), systemUser: true) }

    /// Whether a server running as `uid` is accepted.
    func accepts(_ uid: UInt32) -> Bool {
        uid == 0 || uid == user || (systemUser && Self.systemUserID == uid)
    }

    /// Who is accepted, for the message when the server is none of them; made only then, so that a connection
    /// formats nothing.
    var expected: String {
        var names = user.map { ["this user (uid \($0))"] } ?? []
        names.append("root")
        if systemUser, let uid = Self.systemUserID { names.append("\(Self.systemUserName) (uid \(uid))") }
        guard let last = names.popLast(), !names.isEmpty else { return "root" }
        return names.joined(separator: ", ") + " or " + last
    }

    /// The uid of ``systemUserName``, looked up once per process; nil when there is no such user.
    private static let systemUserID: UInt32? = {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16 * 1024)
        guard getpwnam_r(systemUserName, &entry, &buffer, buffer.count, &result) == 0, result != nil else {
            return nil
        }
        return entry.pw_uid
    }()
}

/// `struct ucred` of `<sys/socket.h>`, which Swift's Glibc module hides behind `_GNU_SOURCE`: same fields,
/// same layout.
struct PeerCredentials: Sendable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}
