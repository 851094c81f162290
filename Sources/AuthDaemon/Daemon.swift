import AuthCore
import AuthStore
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
/// ```swift
/// var signals = SignalWaiter()          // first, before any thread starts
/// let daemon = try Daemon(mode: .user, paths: paths, environment: environment, logger: logger)
/// daemon.run(signals: &signals)         // until SIGTERM or SIGINT
/// ```
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
    /// Who may use which group.
    public let access: AccessControl

    private let timer: WallClockTimer
    private let notifier: ServiceNotifier
    private let logger: Logger

    /// The default access configuration directory.
    public static let defaultConfigurationDirectory = "/etc/exponea-authd"

    /// Opens the store (creating it, and its key when no credential is given), loads every app group and, in
    /// system mode, reads the access configuration.
    ///
    /// - Throws: ``DaemonError`` saying what stopped the start and how to fix it.
    public init(
        mode: DaemonMode,
        paths: DaemonPaths,
        environment: [String: String],
        configurationDirectory: String = defaultConfigurationDirectory,
        notifier: ServiceNotifier = ServiceNotifier(),
        logger: Logger
    ) throws(DaemonError) {
        self.mode = mode
        self.paths = paths
        self.configurationDirectory = configurationDirectory
        self.notifier = notifier
        self.logger = logger
        let records: [TokenRecord]
        do {
            if mode == .user { try Self.createMissingParents(of: paths.stateDirectory) }
            var credentials = environment
            credentials["CREDENTIALS_DIRECTORY"] = paths.credentialsDirectory
            let key = try StoreKey.resolve(directory: paths.stateDirectory, environment: credentials, logger: logger)
            store = try TokenStore(directory: paths.stateDirectory, key: key, logger: logger)
            records = try store.loadAll()
        } catch {
            throw DaemonError(message: "cannot open the token store in \(paths.stateDirectory): \(error)")
        }
        do {
            timer = try WallClockTimer()
        } catch {
            throw DaemonError(message: "cannot create the expiry timer: \(error)")
        }
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
        for record in records {
            logger.debug(
                "Loaded app group",
                metadata: [
                    "authd.group": "\(record.group)",
                    "authd.state": "\(TokenState(record.token, at: now))",
                    "authd.generation": "\(record.generation)",
                ]
            )
        }
        service = AuthService(store: store, records: records, timer: timer, logger: logger)
        logger.info(
            "Token store ready",
            metadata: ["authd.groups": "\(records.count)", "authd.state_directory": "\(paths.stateDirectory)"]
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

    /// A one-line status for `systemctl status`.
    public var status: String {
        let groups = runBlocking { await service.summaries() }
        let withToken = groups.count { $0.hasToken }
        return "Holding \(groups.count) app group\(groups.count == 1 ? "" : "s") (\(withToken) with a token)"
    }

    /// Starts the expiry timer and the D-Bus announcements, tells systemd the daemon is ready, then serves
    /// until SIGTERM or SIGINT, pinging the watchdog when systemd asked for it. SIGHUP reloads the access
    /// configuration in system mode (a bad file keeps the old one).
    public func run(signals: inout SignalWaiter) {
        let expiryLoop = ExpiryTimerLoop(service: service, timer: timer, logger: logger)
        let announcer = BusAnnouncer(bus: mode == .system ? .system : .user, logger: logger)
        let events = runBlocking { await service.observeAll() }
        let forwarding = Task { for await event in events { announcer.announce(event) } }
        runBlocking { await service.start() }

        notifier.notify(.ready, .status(status))
        let watchdog = notifier.watchdogInterval.map { $0 / 2 }
        while true {
            switch signals.next(timeout: watchdog) {
            case nil:
                notifier.notify(.watchdog)
            case .hangUp?:
                reload()
            case .terminate?, .interrupt?:
                logger.info("Stopping")
                notifier.notify(.stopping, .status("Stopping"))
                forwarding.cancel()
                announcer.stop()
                expiryLoop.stop()
                return
            }
        }
    }

    /// Re-reads the access configuration (system mode).
    private func reload() {
        guard mode == .system else {
            logger.notice("SIGHUP received: there is no configuration to reload in user mode")
            return
        }
        notifier.notify(.reloading, .status("Reloading the access configuration"))
        do {
            let policy = try AccessPolicy(directory: configurationDirectory)
            for warning in policy.warnings { logger.warning("\(warning)") }
            access.replace(with: policy)
            logger.info("Reloaded the access configuration", metadata: ["authd.groups": "\(policy.rules.count)"])
        } catch {
            logger.error("Keeping the previous access configuration: \(error)")
        }
        notifier.notify(.ready, .status(status))
    }
}

/// Why the daemon could not start.
public struct DaemonError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do about it.
    public var message: String
    public var description: String { message }
}
