// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(Glibc)
    import Glibc
#endif

/// The listening Unix socket the server binds itself when systemd passes none.
enum ListeningSocket {
    /// Binds a socket at `path`, gives the file `mode` and listens. A stale socket file is replaced; one that
    /// another process serves is an error.
    ///
    /// - Returns: The listening descriptor (close-on-exec).
    static func bind(_ path: String, mode: UInt32, backlog: Int32) throws(VarlinkServerError) -> Int32 {
        try removeStale(path)
        let descriptor = socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { throw failure("cannot listen on \(path)") }
        // The error of the step that failed, once the descriptor is closed (and the file removed, once bound).
        func undo(_ what: String, bound: Bool) -> VarlinkServerError {
            let error = failure(what)
            close(descriptor)
            if bound { unlink(path) }
            return error
        }
        // The mode is set before listen(2): no client can connect while the file has the umask's.
        guard UnixSocketAddress.withAddress(path, { Glibc.bind(descriptor, $0, $1) }) == 0 else {
            throw undo("cannot listen on \(path)", bound: false)
        }
        guard chmod(path, mode_t(mode)) == 0 else { throw undo("cannot set the mode of \(path)", bound: true) }
        guard listen(descriptor, backlog) == 0 else { throw undo("cannot listen on \(path)", bound: true) }
        return descriptor
    }

    /// Removes a socket file nobody listens on any more; refuses to take over one that is served.
    private static func removeStale(_ path: String) throws(VarlinkServerError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw VarlinkServerError(message: "\(path) exists and is not a socket; move it away")
        }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(probe) }
        let connected = UnixSocketAddress.withAddress(path) { connect(probe, $0, $1) }
        if connected == 0 {
            throw VarlinkServerError(message: "another process is serving \(path); is exponea-authd already running?")
        }
        unlink(path)
    }

    private static func failure(_ what: String) -> VarlinkServerError {
        VarlinkServerError(message: "\(what): \(String(cString: strerror(errno)))")
    }
}
