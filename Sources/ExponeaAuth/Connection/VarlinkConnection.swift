// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One connection to the daemon's Varlink socket: a plain blocking Unix socket with one call at a time, as a C
/// client has it, every wait bounded.
///
/// A call runs on its caller's thread: it writes the call (bounded by `SO_SNDTIMEO`) and waits for the reply in
/// `recv` for up to ``inlineReplyWaitMilliseconds`` (bounded by `SO_RCVTIMEO`), which is all a call takes when the
/// daemon answers at once: no thread switch. A reply that takes longer (a daemon that waits by design,
/// `WaitForToken`, or one that is busy or stopped) is awaited on a thread of the call's own, with `poll`, until
/// the call's deadline; the caller's thread is free meanwhile. Every wait has its bound: the inline `recv` its
/// socket option, `poll` its timeout; the other reads never block (`MSG_DONTWAIT`).
///
/// Calls on one connection take turns (a call made while another is in flight waits for it). A connection whose
/// call failed, timed out or was cancelled is closed: a late reply must never be taken for the next call's.
///
/// Sendable as checked by the compiler: every stored property is a constant of a `Sendable` type, and the two
/// that change are in `Mutex`es (the turn-taking ``State``; the bytes received, which only the call holding the
/// connection touches, so its lock is never contended and costs two atomic operations a read).
final class VarlinkConnection: Sendable {
    /// The socket's path, for messages.
    let path: String
    /// How long a call may take, on top of a wait the method makes by design.
    let timeout: Duration
    /// The server's process id, as `SO_PEERCRED` gave it at connect time.
    let serverPID: Int32

    private let fd: Int32
    private let state = Mutex(State())
    /// The bytes received: touched only by the call that holds the connection (``State/busy``), so never waited
    /// for.
    private let received = Mutex(VarlinkFrameDecoder(maximumMessageSize: maximumReplySize))

    private struct State {
        var busy = false
        /// Closed, or to be closed when the call in flight ends.
        var closing = false
        var fdClosed = false
        /// The callers waiting for their turn (calls on a shared claim's connection), each resumed once: by the
        /// call before it, or when the connection closes. (Unsafe, not checked, continuations: the checked kind's
        /// type costs a process's first call a search of every protocol conformance in the binary.)
        var waiting: [UnsafeContinuation<Void, Never>] = []
    }

    /// Replies can be long (ListGroups of many groups); the bound keeps a broken peer from filling memory.
    static let maximumReplySize = 16 * 1024 * 1024

    /// How long a call waits for its reply on its caller's thread before it awaits the rest on a thread of its
    /// own: `poll`'s shortest bound, many GetToken round trips on an idle machine, short enough that
    /// callers waiting at once on a loaded machine do not hold the threads of Swift's cooperative pool for long.
    static let inlineReplyWaitMilliseconds: Int64 = 1

    private init(fd: Int32, path: String, timeout: Duration, serverPID: Int32) {
        self.fd = fd
        self.path = path
        self.timeout = timeout
        self.serverPID = serverPID
    }

    deinit {
        if !state.withLock({ $0.fdClosed }) { Glibc.close(fd) }
    }

