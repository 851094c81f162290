// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTransport
import Logging
import Synchronization
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// Announces the groups' events as D-Bus signals: owns `com.exponea.AuthD1`, exports `/com/exponea/AuthD1`
/// with interface `com.exponea.AuthD1.Manager`, and emits `TokenRefreshed(s group, t generation)`,
/// `JwtError(s group, s reason, t generation)` and `Cleared(s group, s cause)`. Never a token or a customer
/// id.
///
/// Who receives them depends on the bus. On a user's own bus (``Bus/user``) every peer is that user, who may
/// use every group: the signals are broadcast. On the system bus (when an ``AccessControl`` is given) a group's
/// name and activity are for the users the access configuration lets use it: nothing is broadcast, and each
/// signal goes only to the peers that called `Watch(s group)` for its group and that may use the group, checked
/// when they call and again at every signal (a reload can take a user's access away). A peer's watches end
/// when it leaves the bus.
///
/// sd-bus wants one thread per connection, so the announcer runs its own: it polls the bus and a socket pair that
/// ``announce(_:)`` writes to. When the bus cannot be reached it logs a warning and tries again, backing off
/// to ``maximumRetryInterval``; events in between are not announced (signals are notifications, not state).
public final class BusAnnouncer: Sendable {
    /// Which bus to use.
    public enum Bus: Sendable, Hashable {
        case system
        case user
        case address(String)
    }

    public static let name = "com.exponea.AuthD1"
    public static let path = "/com/exponea/AuthD1"
    public static let interface = "com.exponea.AuthD1.Manager"
    public static let signals = [
        BusSignal(member: "TokenRefreshed", signature: "st", parameterNames: ["group", "generation"]),
        BusSignal(member: "JwtError", signature: "sst", parameterNames: ["group", "reason", "generation"]),
        BusSignal(member: "Cleared", signature: "ss", parameterNames: ["group", "cause"]),
    ]
    /// The method a peer calls to receive a group's signals.
    public static let watchMember = "Watch"
    /// The groups one peer may watch.
    static let maximumWatchesPerPeer = 256
    /// The peers that may watch at once.
    static let maximumWatchingPeers = 1024
    /// The longest pause between two connection attempts.
    public static let maximumRetryInterval: Duration = .seconds(30)
    /// Events kept while the bus thread is busy; older ones are dropped first.
    static let queueLimit = 4096

    private let bus: Bus
    /// Who may use which group, when signals go only to the peers that watch (the system bus).
    private let access: AccessControl?
    private let logger: Logger
    /// The socket pair that wakes the bus thread: read end, write end.
    private let wakeUp: (read: Int32, write: Int32)
    private let state = Mutex(State())

    private struct State {
        var queue: [AuthEvent] = []
        var stopping = false
        var connected = false
    }

