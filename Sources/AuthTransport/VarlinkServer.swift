// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import CEpoll
import Logging
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// Serves Varlink on a Unix stream socket, as sources of one sd-event loop (``MainLoop``): the listening socket
/// is an I/O source of it, so are the connections' sockets (through ``ConnectionPoller``: the first few each a
/// source, the others in one epoll set), their timers are its timers, and the calls that cannot be
/// answered at once run in tasks on the loop's ``LoopExecutor``. Nothing here is `Sendable` or locked: it all
/// lives on the loop's thread, as sd-varlink's server does.
///
/// What one user can make the server hold is bounded: its connections (``Configuration/maximumConnectionsPerUser``),
/// and on each connection the calls in flight (``Configuration/maximumCallsInFlight``, one-way calls included),
/// the bytes buffered and the unsent output (``Configuration/maximumPendingOutput``); at its bound a connection
/// stops reading until half of it is done. Each wake-up reads at most ``readBudget`` bytes of one connection, so
/// a flooding client cannot starve the others. Refusals and closings are logged once per kind and user per
/// ``LogThrottle/defaultInterval``, with a count. At the open file limit the server stops accepting for a
/// moment (``Configuration/acceptBackoff``) instead of retrying at once. At debug level it logs each connection it
/// accepts ("Accepted a connection") and lets go of ("Released a connection"), each line with the number of
/// connections it holds then (`authd.connections`, the count of ``ConnectionCounters/connections``).
///
/// ```swift
/// let server = VarlinkServer(configuration: .init(listen: .path("/run/exponea-authd/io.socket", mode: 0o666)),
///                            handler: handler, loop: loop, executor: executor, logger: logger)
/// try server.start()      // on the loop's thread; then tell systemd READY=1
/// ```
public final class VarlinkServer {
    /// Where to listen.
    public enum Listen: Sendable, Hashable {
        /// Bind a socket at `path` and give the file `mode`. A stale socket file is replaced; one that another
        /// process serves is an error.
        case path(String, mode: UInt32)
        /// Adopt a listening socket systemd passed (socket activation).
        case descriptor(Int32)
    }

    public struct Configuration: Sendable {
        public var listen: Listen
        /// The longest message a client may send.
        public var maximumMessageSize = VarlinkFrameDecoder.defaultMaximumMessageSize
        /// Connections beyond this are closed at once.
        public var maximumConnections = 1024
        /// The connections one user may hold, except root and the server's own user. Other users together may
        /// hold all but a sixteenth of ``maximumConnections``: that reserve is for root and the server's user.
        public var maximumConnectionsPerUser = 256
        /// Calls a connection may have read and not yet answered (one-way calls included); at this many it
        /// stops reading until half are done.
        public var maximumCallsInFlight = 16
        /// Bytes of such calls at which a connection stops reading (one call is always let through).
        public var maximumBytesInFlight = 16 * 1024
        /// Unsent output at which a connection stops reading; a connection whose unsent output passes four times
        /// this much (a subscriber that does not read its events) is closed.
        public var maximumPendingOutput = 16 * 1024
        /// How long a connection may stay open with no call in flight and no whole message received: only a
        /// whole message counts, not a byte.
        public var idleTimeout: Duration = .seconds(300)
        /// How long a message may take to arrive whole once its first byte has come.
        public var messageTimeout: Duration = .seconds(10)
        /// Where the server counts its connections and refusals, when they are shared (the metrics read them, and
        /// two servers may count in one); nil for counters of the server's own.
        public var counters: LoopBound<ConnectionCounters>?
        /// How long the server stops accepting when accept(2) fails for want of resources (EMFILE, ENFILE,
        /// ENOBUFS, ENOMEM): the waiting clients stay queued and are accepted once descriptors are free.
        public var acceptBackoff: Duration = .milliseconds(250)
        /// Whether each peer's systemd unit is found when it connects (``Caller/unit``): its pidfd's cgroup,
        /// named by the cgroup file system (``PeerUnitResolver``). Off, callers have no unit.
        public var identifiesUnits = true
        /// User mode: the units of the server's own user's service manager (`user@UID.service`) are read too,
        /// and the log names a caller by its unit there, as the dispatcher does. Another user's manager is never
        /// read: its user may fill it with cgroups.
        public var namesUserUnits = false

        public init(listen: Listen) { self.listen = listen }
    }

    /// The most bytes one connection's wake-up reads: its share of the loop before the others' turn. About the
    /// in-flight bound's 16 short calls (a GetToken is some 70 bytes): the calls answered at once are all handled in
    /// that turn, so what another user waits for under a flood is every flooding connection's share in a row.
    public static let readBudget = 1280
    /// The most connections one wake-up of the listening socket accepts.
    static let acceptBudget = 16

