// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import DequeModule
import Logging
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
/// sd-bus objects are not thread-safe, so the announcer lives on the thread of a ``MainLoop``, which drives the
/// connection (its socket and timeouts are sources of the loop), and is handed the service's events there (the
/// service's actor runs on the same loop). Events that come before the name is owned wait for it (at most ``queueLimit``, the oldest
/// dropped first). When the bus cannot be reached it logs a warning and tries again from a timer of the loop,
/// backing off to ``maximumRetryInterval``.
public final class BusAnnouncer {
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
    /// The first pause between two connection attempts.
    static let firstRetryInterval: Duration = .milliseconds(250)
    /// The longest pause between two connection attempts.
    public static let maximumRetryInterval: Duration = .seconds(30)
    /// Events kept while the name is not owned yet; older ones are dropped first.
    public static let queueLimit = 4096

    /// The access in force now: the dispatcher's, which a reload replaces.
    public typealias AccessNow = () -> AccessControl

    private let bus: Bus
    /// Who may use which group now, when signals go only to the peers that watch (the system bus).
    private let access: AccessNow?
    private let logger: Logger
    private unowned let loop: MainLoop
    /// The connection of the current attempt, with what hangs on it.
    private var connection: BusConnection?
    private var object: BusObjectRegistration?
    private var watchers: BusWatchers?
    /// Whether the connection of the current attempt owns the name.
    private var owned = false
    /// Counts attempts, so that a late callback of an abandoned connection changes nothing.
    private var attempt = 0
    /// Events waiting for the name; a deque, as the oldest leaves at every event once it is full.
    private var pending: Deque<AuthEvent> = []
    private var retry = BusAnnouncer.firstRetryInterval
    private var retryTimer: EventSource?
    private var warned = false
    private var stopped = false
    /// Called once, when the first attempt ends (the name owned, or the bus unreachable).
    private var firstAttemptEnded: (() -> Void)?

    /// Starts connecting, on `loop`'s thread (the calling thread, which runs or will run the loop).
    ///
    /// - Parameters:
    ///   - access: nil to broadcast every signal (a user's own bus); otherwise each signal goes only to the peers
    ///     that watch its group and that the access it returns (asked at each decision, so that a reload applies
    ///     at once) lets use it.
    ///   - firstAttemptEnded: Called once on the loop, when the first attempt owns the name or fails (possibly
    ///     before `init` returns): the bus's part of the start-up is over.
    public init(
        bus: Bus, access: AccessNow? = nil, loop: MainLoop, logger: Logger,
        firstAttemptEnded: (() -> Void)? = nil
    ) {
        self.bus = bus
        self.access = access
        self.logger = logger
        self.loop = loop
        self.firstAttemptEnded = firstAttemptEnded
        connect()
    }

    /// Whether the announcer owns its name on the bus now.
    public var isConnected: Bool { owned }

    /// Sends what is queued, releases the name and stops; events announced later are dropped.
    public func stop() {
        stopped = true
        retryTimer?.cancel()
        retryTimer = nil
        // Only a connection that owns the name has anything to send; one still connecting is closed as it is.
        if owned { try? connection?.flush() }
        dropConnection()
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

    // MARK: On the loop's thread

    /// Connects, exports the object and asks for the name; the name's reply ends the attempt.
    private func connect() {
        guard !stopped else { return }
        dropConnection()
        attempt += 1
        let current = attempt
        do {
            let connection: BusConnection
            switch bus {
            case .system: connection = try BusConnection.system()
            case .user: connection = try BusConnection.user()
            case .address(let address): connection = try BusConnection(address: address)
            }
            self.connection = connection
            try loop.attach(connection)
            let watchers = BusWatchers(connection: connection, access: access, logger: logger)
            self.watchers = watchers
            let watch = BusMethod(member: Self.watchMember, signature: "s", parameterNames: ["group"]) { call in
                watchers.watch(call)
            }
            object = try connection.exportObject(
                path: Self.path, interface: Self.interface, methods: [watch], signals: Self.signals)
            try connection.onDisconnect { [weak self] in
                self?.failed(
                    SystemdError(
                        code: .busConnection, function: "sd_bus_process", errno: ECONNRESET,
                        context: "the bus closed the connection"),
                    attempt: current)
            }
            try connection.requestName(Self.name) { [weak self] error in
                guard let self else { return }
                if let error {
                    failed(error, attempt: current)
                } else {
                    owns(attempt: current)
                }
            }
        } catch {
            failed(error, attempt: current)
        }
    }

    private func owns(attempt current: Int) {
        guard current == attempt, !stopped else { return }
        owned = true
        retry = Self.firstRetryInterval
        warned = false
        logger.info("Announcing on D-Bus", metadata: ["authd.bus_name": "\(Self.name)"])
        let waiting = pending
        pending = []
        for event in waiting { emit(event) }
        endFirstAttempt()
    }

    /// The attempt `current` failed, or its connection was lost: try again later (the connection itself is
    /// dropped at the next attempt, outside the bus's own dispatch that may be reporting this).
    private func failed(_ error: any Error, attempt current: Int) {
        guard current == attempt, !stopped else { return }
        attempt += 1  // later callbacks of this connection change nothing
        owned = false
        // Once per outage at warning level; the retries at debug level.
        logger.log(
            level: warned ? .debug : .warning,
            "D-Bus is not reachable; signals are not announced until it is",
            metadata: ["authd.error": "\(error)", "authd.retry_in": "\(retry)"]
        )
        warned = true
        if let retryTimer {
            retryTimer.schedule(after: retry)
        } else {
            retryTimer = try? loop.after(retry) { [weak self] in self?.connect() }
        }
        retry = min(retry * 2, Self.maximumRetryInterval)
        endFirstAttempt()
    }

    private func endFirstAttempt() {
        guard let ended = firstAttemptEnded else { return }
        firstAttemptEnded = nil
        ended()
    }

    private func dropConnection() {
        // A connection that does not own the name has nothing worth sending, and one that is still connecting
        // would hold the release until the bus answers.
        if !owned { connection?.close() }
        owned = false
        object?.cancel()
        object = nil
        watchers = nil
        connection = nil
    }

    /// Sends `event`'s signal now, or queues it until the name is owned. On the loop's thread.
    func emit(_ event: AuthEvent) {
        guard let (member, arguments) = Self.signal(for: event) else { return }
        guard owned, let connection, let watchers else {
            pending.append(event)
            if pending.count > Self.queueLimit { pending.removeFirst(pending.count - Self.queueLimit) }
            return
        }
        do {
            if access == nil {
                try connection.emitSignal(
                    path: Self.path, interface: Self.interface, member: member, arguments: arguments)
                return
            }
            for peer in watchers.peers(allowedToSee: event.group) {
                try connection.emitSignal(
                    path: Self.path, interface: Self.interface, member: member, arguments: arguments,
                    destination: peer)
            }
        } catch {
            failed(error, attempt: attempt)
        }
    }
}

/// The peers that called `Watch` on the system bus, and the groups each watches. Used on the loop's thread only.
private final class BusWatchers {
    private struct Peer {
        var caller: Caller
        var groups: Set<AppGroup> = []
        var track: BusPeerTrack?
    }

