// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import AuthTransport
import CMalloc
import Logging
import Systemd

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The exponea-authd service: every app group's token, held for the apps of the device, with the expiry
/// timers, the access configuration and the D-Bus announcements.
///
/// Its life (start-up, serving, signals, the watchdog, shutdown) is run by ``DaemonLifecycle``:
///
/// ```swift
/// let lifecycle = try DaemonLifecycle()                 // first, before any thread starts
/// try lifecycle.run(logger: logger) { executor throws(DaemonError) in   // until SIGTERM or SIGINT
///     try Daemon(mode: .user, paths: paths, environment: environment, storeWriters: StoreWriters.shared,
///                executor: executor, logger: logger)
/// }
/// ```
///
/// It owns no thread: the loop whose executor runs its service's actor, tasks and timers (``LoopExecutor``), and
/// the threads that write the store (a ``StoreWriterPool``), are handed in.
public struct Daemon: Sendable {
    /// How the daemon runs.
    public let mode: DaemonMode
    /// Where its state is.
    public let paths: DaemonPaths
    /// Where the access configuration is read from in system mode (`authd.conf`, `authd.conf.d/`).
    public let configurationDirectory: String
    /// The opened token store.
    public let store: TokenStore
    /// The groups' tokens and their semantics.
    public let service: AuthService
    /// The `com.exponea.Auth` calls, on the service's loop; it counts them for the metrics.
    let dispatcher: AuthCallDispatcher

    /// How many clients may be connected at once; one more is closed at once.
    public let maximumConnections: Int
    /// How many clients one user (other than root and the daemon's own) may have connected at once.
    public let maximumConnectionsPerUser: Int
    /// How many calls one connection may have read and not yet answered before it stops reading.
    public let maximumCallsInFlight: Int
    /// How long a connection with no call in flight may go without sending a whole message.
    public let idleTimeout: Duration

    /// When the daemon started and became ready, for the metrics.
    let lifetime: LoopBound<DaemonLifetime>
    /// The server's connections and refusals, for the metrics.
    let connections: LoopBound<ConnectionCounters>
    private let notifier: ServiceNotifier
    private let logger: Logger
    /// Held for the daemon's life: a second daemon on the same store refuses to start.
    private let lock: StoreLock

    /// The default access configuration directory.
    public static let defaultConfigurationDirectory = "/etc/exponea-authd"

    /// The default bound on connected clients (`--max-connections`).
    public static let defaultMaximumConnections = 4096
    /// The bounds `--max-connections` accepts.
    public static let connectionLimitRange = 1...1_048_576
    /// The most that the default share of one user (`--max-connections-per-user`) grows to.
    public static let defaultShareCeiling = 256

    /// The connections that users other than root and the daemon's own may hold together: all but a sixteenth
    /// of `maximumConnections` (``ConnectionAdmission``'s reserve).
    public static func ordinaryPool(ofMaximum maximumConnections: Int) -> Int {
        maximumConnections - maximumConnections / 16
    }

    /// The default bound on one user's connected clients: a quarter of what ordinary users may hold together,
    /// at most ``defaultShareCeiling``, so that one user at its share leaves room for others whatever
    /// `--max-connections` is.
    public static func defaultMaximumConnectionsPerUser(ofMaximum maximumConnections: Int) -> Int {
        max(1, min(defaultShareCeiling, ordinaryPool(ofMaximum: maximumConnections) / 4))
    }

    /// The largest share `--max-connections-per-user` may give one user: half of what ordinary users may hold
    /// together, so that another user can hold as many.
    public static func largestShare(ofMaximum maximumConnections: Int) -> Int {
        max(1, ordinaryPool(ofMaximum: maximumConnections) / 2)
    }
    /// The default bound on one connection's calls in flight (`--max-calls-in-flight`).
    public static let defaultMaximumCallsInFlight = 16
    /// The default idle timeout of a connection, in seconds (`--idle-timeout`).
    public static let defaultIdleTimeoutSeconds = 300
    /// Descriptors the daemon needs besides its clients' (the store, the listening socket, the bus, the timers,
    /// the loop), for the check of the open file limit against the connection bound.
    public static let reservedDescriptors = 64