    private let configuration: Configuration
    private let handler: any VarlinkCallHandler
    private let loop: MainLoop
    private let executor: LoopExecutor
    /// The isolation the connections' tasks run their calls in: the loop's.
    let isolation: LoopIsolation
    private let logger: Logger
    private let throttle = LogThrottle(now: { ContinuousClock.now })
    /// Where it counts its connections and refusals.
    private let counters: ConnectionCounters
    private var admission: ConnectionAdmission
    private var connections: [ObjectIdentifier: ServerConnection] = [:]
    private var listener: (descriptor: Int32, source: EventSource, path: String?)?
    /// The connections' sockets, one source of the loop.
    private var poller: ConnectionPoller?
    private var backingOff = false
    /// Finds each peer's unit, with its index of the cgroups' units; nil when ``Configuration/identifiesUnits``
    /// is off.
    private let units: PeerUnitResolver?
    /// What every connection reads into: one buffer, since one thread reads.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBudget, alignment: 16)

    /// A server for `loop`, whose thread `executor` runs (``LoopExecutor/attach(to:)``); make it on that thread.
    public init(
        configuration: Configuration, handler: any VarlinkCallHandler, loop: MainLoop, executor: LoopExecutor,
        logger: Logger
    ) {
        self.configuration = configuration
        self.handler = handler
        self.loop = loop
        self.executor = executor
        self.isolation = LoopIsolation(executor)
        self.logger = logger
        self.counters = configuration.counters?.value ?? ConnectionCounters()
        self.units =
            configuration.identifiesUnits
            ? PeerUnitResolver(
                index: CgroupUnitIndex(userManager: configuration.namesUserUnits ? "user@\(getuid()).service" : nil))
            : nil
        self.admission = ConnectionAdmission(
            maximumConnections: configuration.maximumConnections,
            maximumPerUser: configuration.maximumConnectionsPerUser,
            privileged: [0, getuid()]
        )
    }

    deinit {
        stop()
        readBuffer.deallocate()
    }

    /// The number of open connections.
    public var connectionCount: Int { connections.count }

    /// Binds the socket (or adopts the one systemd passed) and accepts connections from now on.
    ///
    /// - Throws: ``VarlinkServerError`` when the socket cannot be bound or watched.
    public func start() throws(VarlinkServerError) {
        let descriptor: Int32
        var path: String?
        switch configuration.listen {
        case .path(let socketPath, let mode):
            descriptor = try ListeningSocket.bind(socketPath, mode: mode, backlog: 256)
            path = socketPath
        case .descriptor(let passed):
            descriptor = passed
            _ = fcntl(passed, F_SETFL, fcntl(passed, F_GETFL) | O_NONBLOCK)
        }
        do {
            poller = try ConnectionPoller(loop: loop)
            let source = try loop.onReadable(descriptor) { [unowned self] in acceptWaiting() }
            listener = (descriptor, source, path)
        } catch {
            poller = nil
            close(descriptor)
            if let path { unlink(path) }
            throw VarlinkServerError(message: "cannot watch the listening socket: \(error)")
        }
        units?.index.prepare()
    }

    /// Stops accepting and closes every connection; a socket file the server bound is removed.
    public func stop() {
        if let listener {
            listener.source.cancel()
            close(listener.descriptor)
            if let path = listener.path { unlink(path) }
        }
        listener = nil
        for connection in connections.values { connection.close() }
        poller = nil
    }

    // MARK: Accepting