    private unowned let connection: BusConnection
    private let access: BusAnnouncer.AccessNow?
    private let logger: Logger
    private var peers: [String: Peer] = [:]
    /// Finds a watcher's unit, from its pid as the bus gives it.
    private let units = PeerUnitResolver()

    init(connection: BusConnection, access: BusAnnouncer.AccessNow?, logger: Logger) {
        self.connection = connection
        self.access = access
        self.logger = logger
    }

    /// `Watch(s group)`: the caller receives the group's signals from now on, if it may use the group. Its
    /// groups are asked of the bus first, so the reply comes later.
    func watch(_ call: BusMethodCall) -> BusMethodReply {
        guard let name = call.string(), let group = try? AppGroup(name) else {
            return .error(name: "org.freedesktop.DBus.Error.InvalidArgs", message: "Watch needs an app group name")
        }
        guard let (uid, gid, _) = call.senderCredentials() else {
            return .error(
                name: "org.freedesktop.DBus.Error.AccessDenied", message: "the bus did not say who is calling")
        }
        let sender = call.sender
        // The groups and the pid the bus vouches for (the kernel's, of the caller's connection): a user allowed
        // through Groups= by a supplementary group, or through Units= by its unit, may watch, as it may call over
        // Varlink. sd-bus of systemd 252 reads neither from the bus, so they are asked for here.
        let reply = call.replyLater()
        do {
            try connection.credentials(of: sender) { [weak self] credentials in
                guard let self else {
                    reply.send(.error(name: "org.freedesktop.DBus.Error.Failed", message: "the daemon is stopping"))
                    return
                }
                var caller = Caller(
                    pid: credentials?.pid ?? 0, uid: uid, gid: gid ?? gid_t.max, groups: credentials?.groups ?? [])
                self.identify(&caller)
                reply.send(self.watch(group, by: caller, sender: sender))
            }
        } catch {
            reply.send(watch(group, by: Caller(pid: 0, uid: uid, gid: gid ?? gid_t.max), sender: sender))
        }
        return .later
    }

    /// Adds to `caller` the unit of its process: a pidfd opened by the pid the bus gave (dbus-daemon of Debian 12
    /// gives no pidfd), whose process must run as the caller's uid, and that still runs after its cgroup is read.
    private func identify(_ caller: inout Caller) {
        guard let process = ProcessDescriptor.open(caller.pid),
            let found = units.units(of: process, pid: caller.pid, uid: caller.uid)
        else { return }
        caller.unit = found.unit
        caller.userUnit = found.userUnit
    }

    private func watch(_ group: AppGroup, by caller: Caller, sender: String) -> BusMethodReply {
        guard access?().allows(caller, group) ?? true else {
            return .error(
                name: "org.freedesktop.DBus.Error.AccessDenied",
                message:
                    "uid \(caller.uid)\(caller.unit.map { " (\($0))" } ?? "") may not use the app group \(group); "
                    + "see exponea-authd.conf(5)")
        }
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
        let access = access?()
        return peers.compactMap { sender, peer in
            peer.groups.contains(group) && (access?.allows(peer.caller, group) ?? true) ? sender : nil
        }
    }
}
