// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Logging
internal import NIOCore
internal import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Serves Varlink on a Unix stream socket: accepts connections (bounded in all and per user) on every event loop,
/// each kept on the loop that accepted it (``AcceptRotation``), reads each peer's credentials, and runs each
/// connection's calls in order through a ``VarlinkCallHandler``.
///
/// What one user can make the server hold is bounded: its connections (``Configuration/maximumConnectionsPerUser``),
/// and on each connection the calls in flight (``Configuration/maximumCallsInFlight``, one-way calls included),
/// the bytes buffered and the unsent output (``Configuration/maximumPendingOutput``); at its bound a connection
/// stops reading until half of it is done. Refusals and closings are logged once per kind and user per
/// ``LogThrottle/defaultInterval``, with a count. At the open file limit the server stops accepting for a
/// moment (``Configuration/acceptBackoff``) instead of retrying at once.
///
/// ```swift
/// let server = VarlinkServer(configuration: .init(listen: .path("/run/exponea-authd/io.socket", mode: 0o666)),
///                            handler: handler, logger: logger)
/// try await server.run { /* listening: tell systemd READY=1 */ }
/// ```
public final class VarlinkServer: Sendable {
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
        /// How long the server stops accepting when accept(2) fails for want of resources (EMFILE, ENFILE,
        /// ENOBUFS, ENOMEM): the waiting clients stay queued and are accepted once descriptors are free.
        public var acceptBackoff: Duration = .milliseconds(250)