    private func acceptWaiting() {
        guard let listener, !backingOff else { return }
        for _ in 0..<Self.acceptBudget {
            let descriptor = accept4(
                listener.descriptor, nil, nil, Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue))
            if descriptor >= 0 {
                serve(connected: descriptor)
                continue
            }
            switch errno {
            case EAGAIN, EWOULDBLOCK: return
            case EINTR, ECONNABORTED, EPROTO: continue
            case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                counters.count(.noResources)
                return backOff(errno)
            default:
                logger.error("Cannot accept a connection: \(String(cString: strerror(errno)))")
                return
            }
        }
    }

    /// At the open file limit accept(2) fails at once and the socket stays readable: the socket leaves the poll
    /// set for a moment, and the clients waiting in its queue are accepted after it.
    private func backOff(_ error: Int32) {
        let interval = configuration.acceptBackoff
        if let count = throttle.admit("accept", uid: getuid()) {
            var metadata = OperatorEvent.connectionLimit.metadata(reason: "noResources") {
                Logger.MetadataValue.string($0)
            }
            metadata["count"] = "\(count)"
            logger.warning(
                """
                Cannot accept connections: \(String(cString: strerror(error))); trying again every \
                \(interval / .milliseconds(1)) ms (raise LimitNOFILE= or lower --max-connections)\
                \(LogThrottle.suffix(count))
                """,
                metadata: metadata
            )
        }
        backingOff = true
        listener?.source.setEvents(0)
        var timer: EventSource?
        timer = try? loop.after(interval) { [unowned self] in
            timer?.cancel()
            timer = nil
            backingOff = false
            listener?.source.setEvents(UInt32(EPOLLIN.rawValue))
        }
    }

    /// Serves the connected, non-blocking socket `descriptor` (accepted, or one end of a pair in a test): reads
    /// the peer's credentials and counts the connection against the bounds, or closes it; then finds the peer's
    /// unit, once for the connection.
    func serve(connected descriptor: Int32) {
        var peer: Caller
        do {
            peer = try PeerCredentials.read(from: descriptor)
        } catch {
            logger.debug("\(error)")
            close(descriptor)
            return
        }
        if let refusal = admission.admit(peer.uid) {
            refused(peer, refusal, descriptor)
            close(descriptor)
            return
        }
        if let units { PeerCredentials.identify(&peer, of: descriptor, units: units) }
        let connection = ServerConnection(
            descriptor: descriptor, peer: peer, limits: limits, handler: handler, server: self, executor: executor,
            logger: logger, throttle: throttle, counters: counters)
        do {
            guard let poller else { throw VarlinkServerError(message: "the server is stopped") }
            try connection.start(on: loop, poller: poller)
        } catch {
            admission.release(peer.uid)
            close(descriptor)
            logger.error("Cannot serve a connection: \(error)")
            return
        }
        connections[ObjectIdentifier(connection)] = connection
        // Its pair is the connection's "Released a connection": with both, the log tells how many the server
        // holds. The metadata is made only at debug level.
        logger.debug(
            "Accepted a connection",
            metadata: [
                "authd.pid": "\(peer.pid)", "authd.uid": "\(peer.uid)", "authd.connections": "\(counters.connections)",
            ])
    }

    /// Called by a connection as it closes.
    func closed(_ connection: ServerConnection) {
        guard connections.removeValue(forKey: ObjectIdentifier(connection)) != nil else { return }
        admission.release(connection.peer.uid)
    }

    /// Counts and logs (throttled) a refused connection; the log line names the caller's unit, found only for a
    /// line that is written, while its socket `descriptor` is open.
    private func refused(_ peer: Caller, _ refusal: ConnectionAdmission.Refusal, _ descriptor: Int32) {
        counters.count(refusal.counted)
        let (kind, reason) =
            switch refusal {
            case .serverFull(let limit): ("server-full", "\(limit) are open (--max-connections)")
            case .userFull(let limit):
                ("user-full", "uid \(peer.uid) has \(limit) open (--max-connections-per-user)")
            }
        if let count = throttle.admit(kind, uid: peer.uid) {
            var metadata = OperatorEvent.connectionLimit.metadata(
                reason: refusal.counted.rawValue, callerUID: peer.uid, callerPID: peer.pid
            ) { Logger.MetadataValue.string($0) }
            metadata["count"] = "\(count)"
            if let units {
                var identified = peer
                PeerCredentials.identify(&identified, of: descriptor, units: units)
                let named = configuration.namesUserUnits ? identified.userUnit ?? identified.unit : identified.unit
                if let named { metadata["caller_unit"] = "\(named)" }
            }
            logger.warning("Refusing a connection: \(reason)\(LogThrottle.suffix(count))", metadata: metadata)
        }
    }

    /// The bounds of each connection.
    private var limits: ConnectionLimits {
        ConnectionLimits(
            maximumMessageSize: configuration.maximumMessageSize,
            maximumCallsInFlight: configuration.maximumCallsInFlight,
            maximumBytesInFlight: configuration.maximumBytesInFlight,
            maximumPendingOutput: configuration.maximumPendingOutput,
            idleTimeout: configuration.idleTimeout,
            messageTimeout: configuration.messageTimeout
        )
    }
}

/// `struct ucred` of `<sys/socket.h>`, which Swift's Glibc module hides behind `_GNU_SOURCE`: same fields,
/// same layout.
struct KernelCredentials: Sendable {
    var pid: Int32
    var uid: UInt32
    var gid: UInt32
}

/// The server could not start.
public struct VarlinkServerError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
