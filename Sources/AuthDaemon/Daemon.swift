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

/// The exponea-authd service: the token store of every app group, loaded and held for the apps of the device.
///
/// ```swift
/// var signals = SignalWaiter()          // first, before any thread starts
/// let daemon = try Daemon(mode: .user, paths: paths, environment: environment, logger: logger)
/// daemon.run(signals: &signals)         // until SIGTERM or SIGINT
/// ```
public struct Daemon {
    /// How the daemon runs.
    public let mode: DaemonMode
    /// Where its state is.
    public let paths: DaemonPaths
    /// The opened token store.
    public let store: TokenStore
    /// The app groups held, each with its record as loaded at start.
    public private(set) var records: [AppGroup: TokenRecord]

    private let notifier: ServiceNotifier
    private let logger: Logger

    /// Opens the store (creating it, and its key when no credential is given) and loads every app group.
    ///
    /// - Throws: ``DaemonError`` saying what stopped the start and how to fix it.
    public init(
        mode: DaemonMode,
        paths: DaemonPaths,
        environment: [String: String],
        notifier: ServiceNotifier = ServiceNotifier(),
        logger: Logger
    ) throws(DaemonError) {
        self.mode = mode
        self.paths = paths
        self.notifier = notifier
        self.logger = logger
        do {
            if mode == .user { try Self.createMissingParents(of: paths.stateDirectory) }
            var credentials = environment
            credentials["CREDENTIALS_DIRECTORY"] = paths.credentialsDirectory
            let key = try StoreKey.resolve(directory: paths.stateDirectory, environment: credentials, logger: logger)
            store = try TokenStore(directory: paths.stateDirectory, key: key, logger: logger)
            records = Dictionary(uniqueKeysWithValues: try store.loadAll().map { ($0.group, $0) })
        } catch {
            throw DaemonError(message: "cannot open the token store in \(paths.stateDirectory): \(error)")
        }
        let now = Date()
        for record in records.values.sorted(by: { $0.group < $1.group }) {
            logger.debug(
                "Loaded app group",
                metadata: [
                    "authd.group": "\(record.group)",
                    "authd.state": "\(TokenState(record.token, at: now))",
                    "authd.generation": "\(record.generation)",
                ]
            )
        }
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
        let withToken = records.values.count { $0.token != nil }
        return "Holding \(records.count) app group\(records.count == 1 ? "" : "s") (\(withToken) with a token)"
    }

    /// Tells systemd the daemon is ready, then serves until SIGTERM or SIGINT, pinging the watchdog when
    /// systemd asked for it.
    public func run(signals: inout SignalWaiter) {
        notifier.notify(.ready, .status(status))
        let watchdog = notifier.watchdogInterval.map { $0 / 2 }
        while true {
            switch signals.next(timeout: watchdog) {
            case nil:
                notifier.notify(.watchdog)
            case .hangUp?:
                logger.notice("SIGHUP received: there is no configuration to reload")
            case .terminate?, .interrupt?:
                logger.info("Stopping")
                notifier.notify(.stopping, .status("Stopping"))
                return
            }
        }
    }
}

/// Why the daemon could not start.
public struct DaemonError: Error, Sendable, CustomStringConvertible {
    /// What went wrong and what to do about it.
    public var message: String
    public var description: String { message }
}
