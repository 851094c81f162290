// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Logging
internal import NIOCore
internal import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Serves Varlink on a Unix stream socket: accepts connections (bounded), reads each peer's credentials,
/// and runs each connection's calls in order through a ``VarlinkCallHandler``.
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
        /// Unsent output beyond which a connection that does not read is closed.
        public var maximumPendingOutput = 1024 * 1024
        /// How long a connection may stay open with no call in flight and nothing received.
        public var idleTimeout: Duration = .seconds(300)

        public init(listen: Listen) { self.listen = listen }
    }

    private let configuration: Configuration
    private let handler: any VarlinkCallHandler
    private let logger: Logger
    private let connections = Mutex<[ObjectIdentifier: any Channel]>([:])
    /// Each event loop's queue of replies to write, made when the loop's first connection is accepted.
    private let pendingWrites = Mutex<[ObjectIdentifier: PendingWrites]>([:])

    public init(configuration: Configuration, handler: any VarlinkCallHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
    }

    /// The number of open connections.
    public var connectionCount: Int { connections.withLock { $0.count } }

    /// Serves until the calling task is cancelled, then stops accepting and closes every connection.
    ///
    /// - Parameter listening: Called once the socket accepts connections.
    /// - Throws: ``VarlinkServerError`` when the socket cannot be bound or adopted.
    public func run(listening: @Sendable () -> Void = {}) async throws {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .childChannelOption(
                ChannelOptions.writeBufferWaterMark,
                value: .init(low: configuration.maximumPendingOutput / 2, high: configuration.maximumPendingOutput)
            )
            // A client may write its calls and shut down its side (`printf … | socat`): it still gets its replies.
            .childChannelOption(ChannelOptions.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { [self] channel in initialize(channel) }

        let server: any Channel
        switch configuration.listen {
        case .path(let path, let mode):
            try Self.removeStaleSocket(path)
            do {
                server = try await bootstrap.bind(unixDomainSocketPath: path).get()
            } catch {
                throw VarlinkServerError(message: "cannot listen on \(path): \(error)")
            }
            guard chmod(path, mode_t(mode)) == 0 else {
                server.close(promise: nil)
                throw VarlinkServerError(message: "cannot set the mode of \(path): \(String(cString: strerror(errno)))")
            }
        case .descriptor(let descriptor):
            do {
                server = try await bootstrap.withBoundSocket(descriptor).get()
            } catch {
                throw VarlinkServerError(message: "cannot serve on the socket passed by systemd: \(error)")
            }
        }
        listening()
        await withTaskCancellationHandler {
            try? await server.closeFuture.get()
        } onCancel: {
            server.close(promise: nil)
        }
        for connection in connections.withLock({ Array($0.values) }) { connection.close(promise: nil) }
    }

    private func initialize(_ channel: any Channel) -> EventLoopFuture<Void> {
        let admitted = connections.withLock { open in
            guard open.count < configuration.maximumConnections else { return false }
            open[ObjectIdentifier(channel)] = channel
            return true
        }
        guard admitted else {
            logger.warning("Refusing a connection: \(configuration.maximumConnections) are open")
            return channel.close()
        }
        channel.closeFuture.whenComplete { [self] _ in
            _ = connections.withLock { $0.removeValue(forKey: ObjectIdentifier(channel)) }
        }
        return PeerCredentials.read(from: channel).flatMap { [self] peer in
            let (messages, continuation) = AsyncStream.makeStream(of: VarlinkCall?.self)
            let activity = ConnectionActivity()
            let replies = VarlinkReplies(
                channel: channel, activity: activity, writes: pendingWrites(on: channel.eventLoop))
            let connection = VarlinkConnectionHandler(
                maximumMessageSize: configuration.maximumMessageSize,
                peer: peer,
                messages: continuation,
                handler: handler,
                activity: activity,
                logger: logger
            )
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
            let idleNanoseconds = Int64(configuration.idleTimeout / .nanoseconds(1))
            // On the channel's event loop (the credentials future completes there): the handlers are added
            // synchronously, so IdleStateHandler, which is not Sendable, never crosses threads.
            return channel.eventLoop.makeCompletedFuture {
                let idle = IdleStateHandler(allTimeout: TimeAmount.nanoseconds(idleNanoseconds))
                try channel.pipeline.syncOperations.addHandlers(idle, connection)
            }
        }
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
        _ messages: AsyncStream<VarlinkCall?>,
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
        for await call in messages {
            defer { activity.finished() }
            guard let call else {
                // The framing is intact, so the connection can go on.
                try? replies.send(VarlinkReplyEncoder.error(.invalidParameter("method")))
                continue
            }
            await handler.handle(call, from: peer, connection: connection, replies: replies)
        }
        // No more calls will come (the peer shut down its side): close once the replies are written. The replies
        // were handed to the loop with `execute`; a task running on that same loop (NIO as the global executor)
        // would overtake them with a direct write, so it first lets the loop run what it was handed.
        try? await channel.eventLoop.submit {}.get()
        try? await channel.writeAndFlush(ByteBuffer()).get()
        try? await channel.close()
    }

    /// Removes a socket file nobody listens on any more; refuses to take over one that is served.
    private static func removeStaleSocket(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw VarlinkServerError(message: "\(path) exists and is not a socket; move it away")
        }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8.prefix(107)) + [0]) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected == 0 {
            throw VarlinkServerError(message: "another process is serving \(path); is exponea-authd already running?")
        }
        unlink(path)
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