    /// Opens the store (creating it, and its key when no credential is given), loads every app group and, in
    /// system mode, reads the access configuration.
    ///
    /// - Throws: ``DaemonError`` saying what stopped the start and how to fix it.
    public init(
        mode: DaemonMode,
        paths: DaemonPaths,
        environment: [String: String],
        configurationDirectory: String = defaultConfigurationDirectory,
        flushTimeout: Duration = .seconds(2),
        refreshLease: TimeInterval = AuthService.defaultRefreshLease,
        maximumConnections: Int = defaultMaximumConnections,
        maximumConnectionsPerUser: Int? = nil,
        maximumCallsInFlight: Int = defaultMaximumCallsInFlight,
        idleTimeout: Duration = .seconds(defaultIdleTimeoutSeconds),
        storeWriters: any StoreWriterPool,
        executor: LoopExecutor,
        notifier: ServiceNotifier = ServiceNotifier(),
        logger: Logger
    ) throws(DaemonError) {
        self.mode = mode
        self.lifetime = LoopBound(
            handingOver: DaemonLifetime(version: Self.version, started: DaemonLifetime.processStart()), to: executor)
        self.maximumConnections = maximumConnections
        self.maximumConnectionsPerUser =
            maximumConnectionsPerUser ?? Self.defaultMaximumConnectionsPerUser(ofMaximum: maximumConnections)
        self.maximumCallsInFlight = maximumCallsInFlight
        self.idleTimeout = idleTimeout
        self.paths = paths
        self.configurationDirectory = configurationDirectory
        self.notifier = notifier
        self.logger = logger
        var records: [TokenRecord]
        do {
            if mode == .user { try Self.createMissingParents(of: paths.stateDirectory) }
            // First: the key file and the temporary files the store removes belong to the store's owner.
            lock = try StoreLock(directory: paths.stateDirectory)
            var credentials = environment
            credentials["CREDENTIALS_DIRECTORY"] = paths.credentialsDirectory
            let key = try StoreKey.resolve(directory: paths.stateDirectory, environment: credentials, logger: logger)
            (store, records) = try TokenStore.openLoadingAll(
                directory: paths.stateDirectory, key: key, logger: logger)
        } catch {
            throw DaemonError(message: "cannot open the token store in \(paths.stateDirectory): \(error)")
        }
        let timer: WallClockTimer
        do {
            timer = try WallClockTimer()
        } catch {
            throw DaemonError(message: "cannot create the expiry timer: \(error)")
        }
        let access: AccessControl
        switch mode {
        case .user:
            access = AccessControl(owner: getuid())
        case .system:
            do {
                let policy = try AccessPolicy(directory: configurationDirectory)
                for warning in policy.warnings { logger.warning("\(warning)") }
                access = AccessControl(policy: policy)
            } catch {
                throw DaemonError(message: "cannot use the access configuration: \(error)")
            }
        }
        let now = Date()
        for record in records where logger.logLevel <= .debug {
            logger.debug(
                "Loaded app group",
                metadata: [
                    "authd.group": "\(record.group)",
                    "authd.state": "\(TokenState(record.token, at: now))",
                    "authd.generation": "\(record.generation)",
                ]
            )
        }
        service = AuthService(
            store: store, records: records, refreshLease: refreshLease, flushTimeout: flushTimeout,
            clock: SystemClock(executor: executor), storeWriters: storeWriters, executor: executor, timer: timer,
            logger: logger)
        dispatcher = AuthCallDispatcher(service: service, access: access, logger: logger)
        connections = LoopBound(handingOver: ConnectionCounters(), to: executor)
        let groupCount = records.count
        records = []
        // Reading the records left free memory in the arenas of the threads that read them, growing with the
        // groups; give it back.
        malloc_trim(0)
        logger.info(
            "Token store ready",
            metadata: ["authd.groups": "\(groupCount)", "authd.state_directory": "\(paths.stateDirectory)"]
        )
    }

    /// Creates the missing parents of a user's state directory (`~/.local/state` on a new account) with mode
    /// 0700, as the XDG base directory specification asks.
    static func createMissingParents(of path: String) throws(DaemonError) {
        var parent = ""
        for component in path.split(separator: "/").dropLast() {
            parent += "/" + component
            if mkdir(parent, 0o700) != 0 && errno != EEXIST {
                let reason = String(cString: strerror(errno))
                throw DaemonError(message: "cannot create the directory \(parent): \(reason)")
            }
        }
    }

    /// The status line, with `clients` connected (nil: not serving yet). On the loop: the service's actor runs
    /// there.
    func statusLine(clients: Int?) -> String {
        let (groups, withToken) = service.onLoop { $0.groupCounts() }
        return Self.statusLine(groups: groups, withToken: withToken, clients: clients)
    }

    private static func statusLine(groups: Int, withToken: Int, clients: Int?) -> String {
        let held = "Holding \(groups) app group\(groups == 1 ? "" : "s") (\(withToken) with a token)"
        guard let clients else { return held }
        return held + ", \(clients) client\(clients == 1 ? "" : "s") connected"
    }

    /// `org.varlink.service`, `com.exponea.Auth` and `io.systemd.Metrics`.
    var serviceHandler: VarlinkServiceHandler {
        handler(serving: [
            (
                AuthInterface.name, AuthInterface.description,
                dispatcher
            ),
            metricsInterface,
        ])
    }

    /// `org.varlink.service` and `io.systemd.Metrics` alone, for the report socket.
    var reportHandler: VarlinkServiceHandler { handler(serving: [metricsInterface]) }