    /// Starts the announcer's thread.
    ///
    /// - Parameter access: nil to broadcast every signal (a user's own bus); otherwise each signal goes only to
    ///   the peers that watch its group and that `access` lets use it.
    public init(bus: Bus, access: AccessControl? = nil, logger: Logger) {
        self.bus = bus
        self.access = access
        self.logger = logger
        var ends: [Int32] = [-1, -1]
        socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue | SOCK_NONBLOCK.rawValue), 0, &ends)
        self.wakeUp = (ends[0], ends[1])
        DaemonThread.start(name: "dbus-announcer") { [self] in run() }
    }

    /// Whether the announcer owns its name on the bus now.
    public var isConnected: Bool { state.withLock { $0.connected } }

    /// Queues `event` for announcement; returns at once.
    public func announce(_ event: AuthEvent) {
        guard Self.signal(for: event) != nil else { return }
        state.withLock { state in
            state.queue.append(event)
            if state.queue.count > Self.queueLimit { state.queue.removeFirst(state.queue.count - Self.queueLimit) }
        }
        signalThread()
    }

    /// Stops the thread; the name is released.
    public func stop() {
        state.withLock { $0.stopping = true }
        signalThread()
    }

    /// The signal member and arguments for an event, or nil for events that are not announced.
    static func signal(for event: AuthEvent) -> (member: String, arguments: [BusValue])? {
        switch event.kind {
        case .tokenRefreshed:
            return ("TokenRefreshed", [.string(event.group), .uint64(event.generation)])
        case .jwtError:
            return (
                "JwtError", [.string(event.group), .string(event.reason?.rawValue ?? ""), .uint64(event.generation)]
            )
        case .cleared:
            return ("Cleared", [.string(event.group), .string(event.cause ?? "")])
        case .flushRequested, .state, .unknown:
            return nil
        }
    }

    // MARK: The bus thread

    private func run() {
        var retry: Duration = .milliseconds(250)
        var warned = false
        while !state.withLock({ $0.stopping }) {
            do {
                try serve()
                retry = .milliseconds(250)
                warned = false
            } catch {
                state.withLock { $0.connected = false }
                // Once per outage at warning level; the retries at debug level.
                logger.log(
                    level: warned ? .debug : .warning,
                    "D-Bus is not reachable; signals are not announced until it is",
                    metadata: ["authd.error": "\(error)", "authd.retry_in": "\(retry)"]
                )
                warned = true
                waitForWakeUp(timeout: retry)
                retry = min(retry * 2, Self.maximumRetryInterval)
            }
        }
        close(wakeUp.read)
        close(wakeUp.write)
    }

    /// Connects, owns the name and announces until stopped (returns) or the connection fails (throws).
    private func serve() throws(SystemdError) {
        let connection: BusConnection
        switch bus {
        case .system: connection = try BusConnection.system()
        case .user: connection = try BusConnection.user()
        case .address(let address): connection = try BusConnection(address: address)
        }
        try connection.requestName(Self.name)
        let watchers = BusWatchers(connection: connection, access: access, logger: logger)
        let watch = BusMethod(member: Self.watchMember, signature: "s", parameterNames: ["group"]) { call in
            watchers.watch(call)
        }
        let object = try connection.exportObject(
            path: Self.path, interface: Self.interface, methods: [watch], signals: Self.signals)
        defer { object.cancel() }
        state.withLock { $0.connected = true }
        logger.info("Announcing on D-Bus", metadata: ["authd.bus_name": "\(Self.name)"])

        while true {
            let (events, stopping) = state.withLock { state in
                defer { state.queue.removeAll() }
                return (state.queue, state.stopping)
            }
            for event in events {
                guard let (member, arguments) = Self.signal(for: event) else { continue }
                if access == nil {
                    try connection.emitSignal(
                        path: Self.path, interface: Self.interface, member: member, arguments: arguments)
                    continue
                }
                for peer in watchers.peers(allowedToSee: event.group) {
                    try connection.emitSignal(
                        path: Self.path, interface: Self.interface, member: member, arguments: arguments,
                        destination: peer)
                }
            }
            while try connection.process() {}
            if stopping {
                try connection.flush()
                state.withLock { $0.connected = false }
                return
            }
            pollOnce(connection)
        }
    }

    /// Waits until the bus has work, an event is queued, or the bus's own timeout passes.
    private func pollOnce(_ connection: BusConnection) {
        var fds = [
            pollfd(fd: connection.fileDescriptor, events: connection.events, revents: 0),
            pollfd(fd: wakeUp.read, events: Int16(POLLIN), revents: 0),
        ]
        let timeout = connection.timeout.map(Self.milliseconds) ?? -1
        _ = poll(&fds, 2, timeout)
        drainWakeUp()
    }

    private func waitForWakeUp(timeout: Duration) {
        var fd = pollfd(fd: wakeUp.read, events: Int16(POLLIN), revents: 0)
        _ = poll(&fd, 1, Self.milliseconds(timeout))
        drainWakeUp()
    }

    private func signalThread() {
        var byte: UInt8 = 1
        _ = write(wakeUp.write, &byte, 1)  // a full buffer already wakes the thread
    }

    private func drainWakeUp() {
        var bytes = [UInt8](repeating: 0, count: 256)
        while read(wakeUp.read, &bytes, bytes.count) > 0 {}
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        Int32(min(max(0, (duration / .milliseconds(1)).rounded(.up)), Double(Int32.max)))
    }
}

/// The peers that called `Watch` on the system bus, and the groups each watches. Used on the bus thread only.
private final class BusWatchers {
    private struct Peer {
        var caller: Caller
        var groups: Set<AppGroup> = []
        var track: BusPeerTrack?
    }

    private unowned let connection: BusConnection
    private let access: AccessControl?
    private let logger: Logger
    private var peers: [String: Peer] = [:]

    init(connection: BusConnection, access: AccessControl?, logger: Logger) {
        self.connection = connection
        self.access = access
        self.logger = logger
    }

    /// `Watch(s group)`: the caller receives the group's signals from now on, if it may use the group.
    func watch(_ call: BusMethodCall) -> BusMethodReply {
        guard let name = call.string(), let group = try? AppGroup(name) else {
            return .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "Watch needs an app group name")
        }
        guard let uid = call.senderUID() else {
            return .error(
                name: "org.freedesktop.DBus.Error.AccessDenied", message: "the bus did not say who is calling")
        }
        // The user database gives the caller's groups (the bus vouches only for the uid).
        let caller = Caller(pid: 0, uid: uid, gid: gid_t.max)
        guard access?.allows(caller, group) ?? true else {
            return .error(
                name: "org.freedesktop.DBus.Error.AccessDenied",
                message: "uid \(uid) may not use the app group \(group); see exponea-authd.conf(5)")
        }
        let sender = call.sender
        var peer = peers[sender] ?? Peer(caller: caller)
        guard peers[sender] != nil || peers.count < BusAnnouncer.maximumWatchingPeers else {
            return .error(name: "org.freedesktop.DBus.Error.LimitsExceeded", message: "too many peers watch")
        }
        guard peer.groups.contains(group) || peer.groups.count < BusAnnouncer.maximumWatchesPerPeer else {
            return .error(
                name: "org.freedesktop.DBus.Error.LimitsExceeded",
                message: "a peer may watch at most \(BusAnnouncer.maximumWatchesPerPeer) groups")
        }
        if peer.track == nil {
            do {
                peer.track = try connection.track(sender) { [weak self] in self?.peers[sender] = nil }
            } catch {
                return .error(name: "org.freedesktop.DBus.Error.Failed", message: "cannot track the caller: \(error)")
            }
        }
        peer.groups.insert(group)
        peers[sender] = peer
        return .empty
    }

    /// The unique names of the peers that watch `group` and may use it now.
    func peers(allowedToSee name: String) -> [String] {
        guard let group = try? AppGroup(name) else { return [] }
        return peers.compactMap { sender, peer in
            peer.groups.contains(group) && (access?.allows(peer.caller, group) ?? true) ? sender : nil
        }
    }
}