        public init(listen: Listen) { self.listen = listen }
    }

    private let configuration: Configuration
    private let handler: any VarlinkCallHandler
    private let logger: Logger
    private let connections = Mutex<[ObjectIdentifier: any Channel]>([:])
    private let admission: Mutex<ConnectionAdmission>
    private let throttle = LogThrottle()
    /// Each event loop's queue of replies to write, made when the loop's first connection is accepted.
    private let pendingWrites = Mutex<[ObjectIdentifier: PendingWrites]>([:])

    public init(configuration: Configuration, handler: any VarlinkCallHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
        self.admission = Mutex(
            ConnectionAdmission(
                maximumConnections: configuration.maximumConnections,
                maximumPerUser: configuration.maximumConnectionsPerUser,
                privileged: [0, getuid()]
            ))
    }

    /// The number of open connections.
    public var connectionCount: Int { connections.withLock { $0.count } }

    /// Serves until the calling task is cancelled, then stops accepting and closes every connection.
    ///
    /// - Parameter listening: Called once the socket accepts connections.
    /// - Throws: ``VarlinkServerError`` when the socket cannot be bound or adopted.
    public func run(listening: @Sendable () -> Void = {}) async throws {
        let descriptor: Int32
        let failure: String
        switch configuration.listen {
        case .path(let path, let mode):
            descriptor = try ListeningSocket.bind(path, mode: mode, backlog: 256)
            failure = "cannot listen on \(path)"
        case .descriptor(let passed):
            descriptor = passed
            failure = "cannot serve on the socket passed by systemd"
        }
        // A server channel on every event loop, each keeping the connections it accepts; one reads at a time.
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
        let rotation = AcceptRotation(loops: loops.count)
        var servers: [any Channel] = []
        do {
            for (index, loop) in loops.enumerated() {
                let shared = index == 0 ? descriptor : try ListeningSocket.duplicate(descriptor)
                do {
                    servers.append(
                        try await bootstrap(on: loop, index: index, rotation: rotation).withBoundSocket(shared).get())
                } catch {
                    if index > 0 { close(shared) }
                    throw VarlinkServerError(message: "\(failure): \(error)")
                }
            }
        } catch {
            for server in servers { server.close(promise: nil) }
            throw error
        }
        let bound = servers
        rotation.serve(bound)
        // One closing (an error) closes them all.
        for server in bound {
            server.closeFuture.whenComplete { _ in for other in bound { other.close(promise: nil) } }
        }
        listening()
        await withTaskCancellationHandler {
            for server in bound { try? await server.closeFuture.get() }
        } onCancel: {
            for server in bound { server.close(promise: nil) }
        }
        for connection in connections.withLock({ Array($0.values) }) { connection.close(promise: nil) }
    }

    /// The server channel of `loop`, the `index`th: the connections it accepts stay on `loop`. Only the first
    /// reads from the start; ``AcceptRotation`` turns the others on and off.
    private func bootstrap(on loop: any EventLoop, index: Int, rotation: AcceptRotation) -> ServerBootstrap {
        let backoff = TimeAmount.nanoseconds(Int64(configuration.acceptBackoff / .nanoseconds(1)))
        return ServerBootstrap(group: loop)
            .serverChannelOption(ChannelOptions.autoRead, value: index == 0)
            // One accept per wake-up, so that the rotation's choice holds for the next connection of a burst.
            .serverChannelOption(ChannelOptions.maxMessagesPerRead, value: 1)
            // At the open file limit accept(2) fails at once and the socket stays readable: without a back-off the
            // loop would spin.
            .serverChannelInitializer { [logger, throttle] channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        AcceptBackoff(
                            backoff: backoff, logger: logger, throttle: throttle, rotation: rotation, loop: index)
                    )
                }
            }
            .childChannelInitializer { [self] channel in
                rotation.opened(on: index)
                channel.closeFuture.whenComplete { _ in rotation.closed(on: index) }
                return initialize(channel)
            }
    }

    private func initialize(_ channel: any Channel) -> EventLoopFuture<Void> {
        // Set here, on the channel's event loop, not as the bootstrap's child options: those are set one future
        // each.
        do {
            try setOptions(of: channel)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return PeerCredentials.read(from: channel).flatMap { [self] peer in
            guard admit(channel, of: peer) else { return channel.close() }
            let activity = ConnectionActivity(
                maximumCalls: configuration.maximumCallsInFlight,
                maximumBytes: configuration.maximumBytesInFlight
            )
            let calls = ConnectionCallQueue { [self] messages in
                startCalls(messages, from: peer, on: channel, activity: activity)
            }
            let connection = VarlinkConnectionHandler(
                limits: limits,
                peer: peer,
                calls: calls,
                handler: handler,
                activity: activity,
                logger: logger,
                throttle: throttle
            )
            // On the channel's event loop (the credentials future completes there): the handler is added
            // synchronously and never crosses threads.
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(connection)
            }
        }
    }

    /// Each connection's bounds on its reads and unsent output.
    private func setOptions(of channel: any Channel) throws {
        guard let options = channel.syncOptions else { throw VarlinkServerError(message: "not a socket channel") }
        try options.setOption(
            ChannelOptions.writeBufferWaterMark,
            value: .init(low: configuration.maximumPendingOutput / 2, high: configuration.maximumPendingOutput)
        )
        // One read of at most 4 KiB per wake-up: a connection that stops reading at its bound holds little more
        // than that in its decoder (256 connections of one user: 1 MiB).
        try options.setOption(ChannelOptions.maxMessagesPerRead, value: 1)
        try options.setOption(
            ChannelOptions.recvAllocator,
            value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 4 * 1024)
        )
        // A client may write its calls and shut down its side (`printf … | socat`): it still gets its replies.
        try options.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
    }

    /// Starts the task that runs the calls of the connection on `channel` that its event loop does not answer at
    /// once; it ends when the connection closes. Called by the connection's ``ConnectionCallQueue``, on its loop.
    private func startCalls(
        _ messages: AsyncStream<InboundCall>, from peer: PeerCredentials, on channel: any Channel,
        activity: ConnectionActivity
    ) {
        let replies = VarlinkReplies(channel: channel, activity: activity, writes: pendingWrites(on: channel.eventLoop))
        let identity = VarlinkConnectionID.next()
        let calls = Task { [handler] in
            await Self.serve(
                messages, from: peer, connection: identity, on: channel, activity: activity, replies: replies,
                handler: handler)
            // After the last call returned: nothing the connection holds can be taken again by a call still
            // running.
            await handler.connectionClosed(identity)
        }
        channel.closeFuture.whenComplete { _ in calls.cancel() }
    }

    /// Counts `channel` against the bounds, or logs (throttled) why it is refused.
    private func admit(_ channel: any Channel, of peer: PeerCredentials) -> Bool {
        let refusal = admission.withLock { $0.admit(peer.uid) }
        guard let refusal else {
            connections.withLock { $0[ObjectIdentifier(channel)] = channel }
            channel.closeFuture.whenComplete { [self] _ in
                _ = connections.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
                admission.withLock { $0.release(peer.uid) }
            }
            return true
        }
        let (kind, reason) =
            switch refusal {
            case .serverFull(let limit): ("server-full", "\(limit) are open (--max-connections)")
            case .userFull(let limit):
                ("user-full", "uid \(peer.uid) has \(limit) open (--max-connections-per-user)")
            }
        if let count = throttle.admit(kind, uid: peer.uid) {
            logger.warning(
                "Refusing a connection: \(reason)\(LogThrottle.suffix(count))",
                metadata: ["authd.uid": "\(peer.uid)", "authd.pid": "\(peer.pid)", "authd.count": "\(count)"]
            )
        }
        return false
    }

    /// The bounds of each connection.
    private var limits: ConnectionLimits {
        ConnectionLimits(
            maximumMessageSize: configuration.maximumMessageSize,
            maximumCallsInFlight: configuration.maximumCallsInFlight,
            maximumBytesInFlight: configuration.maximumBytesInFlight,
            maximumPendingOutput: configuration.maximumPendingOutput,
            idleTimeout: .nanoseconds(Int64(configuration.idleTimeout / .nanoseconds(1))),
            messageTimeout: .nanoseconds(Int64(configuration.messageTimeout / .nanoseconds(1)))
        )
    }

    /// The queue of replies to write on `loop`, shared by all of the loop's connections.
    private func pendingWrites(on loop: any EventLoop) -> PendingWrites {
        pendingWrites.withLock { queues in
            if let queue = queues[ObjectIdentifier(loop)] { return queue }
            let queue = PendingWrites(loop: loop)
            queues[ObjectIdentifier(loop)] = queue
            return queue
        }
    }

    /// Runs one connection's calls in order.
    private static func serve(
        _ messages: AsyncStream<InboundCall>,
        from peer: PeerCredentials,
        connection: VarlinkConnectionID,
        on channel: any Channel,
        activity: ConnectionActivity,
        replies: VarlinkReplies,
        handler: any VarlinkCallHandler
    ) async {
        // Each reply is handed to the event loop without waiting, neither for the loop to take it nor for the
        // peer to read it: the unsent bytes count against the high-water mark, and a peer that stops reading is
        // closed (see VarlinkConnectionHandler) instead of stalling the call forever. The loop writes what it is
        // handed in order; the connection's activity counts the replies not yet written, so a reply the loop
        // gives at once (VarlinkCallHandler.answerImmediately) never overtakes one handed over here.
        for await inbound in messages {
            defer { activity.finished(size: inbound.size) }
            let call: VarlinkCall? =
                switch inbound {
                case .decoded(let call, _): call
                case .message(let bytes): try? VarlinkCall(decoding: bytes)
                }
            guard let call else {
                // The framing is intact, so the connection can go on.
                try? replies.send(VarlinkReplyEncoder.error(.invalidParameter("method")))
                continue
            }
            await handler.handle(call, from: peer, connection: connection, replies: replies)
        }
        // No more calls will come (the peer shut down its side): close once the replies are written. The replies
        // were handed to the loop with `execute`; a task running on that same loop (if the global executor were
        // the channel's loop) would overtake them with a direct write, so it first lets the loop run what it was
        // handed.
        try? await channel.eventLoop.submit {}.get()
        try? await channel.writeAndFlush(ByteBuffer()).get()
        try? await channel.close()
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
