// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import AuthTransport
import Logging
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// The one owner of the daemon's life: an sd-event loop (``MainLoop``) on the main thread, whose sources are the
/// control signals, the watchdog's timer, the expiry ``WallClockTimer``, the D-Bus connection and an inbox
/// through which the service's tasks (on NIO's event loops, Swift concurrency's executor) report back. Between
/// two of them the main thread sleeps in one `epoll_wait`: an idle daemon with no watchdog never wakes.
///
/// The phases, each started from the loop:
/// 1. Start-up: `start` (opening the store, reading the configuration) runs in a task while the loop takes
///    signals; a SIGTERM or SIGINT then ends the process at once with status 0 (nothing is half-written: every
///    file the start writes is written to a temporary name and renamed).
/// 2. Serving: the Varlink socket (passed by systemd, or bound), the D-Bus announcer, the expiry timer, then
///    `READY=1`, `STATUS=` on every change, `WATCHDOG=1` when systemd asked for it (each ping waits for the
///    service's actor to answer: a hung service stops the pings). SIGHUP reloads the access configuration.
/// 3. Shutdown on SIGTERM or SIGINT: `STOPPING=1`, the server stops accepting and ends its connections, the
///    announcer sends what is queued and releases its name, then the loop ends. It is bounded by
///    ``stopTimeout``: past it the process ends with status 1 and says what it waited for.
///
/// ```swift
/// let lifecycle = try DaemonLifecycle()                 // first, before any other thread starts
/// // Swift concurrency's executor set here, before the first task (AuthDaemonCommand: its own event loop)
/// try lifecycle.run(logger: logger) { () throws(DaemonError) in
///     try Daemon(mode: .user, paths: paths, environment: environment, storeExecutor: storeThreads, logger: logger)
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

    /// What the tasks hand back to the loop.
    private enum Message: Sendable {
        /// The start-up ended, with the daemon and its status line, or why it could not start.
        case started(Result<Daemon, DaemonError>, status: String)
        /// The socket is served, or could not be.
        case listening(Result<Void, DaemonError>)
        /// The service sent what its loaded tokens called for; the daemon is ready.
        case ready(AsyncStream<AuthEvent>, counts: AsyncStream<Void>, status: String)
        /// The service answered a watchdog check.
        case alive(status: String)
        /// The server's task ended.
        case served
    }

    /// How long a shutdown may take before the process ends anyway.
    public static let stopTimeout: Duration = .seconds(10)

    private let loop: MainLoop
    private let inbox: LoopInbox<Message>
    private let notifier: ServiceNotifier
    /// The daemon's logger, from ``run(logger:start:)`` on (logging is set up after the signals are blocked).
    private var logger = Logger(label: "exponea-authd", factory: { _ in SwiftLogNoOpLogHandler() })

    private var daemon: Daemon?
    private var server: VarlinkServer?
    private var serving: Task<Void, Never>?
    private var isReady = false
    private var isStopping = false
    /// The tasks that follow the service (events to the bus, the status line), cancelled at shutdown.
    private var followers: [Task<Void, Never>] = []
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
            inbox = try LoopInbox()
        } catch {
            throw DaemonError(message: "cannot create the event loop: \(error)")
        }
    }

    /// Runs the daemon's whole life on the calling thread (the one that created the lifecycle): `start`, then
    /// serving, until SIGTERM or SIGINT. Logs to `logger`.
    ///
    /// - Throws: ``DaemonError`` when the start fails, the socket cannot be served, or the shutdown takes longer
    ///   than ``stopTimeout``.
    public func run(logger: Logger, start: @escaping @Sendable () throws(DaemonError) -> Daemon)
        throws(DaemonError)
    {
        self.logger = logger
        do {
            try loop.onSignal(Signal.terminate.rawValue) { [unowned self] in stop() }
            try loop.onSignal(Signal.interrupt.rawValue) { [unowned self] in stop() }
            try loop.onSignal(Signal.hangUp.rawValue) { [unowned self] in reload() }
            try inbox.receive(on: loop) { [unowned self] message in receive(message) }
        } catch {
            throw DaemonError(message: "cannot watch the control signals: \(error)")
        }
        Task { [inbox] in
            let result = Result { () throws(DaemonError) in try start() }
            let status = (try? await result.get().statusLine(clients: nil)) ?? ""
            inbox.send(.started(result, status: status))
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
        case .started(.failure(let error), _):
            failure = error
            loop.exit(1)
        case .started(.success(let daemon), let status):
            logger.info("Started in \(daemon.mode) mode", metadata: ["authd.status": "\(status)"])
            self.daemon = daemon
            serve(daemon)
        case .listening(.failure(let error)):
            if !isStopping { failure = error }
            stop()
        case .listening(.success):
            guard let daemon, let server, !isStopping else { return }
            logger.info("Serving Varlink", metadata: ["authd.socket": "\(daemon.paths.socketPath)"])
            follow(daemon, server)
        case .ready(let events, let counts, let status):
            guard let daemon, let server, !isStopping else { return }
            isReady = true
            notifier.notify(.ready, .status(status))
            // What only the start-up ran need not stay resident.
            let released = StartupPages.release()
            logger.debug("Released the start-up's pages", metadata: ["authd.released_kib": "\(released)"])
            let announcements = announcer?.announcements
            let notifier = notifier
            followers.append(Task { for await event in events { announcements?.announce(event) } })
            // STATUS follows every change of the figures it shows, coalesced; nothing polls for it.
            followers.append(
                Task {
                    var last = ""
                    for await _ in counts {
                        let line = await daemon.statusLine(clients: server.connectionCount)
                        if line != last { notifier.notify(.status(line)) }
                        last = line
                    }
                })
            armWatchdog()
        case .alive(let status):
            guard !isStopping else { return }
            notifier.notify(.watchdog, .status(status))
            armWatchdog()
        case .served:
            serving = nil
            guard isStopping else {
                // The server ended by itself: stop the rest.
                failure = failure ?? DaemonError(message: "the Varlink server stopped serving")
                return stop()
            }
            finishStop()
        }
    }

    /// Serves the socket; `.listening` says when it is served.
    private func serve(_ daemon: Daemon) {
        let configuration: VarlinkServer.Configuration
        do {
            configuration = try daemon.listenConfiguration()
        } catch {
            failure = error
            loop.exit(1)
            return
        }
        let server = VarlinkServer(configuration: configuration, handler: daemon.serviceHandler, logger: logger)
        self.server = server
        serving = Task { [inbox] in
            do {
                try await server.run { inbox.send(.listening(.success(()))) }
            } catch {
                inbox.send(.listening(.failure(DaemonError(message: "\(error)"))))
            }
            inbox.send(.served)
        }
    }

    /// The bus announcer and the expiry timer on the loop; then the service starts its timers and the daemon is
    /// ready.
    private func follow(_ daemon: Daemon, _ server: VarlinkServer) {
        do {
            // On the system bus a signal goes only to the peers that may use its group.
            announcer = try BusAnnouncer(
                bus: daemon.mode == .system ? .system : .user, access: daemon.mode == .system ? daemon.access : nil,
                loop: loop, logger: logger)
            try ExpiryTimerSource.watch(daemon.timer, on: loop, service: daemon.service, logger: logger)
        } catch {
            failure = DaemonError(message: "cannot watch the bus or the expiry timer: \(error)")
            stop()
            return
        }
        let service = daemon.service
        Task { [inbox] in
            let events = await service.observeAll()
            let counts = await service.observeCounts()
            await service.start()
            let status = await daemon.statusLine(clients: server.connectionCount)
            inbox.send(.ready(events, counts: counts, status: status))
        }
    }

    /// Pings the watchdog at half its interval, when systemd asked for one: each ping once the service's actor
    /// has computed the status line.
    private func armWatchdog() {
        guard let interval = notifier.watchdogInterval.map({ $0 / 2 }), let daemon, let server else { return }
        let check = { [inbox] in
            Task {
                let line = await daemon.statusLine(clients: server.connectionCount)
                inbox.send(.alive(status: line))
            }
        }
        if let watchdog {
            watchdog.schedule(after: interval)
        } else {
            watchdog = try? loop.after(interval) { _ = check() }
        }
    }

    /// SIGHUP: re-reads the access configuration (system mode); a bad file keeps the old one.
    private func reload() {
        guard let daemon, isReady, !isStopping else { return }
        daemon.reload()
        guard let server else { return }
        let notifier = notifier
        Task {
            let line = await daemon.statusLine(clients: server.connectionCount)
            notifier.notify(.ready, .status(line))
        }
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
        for follower in followers { follower.cancel() }
        _ = try? loop.after(Self.stopTimeout) { [unowned self] in
            failure = DaemonError(message: "the daemon did not stop within \(Self.stopTimeout); ending it")
            loop.exit(1)
        }
        guard let serving else { return finishStop() }
        serving.cancel()  // `.served` follows once every connection is closed
    }

    private func finishStop() {
        announcer?.stop()
        announcer = nil
        loop.exit(failure == nil ? 0 : 1)
    }
}
