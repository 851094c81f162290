// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// The directory that holds the socket.
enum RuntimeDirectory {
    /// Creates `path` with `mode` if it is missing, and checks that it is a directory of the daemon's user
    /// (not a link someone planted, as could happen under `/tmp`) that, when `private`, nobody else can enter.
    static func prepare(_ path: String, mode: mode_t, private isPrivate: Bool) throws(DaemonError) {
        if mkdir(path, mode) != 0 && errno != EEXIST {
            throw DaemonError(
                message: "cannot create the socket directory \(path): \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw DaemonError(message: "the socket directory \(path) is not a directory; remove it")
        }
        guard info.st_uid == geteuid() else {
            // Under /tmp (no XDG_RUNTIME_DIR) anyone can create the name first: serving there would let its owner
            // replace the socket, and clients would refuse the daemon anyway. Say so rather than pick another
            // name that clients could not find.
            throw DaemonError(
                message: "the socket directory \(path) belongs to uid \(info.st_uid), not to this user (uid "
                    + "\(geteuid())); another user may have created it to intercept this user's tokens, so the "
                    + "daemon does not serve there. Have it removed (only its owner or root can), or set "
                    + "XDG_RUNTIME_DIR (a session with pam_systemd does) or pass --socket with a path in a "
                    + "directory of this user's own"
            )
        }
        if isPrivate && info.st_mode & 0o077 != 0 {
            throw DaemonError(message: "the socket directory \(path) is open to other users; run 'chmod 0700 \(path)'")
        }
    }
}
