// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import CEpoll
import DequeModule
import Logging
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// What one connection may hold, and for how long.
struct ConnectionLimits: Sendable {
    /// The longest message the peer may send.
    var maximumMessageSize = VarlinkFrameDecoder.defaultMaximumMessageSize
    /// Calls read and not yet finished (one-way calls included) at which the connection stops reading.
    var maximumCallsInFlight = 16
    /// Bytes of those calls at which the connection stops reading; one call is always let through.
    var maximumBytesInFlight = 16 * 1024
    /// Unsent output at which the connection stops reading; past four times this much, it is closed.
    var maximumPendingOutput = 16 * 1024
    /// How long a connection may stay open with no call in flight and no whole message received.
    var idleTimeout: Duration = .seconds(300)
    /// How long a message may take to arrive whole, once its first byte has come.
    var messageTimeout: Duration = .seconds(10)

    /// The output past which the connection is closed.
    var closingOutput: Int { maximumPendingOutput * 4 }
}

/// One accepted connection, on the loop's thread: the I/O around its ``VarlinkConnectionStateMachine``. Its socket is
/// watched through the server's ``ConnectionPoller`` (a source of the loop of its own, or one in the poller's set),
/// its timeouts are one timer of the loop.
///
/// Inbound, it reads what the socket has into the state machine and dispatches each call the state machine gives,
/// once, when its turn comes (``VarlinkCallHandler/dispatch(_:from:connection:)``): answered in that turn, or run
/// by a task on the loop's executor that runs it and then the calls that arrived meanwhile, one after another,
/// and ends when none is left. So replies keep their order with one route per call.
///
/// Outbound, a reply is written at once; only what the kernel does not take waits, and the loop watches for
/// writability only while it does. The bounds and timeouts are the state machine's.
///
/// Its state is confined to the loop's thread (a task reaches it only through `LoopBound`, which traps off that
/// thread), so its properties are `@exclusivity(unchecked)`: the compiler still checks every access it can see,
/// and a runtime check of the rest, on every access of every call, could only find what confinement rules out.
final class ServerConnection {
    let descriptor: Int32
    let peer: Caller
    let identity = VarlinkConnectionID.next()
    private let handler: any VarlinkCallHandler
    private unowned let server: VarlinkServer
    /// The server's read buffer, kept here: reading it through the unowned server cost a retain per read.
    private let readBuffer: UnsafeMutableRawBufferPointer
    private let executor: LoopExecutor
    private let logger: Logger
    private let throttle: LogThrottle

    @exclusivity(unchecked) private var state: VarlinkConnectionStateMachine
    @exclusivity(unchecked) private var poller: ConnectionPoller?
    @exclusivity(unchecked) private var timer: EventSource?
    /// What the poller watches the socket for.
    @exclusivity(unchecked) private var events: UInt32 = 0
    /// The task running the connection's calls, while one runs.
    @exclusivity(unchecked) private var running: Task<Void, Never>?
    /// Whether a task ever ran: only then can the handler hold something of the connection.
    @exclusivity(unchecked) private var ranTask = false
    /// The connection closed while its task ran: the task tells the handler, once its last call returned.
    @exclusivity(unchecked) private(set) var closeIsTheTasksToReport = false
    /// Inside ``process()``: replies wait, to go out in one write.
    @exclusivity(unchecked) private var processing = false
    /// Where the connection is counted while it lives (``ConnectionCounters/connections``).
    private let counters: ConnectionCounters

    var isClosed: Bool { state.isClosed }

    init(
        descriptor: Int32, peer: Caller, limits: ConnectionLimits, handler: any VarlinkCallHandler,
        server: VarlinkServer, executor: LoopExecutor, logger: Logger, throttle: LogThrottle,
        counters: ConnectionCounters
    ) {
        self.descriptor = descriptor
        self.peer = peer
        self.handler = handler
        self.server = server
        self.readBuffer = server.readBuffer
        self.executor = executor
        self.logger = logger
        self.throttle = throttle
        self.state = VarlinkConnectionStateMachine(limits: limits, now: MonotonicInstant.now)
        self.counters = counters
        counters.held()
    }

    // Counted until the object is gone, not until the socket is: a connection that something still holds after
    // it closed stays in the count. The debug line, the pair of the server's "Accepted a connection", says so
    // with the count left; its metadata is made only at debug level.
    deinit {
        counters.released()
        logger.debug(
            "Released a connection",
            metadata: ["authd.pid": "\(peer.pid)", "authd.connections": "\(counters.connections)"])
    }