    /// The daemon's version, as GetInfo reports it.
    public static let version = ProductVersion.current

    private var metricsInterface: (name: String, description: String, handler: any VarlinkCallHandler) {
        (
            MetricsInterface.name, MetricsInterface.description,
            MetricsCallHandler(
                service: service, dispatcher: dispatcher, connections: connections, lifetime: lifetime)
        )
    }

    /// `org.varlink.service` (what GetInfo says of the daemon) over `interfaces`.
    private func handler(
        serving interfaces: [(name: String, description: String, handler: any VarlinkCallHandler)]
    ) -> VarlinkServiceHandler {
        VarlinkServiceHandler(
            vendor: "Bloomreach", product: "exponea-authd", version: Self.version,
            url: "https://github.com/exponea/exponea-authd", interfaces: interfaces)
    }

    /// The name systemd passes the report socket by (`FileDescriptorName=` of exponea-authd-report.socket).
    static let reportSocketName = "report"

    /// Where the daemon serves: the socket systemd passed, or its own in the runtime directory; and the report
    /// socket (`/run/systemd/report/com.exponea.AuthD`, for `systemd-report`) when systemd passed it.
    func listenConfigurations() throws(DaemonError) -> (
        main: VarlinkServer.Configuration, report: VarlinkServer.Configuration?
    ) {
        let passed: [ListenedSocket]
        do {
            passed = try ListenedSocket.takeAll().filter(\.isListeningUnixStream)
        } catch {
            throw DaemonError(message: "\(error)")
        }
        var report: VarlinkServer.Configuration?
        if let socket = passed.first(where: { $0.name == Self.reportSocketName }) {
            logger.info("Serving metrics on the report socket", metadata: ["authd.fd": "\(socket.fileDescriptor)"])
            var configuration = VarlinkServer.Configuration(listen: .descriptor(socket.fileDescriptor))
            // Read by systemd-report now and then: a few connections, the same counters of refusals.
            configuration.maximumConnections = 16
            configuration.maximumConnectionsPerUser = 4
            configuration.counters = connections
            configuration.namesUserUnits = mode == .user
            report = configuration
        }
        return (try listenConfiguration(passed.filter { $0.name != Self.reportSocketName }), report)
    }

    /// A socket systemd passed takes precedence; otherwise the daemon binds its own in the runtime directory.
    private func listenConfiguration(_ passed: [ListenedSocket]) throws(DaemonError) -> VarlinkServer.Configuration {
        if let socket = passed.first {
            logger.info("Using the socket systemd passed", metadata: ["authd.fd": "\(socket.fileDescriptor)"])
            return configuration(listen: .descriptor(socket.fileDescriptor))
        }
        let directory = String(
            paths.socketPath[..<(paths.socketPath.lastIndex(of: "/") ?? paths.socketPath.startIndex)])
        if !directory.isEmpty {
            try RuntimeDirectory.prepare(directory, mode: mode == .user ? 0o700 : 0o755, private: mode == .user)
        }
        if paths.usesRuntimeFallback {
            logger.notice(
                "XDG_RUNTIME_DIR is not set: serving in a private directory instead",
                metadata: ["authd.socket": "\(paths.socketPath)"]
            )
        }
        // In system mode anyone may connect; the access policy decides per call.
        return configuration(listen: .path(paths.socketPath, mode: mode == .user ? 0o600 : 0o666))
    }

    private func configuration(listen: VarlinkServer.Listen) -> VarlinkServer.Configuration {
        var configuration = VarlinkServer.Configuration(listen: listen)
        configuration.maximumConnections = maximumConnections
        configuration.maximumConnectionsPerUser = maximumConnectionsPerUser
        configuration.maximumCallsInFlight = maximumCallsInFlight
        configuration.idleTimeout = idleTimeout
        configuration.counters = connections
        configuration.namesUserUnits = mode == .user
        return configuration
    }

    /// Who may use which group now: the dispatcher's, on the loop.
    func currentAccess() -> AccessControl { dispatcher.onLoop { $0.currentAccess } }

    /// Re-reads the access configuration (system mode); a bad file keeps the old one.
    func reload() {
        guard mode == .system else {
            logger.notice("SIGHUP received: there is no configuration to reload in user mode")
            return
        }
        notifier.notify(.reloading, .status("Reloading the access configuration"))
        do {
            let policy = try AccessPolicy(directory: configurationDirectory)
            for warning in policy.warnings { logger.warning("\(warning)") }
            dispatcher.onLoop { $0.replaceAccessPolicy(with: policy) }
            logger.info("Reloaded the access configuration", metadata: ["authd.groups": "\(policy.rules.count)"])
        } catch {
            logger.error("Keeping the previous access configuration: \(error)")
        }
    }
}

/// Why the daemon could not start.
public struct DaemonError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do about it.
    public var message: String
    public var description: String { message }
}
