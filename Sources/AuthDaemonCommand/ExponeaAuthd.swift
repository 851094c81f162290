// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthDaemon
import CProcessControl
import Logging
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// The `exponea-authd` command: the daemon's command line and start-up, for the multi-call `exponea-authd` binary.
public enum ExponeaAuthdProgram {
    /// Runs the daemon with `arguments` (the command line without the program name) until SIGTERM or SIGINT,
    /// then exits the process with its status; it never returns.
    ///
    /// The caller must be synchronous and must not have started a task: the daemon blocks the signals it takes
    /// before any thread starts, and runs Swift concurrency on an executor of its own, installed before the
    /// first task.
    public static func main(_ arguments: [String]) -> Never {
        ExponeaAuthd.main(arguments)
        exit(0)
    }
}

struct ExponeaAuthd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exponea-authd",
        abstract: "Hold one Bloomreach stream JWT per app group for the apps of this device.",
        discussion: """
            Runs in the foreground as a systemd service (Type=notify). In system mode the state is in \
            /var/lib/exponea-authd (or $STATE_DIRECTORY); with --user it is in \
            $XDG_STATE_HOME/exponea-authd (~/.local/state/exponea-authd). The store is encrypted with the \
            credential exponea-authd.store-key when systemd passes one, and with a generated key file \
            otherwise. SIGTERM and SIGINT stop the daemon.
            """,
        version: Daemon.version
    )

    @Flag(name: .long, help: "Serve the current user's session instead of the whole system.")
    var user = false

    @Option(name: .long, help: ArgumentHelp("Keep the token store in this directory.", valueName: "path"))
    var stateDirectory: String?

    @Option(name: .long, help: ArgumentHelp("Serve the Varlink socket at this path.", valueName: "path"))
    var socket: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Read the access configuration (authd.conf, authd.conf.d/) from this directory (system mode).",
            valueName: "path"
        )
    )
    var configDirectory: String = Daemon.defaultConfigurationDirectory

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a clear waits for the apps of the group to acknowledge their flush (0-600).",
            valueName: "seconds"
        )
    )
    var flushTimeout: Double = 2

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a refresh claim holds when its app neither sets a token nor goes away (0.1-600).",
            valueName: "seconds"
        )
    )
    var refreshLease: Double = AuthService.defaultRefreshLease

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many clients may be connected at once (1-\(Daemon.connectionLimitRange.upperBound)).",
            valueName: "count"
        )
    )
    var maxConnections: Int = Daemon.defaultMaximumConnections

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many clients one user other than root and the daemon's own may have connected at once (default: a quarter of --max-connections, at most \(Daemon.defaultShareCeiling); at most half of it).",
            valueName: "count"
        )
    )
    var maxConnectionsPerUser: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How many calls one connection may have read and not yet answered before it stops reading (1-1024).",
            valueName: "count"
        )
    )
    var maxCallsInFlight: Int = Daemon.defaultMaximumCallsInFlight

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Close a connection with no call in flight that sent no whole message for this long (1-86400).",
            valueName: "seconds"
        )
    )
    var idleTimeout: Int = Daemon.defaultIdleTimeoutSeconds

    @Option(help: "Where to log: journal, console, or auto (the journal when started by systemd).")
    var logTarget: LogTarget = .auto

    @Option(help: "The least severe level logged: trace, debug, info, notice, warning, error or critical.")
    var logLevel: LogLevel = .info

    func validate() throws {
        if let stateDirectory, !stateDirectory.hasPrefix("/") {
            throw ValidationError("--state-directory needs an absolute path, not '\(stateDirectory)'")
        }
        guard (0...600).contains(flushTimeout) else {
            throw ValidationError("--flush-timeout needs a number of seconds from 0 to 600, not \(flushTimeout)")
        }
        guard (0.1...600).contains(refreshLease) else {
            throw ValidationError("--refresh-lease needs a number of seconds from 0.1 to 600, not \(refreshLease)")
        }
        guard Daemon.connectionLimitRange.contains(maxConnections) else {
            let range = Daemon.connectionLimitRange
            throw ValidationError(
                "--max-connections needs a number from \(range.lowerBound) to \(range.upperBound), not \(maxConnections)"
            )
        }
        if let maxConnectionsPerUser {
            let largest = Daemon.largestShare(ofMaximum: maxConnections)
            guard (1...largest).contains(maxConnectionsPerUser) else {
                throw ValidationError(
                    """
                    --max-connections-per-user needs a number from 1 to \(largest), not \(maxConnectionsPerUser): one \
                    user's share must leave as many connections for the others (--max-connections \(maxConnections) \
                    leaves \(Daemon.ordinaryPool(ofMaximum: maxConnections)) to users other than root)
                    """
                )
            }
        }
        guard (1...1024).contains(maxCallsInFlight) else {
            throw ValidationError("--max-calls-in-flight needs a number from 1 to 1024, not \(maxCallsInFlight)")
        }
        guard (1...86_400).contains(idleTimeout) else {
            throw ValidationError("--idle-timeout needs a number of seconds from 1 to 86400, not \(idleTimeout)")
        }
        if let socket, !socket.hasPrefix("/") || socket.utf8.count > 107 {
            throw ValidationError("--socket needs an absolute path of at most 107 bytes, not '\(socket)'")
        }
    }

    func run() throws {
        // Before any token is in memory: no core dump, whatever `ulimit -c` or LimitCORE= says, and no ptrace or
        // /proc/PID/mem by other processes of this user (as ssh-agent does).
        let coreDumps = authd_disable_core_dumps() == 0 ? nil : String(cString: strerror(errno))
        // First, before any thread starts, so that every thread inherits the blocked signals: the lifecycle's
        // loop takes them.
        let lifecycle: DaemonLifecycle
        do {
            lifecycle = try DaemonLifecycle()
        } catch {
            var message = "exponea-authd: \(error)\n"
            _ = message.withUTF8 { write(2, $0.baseAddress, $0.count) }
            throw ExitCode.failure
        }

        let mode: DaemonMode = user ? .user : .system
        let identifier = "exponea-authd"
        let target = logTarget
        let level = Logger.Level(rawValue: logLevel.rawValue) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = SystemdLogging.handler(label: label, identifier: identifier, target: target)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "exponea-authd")
        if let coreDumps {
            logger.warning("Cannot disable core dumps (prctl PR_SET_DUMPABLE): \(coreDumps); set LimitCORE=0")
        }
        // Each client holds a descriptor: take what systemd (or the shell) allows, not the select(2)-era 1024.
        let descriptors = FileDescriptorLimit.raiseToHardLimit()
        logger.debug("Open file limit", metadata: ["authd.nofile": "\(descriptors.map(String.init) ?? "unknown")"])
        if let descriptors, descriptors < maxConnections + Daemon.reservedDescriptors {
            logger.warning(
                """
                The open file limit (\(descriptors)) is below --max-connections \(maxConnections): clients beyond it \
                are refused; raise LimitNOFILE= or lower --max-connections
                """
            )
        }

        let environment = Self.environment()
        let paths = DaemonPaths(
            mode: mode,
            environment: environment,
            uid: getuid(),
            stateDirectory: stateDirectory,
            socketPath: socket
        )
        let (configDirectory, flushTimeout, maxConnections) = (configDirectory, flushTimeout, maxConnections)
        do {
            // On a thread of its own, while the lifecycle's loop takes signals: a SIGTERM ends a start that hangs.
            try lifecycle.run(logger: logger) { executor throws(DaemonError) in
                try Daemon(
                    mode: mode,
                    paths: paths,
                    environment: environment,
                    configurationDirectory: configDirectory,
                    flushTimeout: .milliseconds(Int((flushTimeout * 1000).rounded())),
                    refreshLease: refreshLease,
                    maximumConnections: maxConnections,
                    maximumConnectionsPerUser: maxConnectionsPerUser,
                    maximumCallsInFlight: maxCallsInFlight,
                    idleTimeout: .seconds(idleTimeout),
                    storeWriters: StoreWriters.shared,
                    executor: executor,
                    logger: logger
                )
            }
        } catch {
            logger.critical("Cannot start: \(error)")
            throw ExitCode.failure
        }
    }
}

extension ExponeaAuthd {
    /// The process environment, read from `environ` (Foundation's `ProcessInfo` is not linked in).
    static func environment() -> [String: String] {
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let assignment = String(cString: pointer)
            if let equals = assignment.firstIndex(of: "=") {
                let name = String(assignment[..<equals])
                // The first of two assignments counts, as getenv(3) reads it.
                if environment[name] == nil {
                    environment[name] = String(assignment[assignment.index(after: equals)...])
                }
            }
            entry += 1
        }
        return environment
    }
}

/// `--log-level`: swift-log's levels, spelled the same.
enum LogLevel: String, CaseIterable, ExpressibleByArgument {
    case trace, debug, info, notice, warning, error, critical
}

extension LogTarget: ExpressibleByArgument {}