    /// Watches the socket through `poller` and arms the idle timeout on `loop`.
    func start(on loop: MainLoop, poller: ConnectionPoller) throws(VarlinkServerError) {
        events = UInt32(EPOLLIN.rawValue)
        do {
            // Coarse: one wake-up may end several idle connections.
            timer = try loop.after(state.limits.idleTimeout, accuracy: .seconds(1)) { [unowned self] in
                checkTimeouts()
            }
        } catch {
            throw VarlinkServerError(message: "cannot arm a connection's timer: \(error)")
        }
        try poller.add(self, events: events)
        self.poller = poller
    }

    // MARK: Inbound

    /// The socket has `revents`; called by the poller.
    func ready(_ revents: UInt32) {
        if revents & UInt32(EPOLLOUT.rawValue) != 0 { flush() }
        guard !isClosed else { return }
        let hungUp = revents & (UInt32(EPOLLHUP.rawValue) | UInt32(EPOLLERR.rawValue)) != 0
        if hungUp && events & UInt32(EPOLLIN.rawValue) == 0 {
            // Gone while the connection did not read: nobody is left to answer.
            return close()
        }
        // Not while it does not read: an event reported before it stopped is stale.
        guard events & UInt32(EPOLLIN.rawValue) != 0, revents & UInt32(EPOLLIN.rawValue) != 0 || hungUp else {
            return
        }
        let buffer = readBuffer
        let count = read(descriptor, buffer.baseAddress, buffer.count)
        if count > 0 {
            state.received(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        } else if count == 0 {
            // With EPOLLHUP the peer closed its socket: no reply can reach it, so its calls end now. Without, it
            // shut down its side only (`printf … | socat`): it still gets its replies.
            if hungUp { return close() }
            state.endOfInput()
        } else {
            guard errno != EAGAIN && errno != EINTR else { return }
            logger.debug(
                "Connection error: \(String(cString: strerror(errno)))", metadata: ["authd.pid": "\(peer.pid)"])
            return close()
        }
        process()
    }

    /// Dispatches the calls whose turn it is while the connection has room for them, then writes the replies.
    private func process() {
        guard !isClosed else { return }
        let now = MonotonicInstant.now
        processing = true
        do {
            while let message = try state.nextCall(now: now) {
                if let work = dispatch(message) {
                    state.startedRunning()
                    startCalls(first: work, size: message.count + 1)
                }
                if state.unsentByteCount > state.limits.maximumPendingOutput { writeOutput() }
            }
        } catch {
            processing = false
            return closeNoticed("framing", "Closing a connection: \(error)")
        }
        processing = false
        if state.endTurn(now: now) { armTimer() }
        flush()
    }

    /// Work of a call that runs later, in the connection's task.
    private typealias Work = VarlinkWork

    /// Dispatches `message`, whose turn it is: answers it now and returns nil, or returns its work.
    private func dispatch(_ message: [UInt8]) -> Work? {
        let outcome: VarlinkDispatch
        do {
            outcome = handler.dispatch(try VarlinkCall(decoding: message), from: peer, connection: identity)
        } catch {
            // The framing is intact but the message is no call: the connection can go on.
            outcome = .answered(VarlinkReplyEncoder.error(.invalidParameter("method")))
        }
        switch outcome {
        case .answered(let reply):
            state.answered(size: message.count + 1)
            if let reply { append(reply) }
            return nil
        case .later(let work):
            return work
        }
    }

    /// Runs `first`, then every call that waits behind it, in a task on the loop.
    private func startCalls(first: @escaping Work, size: Int) {
        ranTask = true
        let connection = LoopBound(self, executor: executor)
        // The task's replies: they, and what the handler keeps of them (a subscription), hold the connection
        // until the task ends.
        let replies = VarlinkReplies(connection: connection)
        let (handler, identity, isolation) = (handler, identity, server.isolation)
        // `@Sendable`: the region checker of Swift 6.3 cannot check this closure without it.
        running = Task(executorPreference: executor) { @Sendable in
            await Self.runCalls(isolation, first: first, size: size, connection, replies, handler, identity)
        }
    }

    /// The connection's task, on the loop: its calls one after another, then the report of its close.
    private static func runCalls(
        _ isolation: isolated LoopIsolation, first: @escaping Work, size: Int,
        _ connection: LoopBound<ServerConnection>,
        _ replies: VarlinkReplies, _ handler: any VarlinkCallHandler, _ identity: VarlinkConnectionID
    ) async {
        var next: (work: Work, size: Int)? = (first, size)
        while let (work, size) = next {
            await work(replies)
            next = connection.value.callReturned(size: size)
            // Each further call in a job of its own: a call that does not suspend (a Preflight; the service is on
            // this executor) would otherwise run the connection's whole queue in one job, and a wake-up's rounds
            // (LoopExecutor.roundsPerWakeUp) would no longer bound what a flooding user's connections do before
            // the loop reads the other sockets.
            if next != nil { await Task.yield() }
        }
        // After its last call returned: nothing the connection held can be taken again by a call still running.
        if connection.value.closeIsTheTasksToReport { await handler.connectionClosed(identity) }
    }

    /// The task's call of `size` bytes returned: the calls waiting are dispatched in turn, those answered now
    /// answered, up to the next that runs later (returned to the task), or nil when none is left (the task ends).
    private func callReturned(size: Int) -> (Work, Int)? {
        state.runningCallReturned(size: size)
        while let message = state.nextWaitingCall() {
            readOnIfRoom()
            if let work = dispatch(message) { return (work, message.count + 1) }
        }
        state.stoppedRunning()
        running = nil
        readOnIfRoom()
        // Calls buffered behind the task, or the end of the input, are taken now.
        process()
        return nil
    }

    // MARK: Flow

    /// Reads on once the calls in flight and the unsent output are down to half their bounds, taking the messages
    /// buffered first.
    private func readOnIfRoom() {
        if state.resumeIfRoom() { process() }
    }

    /// Watches for input while the connection takes calls, and for writability while output waits.
    private func updateEvents() {
        guard !isClosed else { return }
        var wanted: UInt32 = 0
        if state.wantsInput { wanted |= UInt32(EPOLLIN.rawValue) }
        if state.wantsOutput { wanted |= UInt32(EPOLLOUT.rawValue) }
        guard wanted != events else { return }
        events = wanted
        poller?.modify(self, events: wanted)
    }

    // MARK: Outbound

    /// Queues one framed message and writes it at once (after the turn's other replies, inside ``process()``).
    func append(_ message: [UInt8]) {
        guard state.append(message) else {
            return closeNoticed("does-not-read", "Closing a connection that does not read its replies")
        }
        if !processing { flush() }
    }

    /// Writes what the kernel takes now, then watches for writability if output is left.
    private func flush() {
        writeOutput()
        guard !isClosed else { return }
        if state.isDone { return close() }
        readOnIfRoom()
        updateEvents()
    }

    private func writeOutput() {
        while !isClosed && state.wantsOutput {
            let count = state.withUnsentBytes {
                send(descriptor, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
            }
            if count > 0 {
                state.sent(count)
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else if errno != EINTR {
                logger.debug(
                    "Connection error: \(String(cString: strerror(errno)))", metadata: ["authd.pid": "\(peer.pid)"])
                return close()
            }
        }
    }

    // MARK: Timeouts

    private func armTimer() {
        timer?.schedule(after: max(.zero, state.deadline - MonotonicInstant.now))
    }

    private func checkTimeouts() {
        guard !isClosed else { return }
        switch state.timeout(now: MonotonicInstant.now) {
        case .slowMessage:
            closeNoticed("slow-message", "Closing a connection whose message does not arrive whole")
        case .idle:
            logger.debug("Closing an idle connection", metadata: ["authd.pid": "\(peer.pid)"])
            close()
        case nil:
            armTimer()
        }
    }

    // MARK: Closing

    /// Closes the connection with a notice, one line per kind and user per interval.
    private func closeNoticed(_ kind: String, _ message: String) {
        if let count = throttle.admit(kind, uid: peer.uid) {
            logger.notice(
                "\(message)\(LogThrottle.suffix(count))",
                metadata: ["authd.pid": "\(peer.pid)", "authd.uid": "\(peer.uid)", "authd.count": "\(count)"]
            )
        }
        close()
    }

    /// Closes the socket at once; a running call is cancelled, and the handler is told once no call runs.
    func close() {
        guard !isClosed else { return }
        state.close()
        timer?.cancel()
        timer = nil
        poller?.remove(self)
        poller = nil
        Glibc.close(descriptor)
        server.closed(self)
        if let running {
            closeIsTheTasksToReport = true
            running.cancel()
        } else if ranTask {
            let (handler, identity) = (handler, identity)
            Task(executorPreference: executor) { await handler.connectionClosed(identity) }
        }
    }
}