    /// Connects to the socket at `path`, within `timeout`, and checks, before anything is sent, that the
    /// process listening there is one of `trusted`.
    ///
    /// - Throws: ``AuthClientError`` with ``AuthClientError/Code/daemonUnavailable`` when nothing listens
    ///   there, ``AuthClientError/Code/permissionDenied`` when the socket may not be opened,
    ///   ``AuthClientError/Code/untrustedServer`` when another user's process listens there, or
    ///   ``AuthClientError/Code/timedOut`` when the daemon's backlog stays full (it does not accept).
    static func connect(to path: String, trusting trusted: TrustedServer, timeout: Duration)
        throws(AuthClientError) -> VarlinkConnection
    {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw AuthClientError(.daemonUnavailable, "The socket path \(path) is too long for a Unix socket")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: pathBytes + [0]) }

        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            throw AuthClientError(.daemonUnavailable, "Cannot make a socket: \(String(cString: strerror(errno)))")
        }
        // SO_SNDTIMEO bounds connect (a full backlog) and every write; SO_RCVTIMEO the wait for a reply on the
        // caller's thread (``receiveInline()``).
        setTimeout(fd, SO_SNDTIMEO, timeout)
        setTimeout(fd, SO_RCVTIMEO, .milliseconds(inlineReplyWaitMilliseconds))
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        } while result != 0 && errno == EINTR
        if result != 0 {
            let error = errno
            Glibc.close(fd)
            switch error {
            case EACCES, EPERM:
                throw AuthClientError(
                    .permissionDenied, "Not allowed to connect to \(path): this user may not use this daemon")
            case EAGAIN:
                throw AuthClientError.timedOut(socket: path, after: timeout)
            default:
                throw AuthClientError(
                    .daemonUnavailable,
                    "exponea-authd is not reachable at \(path) (\(String(cString: strerror(error)))); start it with "
                        + "'exponea-authd --user' or 'systemctl start exponea-authd.socket', "
                        + "or point EXPONEA_AUTHD_SOCKET at its socket"
                )
            }
        }
        // Nothing has been written yet: who serves the socket is checked first.
        var server = PeerCredentials()
        var length = socklen_t(MemoryLayout<PeerCredentials>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &server, &length) == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw AuthClientError(
                .untrustedServer, "Cannot read who serves \(path) (\(reason)); nothing was sent to it")
        }
        guard trusted.accepts(server.uid) else {
            Glibc.close(fd)
            throw AuthClientError(
                .untrustedServer,
                "The process serving \(path) runs as uid \(server.uid), not as \(trusted.expected): it is not "
                    + "exponea-authd and may be trying to intercept tokens, so nothing was sent to it. Ask the "
                    + "administrator to remove \(path), or point EXPONEA_AUTHD_SOCKET at the daemon's socket"
            )
        }
        return VarlinkConnection(fd: fd, path: path, timeout: timeout, serverPID: server.pid)
    }

    private static func setTimeout(_ fd: Int32, _ option: Int32, _ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        var value = timeval(tv_sec: Int(max(0, seconds)), tv_usec: Int(max(0, attoseconds) / 1_000_000_000_000))
        if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }  // 0 would mean "no bound"
        _ = setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Whether the connection can take another call: no call on it failed and it was not closed. (A daemon
    /// that closed its end is found by the next call, which fails with ``AuthClientError/Code/connectionLost``
    /// before the call is sent, and is retried on a new connection.)
    var isUsable: Bool { !state.withLock { $0.closing } }

    // MARK: Calls

    /// Sends one call and returns its reply's JSON.
    ///
    /// - Parameter wait: How much longer than ``timeout`` the reply may take by design (`WaitForToken`'s own
    ///   timeout, the apps' flushes); a call with one is awaited off the caller's thread from the start.
    /// - Throws: ``AuthClientError/Code/timedOut`` naming the socket when no reply came in time,
    ///   ``AuthClientError/Code/connectionLost`` when the connection closed first.
    nonisolated(nonsending) func call(_ message: [UInt8], wait: Duration = .zero) async throws(AuthClientError)
        -> [UInt8]
    {
        try await acquire()
        var ok = false
        defer { relinquish(keepOpen: ok) }
        let start = Deadline.now
        try send(message)
        if wait == .zero, let reply = try receiveInline() {
            ok = true
            return reply
        }
        let reply = try await awaitOffPool(until: start.adding(timeout + wait), allowance: timeout + wait)
        ok = true
        return reply
    }

    /// Sends one call and waits for its reply on this thread (for threads of the library's own).
    func callBlocking(_ message: [UInt8]) throws(AuthClientError) -> [UInt8] {
        try acquireBlocking()
        var ok = false
        defer { relinquish(keepOpen: ok) }
        let deadline = Deadline.now.adding(timeout)
        try send(message)
        guard let reply = try receive(until: deadline) else {
            throw AuthClientError.timedOut(socket: path, after: timeout)
        }
        ok = true
        return reply
    }

    /// Sends a call with `more` and hands its replies, one at a time, to a thread of the library's own: see
    /// ``Replies``. The connection is the stream's from then on.
    func stream(_ message: [UInt8]) throws(AuthClientError) -> Replies {
        try acquireBlocking()
        do {
            try send(message)
        } catch {
            relinquish(keepOpen: false)
            throw error
        }
        return Replies(connection: self)
    }

    /// The replies of a call with `more`, read on the thread that holds them.
    struct Replies: ~Copyable {
        let connection: VarlinkConnection

        /// The next reply, or nil when none came by `deadline`.
        func next(until deadline: Deadline) throws(AuthClientError) -> [UInt8]? {
            try connection.receive(until: deadline)
        }

        deinit { connection.relinquish(keepOpen: false) }
    }

    /// Closes the connection; a call in flight ends at once with ``AuthClientError/Code/connectionLost``.
    func close() {
        let (closeNow, woken) = state.withLock { state -> (Bool, [UnsafeContinuation<Void, Never>]) in
            state.closing = true
            // Every caller waiting for its turn learns that the connection is closed.
            defer { state.waiting = [] }
            guard !state.fdClosed else { return (false, state.waiting) }
            guard !state.busy else {
                // The call in flight holds the descriptor: wake it, and it closes the connection when it ends.
                // Under the lock: once the call ends, the descriptor is closed and its number may be another
                // connection's.
                _ = shutdown(fd, Int32(SHUT_RDWR))
                return (false, state.waiting)
            }
            state.fdClosed = true
            return (true, state.waiting)
        }
        if closeNow { Glibc.close(fd) }
        for caller in woken { caller.resume() }
    }

    /// Wakes the call in flight (its task was cancelled); nothing when none is.
    private func interrupt() {
        state.withLock { state in
            if state.busy && !state.fdClosed { _ = shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    // MARK: Taking turns

    private nonisolated(nonsending) func acquire() async throws(AuthClientError) {
        while true {
            let free = state.withLock { state -> Bool? in
                if state.closing { return nil }
                if !state.busy {
                    state.busy = true
                    return true
                }
                return false
            }
            switch free {
            case nil: throw Self.closed
            case true?: return
            case false?:
                await withUnsafeContinuation { continuation in
                    let resumeNow = state.withLock { state -> Bool in
                        guard state.busy, !state.closing else { return true }
                        state.waiting.append(continuation)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    private func acquireBlocking() throws(AuthClientError) {
        let free = state.withLock { state -> Bool in
            guard !state.closing, !state.busy else { return false }
            state.busy = true
            return true
        }
        guard free else { throw Self.closed }
    }

    private func relinquish(keepOpen: Bool) {
        let (closeNow, woken) = state.withLock { state -> (Bool, [UnsafeContinuation<Void, Never>]) in
            state.busy = false
            if !keepOpen { state.closing = true }
            var closeNow = false
            if state.closing && !state.fdClosed {
                state.fdClosed = true
                closeNow = true
            }
            // The next caller takes its turn; once the connection is closing, every caller waiting learns so.
            guard !state.waiting.isEmpty else { return (closeNow, []) }
            guard !state.closing else {
                defer { state.waiting = [] }
                return (closeNow, state.waiting)
            }
            return (closeNow, [state.waiting.removeFirst()])
        }
        if closeNow { Glibc.close(fd) }
        for caller in woken { caller.resume() }
    }

    // MARK: Reading and writing (by the holder only)

    /// Sends `message` and its NUL in one system call, without copying the message to append the NUL.
    private func send(_ message: [UInt8]) throws(AuthClientError) {
        var terminator: UInt8 = 0
        var sent = 0
        let total = message.count + 1
        while sent < total {
            let result = message.withUnsafeBytes { bytes in
                withUnsafeMutablePointer(to: &terminator) { nul in
                    // The part of the message not sent yet (none once it all is), then the NUL.
                    let rest = min(sent, bytes.count)
                    var parts = (
                        iovec(
                            iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress)?.advanced(by: rest),
                            iov_len: bytes.count - rest),
                        iovec(iov_base: UnsafeMutableRawPointer(nul), iov_len: 1)
                    )
                    return withUnsafeMutableBytes(of: &parts) { vectors in
                        var header = msghdr()
                        header.msg_iov = vectors.baseAddress!.assumingMemoryBound(to: iovec.self)
                        header.msg_iovlen = 2
                        return sendmsg(fd, &header, Int32(MSG_NOSIGNAL))
                    }
                }
            }
            if result > 0 {
                sent += result
            } else if result < 0 && errno == EINTR {
                continue
            } else if result < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                throw AuthClientError.timedOut(socket: path, after: timeout)
            } else {
                throw AuthClientError(
                    .connectionLost,
                    "The connection to exponea-authd at \(path) closed before the call was sent")
            }
        }
    }

    /// Waits on the caller's thread for up to ``inlineReplyWaitMilliseconds``; nil when the reply has not come by
    /// then. It waits in `recv` itself, which the socket's `SO_RCVTIMEO` (set to that wait at connect) bounds:
    /// one system call fewer a call than `poll` and then `recv`.
    private func receiveInline() throws(AuthClientError) -> [UInt8]? {
        let deadline = Deadline.now.adding(milliseconds: Self.inlineReplyWaitMilliseconds)
        while true {
            if let message = try nextMessage() { return message }
            guard deadline.millisecondsLeft > 0, try readSome(waiting: true) else { return nil }
        }
    }

    /// Waits until a whole message is there or `deadline` passes (nil then).
    fileprivate func receive(until deadline: Deadline) throws(AuthClientError) -> [UInt8]? {
        while true {
            if let message = try nextMessage() { return message }
            let milliseconds = deadline.millisecondsLeft
            guard milliseconds > 0 else { return nil }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno != EINTR {
                throw AuthClientError(.connectionLost, "Waiting for exponea-authd at \(path) failed")
            }
            if ready > 0 { _ = try readSome(waiting: false) }
        }
    }

    /// Reads what is there; when `waiting`, waits for it up to the socket's `SO_RCVTIMEO`. Returns whether it
    /// read anything.
    private func readSome(waiting: Bool) throws(AuthClientError) -> Bool {
        let outcome: Result<Bool, AuthClientError> = withUnsafeTemporaryAllocation(
            byteCount: 16 * 1024, alignment: 16
        ) { buffer in
            while true {
                let count = recv(fd, buffer.baseAddress, buffer.count, waiting ? 0 : Int32(MSG_DONTWAIT))
                if count > 0 {
                    received.withLock { $0.append(UnsafeRawBufferPointer(rebasing: buffer[..<count])) }
                    return .success(true)
                }
                if count < 0 && errno == EINTR { continue }
                if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .success(false) }
                return .failure(
                    AuthClientError(
                        .connectionLost,
                        "The connection to exponea-authd at \(path) closed before the reply came"))
            }
        }
        return try outcome.get()
    }

    private func nextMessage() throws(AuthClientError) -> [UInt8]? {
        do {
            return try received.withLock { decoder throws(VarlinkFramingError) in try decoder.nextMessage() }
        } catch {
            throw AuthClientError(.protocolError, "The daemon sent a reply over \(Self.maximumReplySize) bytes")
        }
    }

    /// Awaits the reply on a thread of its own, so that a slow reply holds no thread of the caller's pool; a
    /// cancelled task ends the wait (and the connection).
    private nonisolated(nonsending) func awaitOffPool(until deadline: Deadline, allowance: Duration)
        async throws(AuthClientError) -> [UInt8]
    {
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<[UInt8], AuthClientError>, Never>) in
                BlockingThread.start { [self] in
                    continuation.resume(
                        returning: Result { () throws(AuthClientError) -> [UInt8] in
                            guard let reply = try self.receive(until: deadline) else {
                                throw AuthClientError.timedOut(socket: self.path, after: allowance)
                            }
                            return reply
                        })
                }
            }
        } onCancel: {
            interrupt()
        }
        if Task.isCancelled, case .failure = result {
            throw AuthClientError(.connectionLost, "The call to exponea-authd at \(path) was cancelled")
        }
        return try result.get()
    }

    private static let closed = AuthClientError(.connectionLost, "The connection to exponea-authd is closed")
}

/// Runs blocking work on a detached thread of its own (the slow replies, the event subscriptions), never on a
/// thread of Swift's cooperative pool.
enum BlockingThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts `body` on a new detached thread; runs it on this thread if no thread can be made.
    static func start(_ body: @escaping @Sendable () -> Void) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attributes, 256 * 1024)
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { context in
                Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context)
        if created != 0 {
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
        }
    }
}
