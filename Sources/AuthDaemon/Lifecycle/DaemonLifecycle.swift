// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTransport
import Logging
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// The one owner of the daemon's life: an sd-event loop (``MainLoop``) on the main thread, whose sources are the
/// control signals, the watchdog's timer, the expiry ``WallClockTimer``, the D-Bus connection, the Varlink
/// socket and its connections, and the queue of Swift concurrency's jobs (``LoopExecutor``): the service's actor,
/// whose executor it is, and the connections' tasks run on this thread too. Between two events the main thread sleeps in one
/// `epoll_wait`: an idle daemon with no watchdog never wakes. The only other threads are the store's writers
/// (``StoreWriters``) and, while it runs, the start-up's.
///
/// The phases, each started from the loop:
/// 1. Start-up: `start` (opening the store, reading the configuration) runs on a thread of its own while the loop
///    takes signals; a SIGTERM or SIGINT then ends the process at once with status 0 (nothing is half-written:
///    every file the start writes is written to a temporary name and renamed).
/// 2. Serving: the Varlink socket (passed by systemd, or bound), the D-Bus announcer, the expiry timer, then
///    `READY=1`, `STATUS=` on every change, `WATCHDOG=1` when systemd asked for it (pinged by the loop that does
///    the work, with the service's status line: a hung loop stops the pings). SIGHUP reloads the access
///    configuration.
/// 3. Shutdown on SIGTERM or SIGINT: `STOPPING=1`, the server stops accepting and closes its connections, the
///    announcer sends what is queued and releases its name, then the loop ends. It is bounded by
///    ``stopTimeout``: past it the process ends with status 1 and says what it waited for.
///
/// ```swift
/// let lifecycle = try DaemonLifecycle()                 // first, before any other thread starts
/// try lifecycle.run(logger: logger) { executor throws(DaemonError) in
///     try Daemon(mode: .user, paths: paths, environment: environment, storeWriters: StoreWriters.shared,
///                executor: executor, logger: logger)
/// }
/// ```
public final class DaemonLifecycle {
    /// A signal the daemon acts on.
    public enum Signal: Int32, Sendable, CaseIterable {
        /// Stop gracefully (what `systemctl stop` sends).
        case terminate = 15  // SIGTERM
        /// Stop gracefully (Ctrl-C at a terminal).
        case interrupt = 2  // SIGINT
        /// Reload the configuration.
        case hangUp = 1  // SIGHUP
    }

    /// What the start-up thread hands back to the loop.
    private enum Message: Sendable {
        /// The start-up ended, with the daemon, or why it could not start.
        case started(Result<Daemon, DaemonError>)
    }

    /// How long a shutdown may take before the process ends anyway.
    public static let stopTimeout: Duration = .seconds(10)

    private let loop: MainLoop
    /// Swift concurrency's jobs, run on the loop.
    public let executor: LoopExecutor
    private let inbox: LoopInbox<Message>
    private let notifier: ServiceNotifier
    /// The daemon's logger, from ``run(logger:start:)`` on (logging is set up after the signals are blocked).
    private var logger = Logger(label: "exponea-authd", factory: { _ in SwiftLogNoOpLogHandler() })

    private var daemon: Daemon?
    private var server: VarlinkServer?
    /// The server of the report socket (`io.systemd.Metrics` only), when systemd passed it.
    private var reportServer: VarlinkServer?
    private var isReady = false
    /// The start-up's steps still running after the start (READY=1, the bus's first attempt): when none is left,
    /// the pages only the start-up touched go.
    private var startupStepsLeft = 2
    private var isStopping = false
    /// The STATUS line last sent.
    private var status = ""
    private var announcer: BusAnnouncer?
    private var watchdog: EventSource?
    private var failure: DaemonError?

    /// Blocks the control signals in the calling thread, and so in every thread started after it, so that the
    /// loop takes them; create it first, on the main thread, before any other thread starts.
    ///
    /// - Throws: ``DaemonError`` when the loop or its sources cannot be created.
    public init(notifier: ServiceNotifier = ServiceNotifier()) throws(DaemonError) {
        MainLoop.blockSignals(Signal.allCases.map(\.rawValue))
        self.notifier = notifier
        do {
            loop = try MainLoop()
            executor = try LoopExecutor()
            inbox = try LoopInbox()
        } catch {
            throw DaemonError(message: "cannot create the event loop: \(error)")
        }
    }

    /// Runs the daemon's whole life on the calling thread (the one that created the lifecycle): `start` (on a
    /// thread of its own, given the loop's executor), then serving, until SIGTERM or SIGINT. Logs to `logger`.
    ///
    /// - Throws: ``DaemonError`` when the start fails, the socket cannot be served, or the shutdown takes longer
    ///   than ``stopTimeout``.
    public func run(logger: Logger, start: @escaping @Sendable (LoopExecutor) throws(DaemonError) -> Daemon)
        throws(DaemonError)
    {
        self.logger = logger
        do {
            try executor.attach(to: loop)
            try loop.onSignal(Signal.terminate.rawValue) { [unowned self] in stop() }
            try loop.onSignal(Signal.interrupt.rawValue) { [unowned self] in stop() }
            try loop.onSignal(Signal.hangUp.rawValue) { [unowned self] in reload() }
            try inbox.receive(on: loop) { [unowned self] message in receive(message) }
        } catch {
            throw DaemonError(message: "cannot watch the control signals: \(error)")
        }
        // Off the loop, so that a start that hangs (a slow disk) still ends on SIGTERM.
        let executor = executor
        StartupThread.run { [inbox] in
            inbox.send(.started(Result { () throws(DaemonError) in try start(executor) }))
        }
        do {
            _ = try loop.run()
        } catch {
            throw DaemonError(message: "\(error)")
        }
        if let failure { throw failure }
    }

    // MARK: On the loop

    private func receive(_ message: Message) {
        switch message {
        case .started(.failure(let error)):
            failure = error
            loop.exit(1)
        case .started(.success(let daemon)):
            logger.info(
                "Started in \(daemon.mode) mode", metadata: ["authd.status": "\(daemon.statusLine(clients: nil))"])
            self.daemon = daemon
            serve(daemon)
        }
    }

    /// The service sent what its loaded tokens called for: the daemon is ready.
    private func becameReady(_ daemon: Daemon) {
        guard !isStopping else { return }
        isReady = true
        daemon.lifetime.value.becameReady()
        let (groups, withToken) = daemon.service.onLoop { $0.groupCounts() }
        let status = daemon.statusLine(clients: server?.connectionCount ?? 0)
        var metadata = OperatorEvent.ready.metadata { Logger.MetadataValue.string($0) }
        metadata["groups"] = "\(groups)"
        metadata["groups_with_token"] = "\(withToken)"
        logger.info("Ready: \(status)", metadata: metadata)
        self.status = status
        notifier.notify(.ready, .status(status))
        startupStepEnded()
        armWatchdog()
    }

    /// One of the start-up's last steps ended; after both, what only the start-up ran need not stay resident.
    private func startupStepEnded() {
        startupStepsLeft -= 1
        guard startupStepsLeft == 0 else { return }
        // At the next turn, before any call that comes later: the handler that ended the step (the bus's reply)
        // returns through code that serving never runs, which would be mapped again on its way out.
        let release = { [unowned self] in
            let released = StartupPages.release()
            logger.debug("Released the start-up's pages", metadata: ["authd.released_kib": "\(released)"])
        }
        do { try loop.nextTurn(release) } catch { release() }
    }

    /// Serves the socket (and the report socket, when systemd passed it), then follows the service.
    private func serve(_ daemon: Daemon) {
        let server: VarlinkServer
        do throws(DaemonError) {
            let (configuration, report) = try daemon.listenConfigurations()
            server = VarlinkServer(
                configuration: configuration, handler: daemon.serviceHandler, loop: loop, executor: executor,
                logger: logger)
            if let report {
                reportServer = VarlinkServer(
                    configuration: report, handler: daemon.reportHandler, loop: loop, executor: executor,
                    logger: logger)
            }
            do {
                try server.start()
                try reportServer?.start()
            } catch {
                throw DaemonError(message: "\(error)")
            }
        } catch {
            failure = error
            return stop()
        }
        self.server = server
        logger.info("Serving Varlink", metadata: ["authd.socket": "\(daemon.paths.socketPath)"])
        attachBusAndExpiry(daemon, server)
    }

    /// The bus announcer and the expiry timer on the loop; then the service starts its timers and the daemon is
    /// ready.
    private func attachBusAndExpiry(_ daemon: Daemon, _ server: VarlinkServer) {
        do {
            // On the system bus a signal goes only to the peers that may use its group.
            let access: BusAnnouncer.AccessNow? = daemon.mode == .system ? { daemon.currentAccess() } : nil
            announcer = BusAnnouncer(
                bus: daemon.mode == .system ? .system : .user, access: access, loop: loop, logger: logger,
                firstAttemptEnded: { [unowned self] in startupStepEnded() })
            try ExpiryTimerSource.watch(on: loop, service: daemon.service, logger: logger)
        } catch {
            failure = DaemonError(message: "cannot watch the bus or the expiry timer: \(error)")
            stop()
            return
        }
        // The service's events and count changes come as calls in its turns, on this thread: to the bus at once,
        // and to STATUS.
        let lifecycle = LoopBound(self, executor: executor)
        daemon.service.onLoop { service in
            service.observeAll { event in lifecycle.value.announcer?.emit(event) }
            service.observeCounts { lifecycle.value.updateStatus() }
            service.start()
        }
        becameReady(daemon)
    }

    /// Sends STATUS= when the line it shows changed: the counts the service committed, and the connections.
    private func updateStatus() {
        guard isReady, !isStopping, let daemon else { return }
        let line = daemon.statusLine(clients: server?.connectionCount)
        guard line != status else { return }
        status = line
        notifier.notify(.status(line))
    }

    /// Pings the watchdog at half its interval, when systemd asked for one, from the loop that does the work: a
    /// loop that hangs (and with it the service's actor, which runs on it) stops the pings.
    private func armWatchdog() {
        guard let interval = notifier.watchdogInterval.map({ $0 / 2 }), let daemon, server != nil else { return }
        if let watchdog {
            watchdog.schedule(after: interval)
        } else {
            watchdog = try? loop.after(interval) { [unowned self] in
                guard !isStopping else { return }
                let line = daemon.statusLine(clients: server?.connectionCount ?? 0)
                notifier.notify(.watchdog, .status(line))
                armWatchdog()
            }
        }
    }

    /// SIGHUP: re-reads the access configuration (system mode); a bad file keeps the old one.
    private func reload() {
        guard let daemon, isReady, !isStopping else { return }
        daemon.reload()
        guard let server else { return }
        notifier.notify(.ready, .status(daemon.statusLine(clients: server.connectionCount)))
    }

    /// SIGTERM or SIGINT, or the socket could not be served.
    private func stop() {
        guard daemon != nil else {
            // Still in `start`, which holds no state worth saving: end now.
            logger.notice("Stopped during start-up")
            _exit(0)
        }
        guard !isStopping else { return }
        isStopping = true
        if isReady {
            logger.info("Stopping")
            notifier.notify(.stopping, .status("Stopping"))
        } else if failure == nil {
            logger.notice("Stopped during start-up")
        }
        watchdog?.cancel()
        _ = try? loop.after(Self.stopTimeout) { [unowned self] in
            failure = DaemonError(message: "the daemon did not stop within \(Self.stopTimeout); ending it")
            loop.exit(1)
        }
        server?.stop()
        server = nil
        reportServer?.stop()
        reportServer = nil
        announcer?.stop()
        announcer = nil
        loop.exit(failure == nil ? 0 : 1)
    }
}
