// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Logging
internal import NIOCore
import Synchronization

/// How many of a connection's calls are received but not yet finished, and how many of their replies are
/// handed to the event loop but not yet written. A connection with neither is idle: a reply written now
/// cannot overtake an earlier one.
final class ConnectionActivity: Sendable {
    private let inFlight = Atomic<Int>(0)
    private let queuedWrites = Atomic<Int>(0)

    func received() { inFlight.add(1, ordering: .relaxed) }
    func finished() { inFlight.subtract(1, ordering: .releasing) }
    func writeQueued() { queuedWrites.add(1, ordering: .relaxed) }
    func writeDone() { queuedWrites.subtract(1, ordering: .releasing) }
    /// The replies handed to the event loop and not yet written.
    var queuedWriteCount: Int { queuedWrites.load(ordering: .relaxed) }
    var isIdle: Bool {
        inFlight.load(ordering: .acquiring) == 0 && queuedWrites.load(ordering: .acquiring) == 0
    }
}

/// One connection's inbound side: splits the byte stream into messages (bounded) and decodes each call. A call
/// the handler can answer at once is answered here, on the event loop, when nothing earlier of the connection
/// is still running; every other call goes, in order, to a task that runs them one after another. Closes the
/// connection when a message is too large, or when the peer stops reading and the unsent output passes the
/// high-water mark.
final class VarlinkConnectionHandler: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: every stored property is only touched on the channel's event loop, except `messages`, an
    // AsyncStream continuation, which is thread-safe.
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var decoder: VarlinkFrameDecoder
    private let messages: AsyncStream<VarlinkCall?>.Continuation
    private let handler: any VarlinkCallHandler
    private let activity: ConnectionActivity
    private let logger: Logger
    private let peer: PeerCredentials

    init(
        maximumMessageSize: Int,
        peer: PeerCredentials,
        messages: AsyncStream<VarlinkCall?>.Continuation,
        handler: any VarlinkCallHandler,
        activity: ConnectionActivity,
        logger: Logger
    ) {
        self.handler = handler
        self.decoder = VarlinkFrameDecoder(maximumMessageSize: maximumMessageSize)
        self.peer = peer
        self.messages = messages
        self.activity = activity
        self.logger = logger
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        do {
            var answered = false
            while let message = try decoder.nextMessage() {
                // nil: the framing is intact but the message is no call; the task answers it.
                let call = try? VarlinkCall(decoding: message)
                if let call, activity.isIdle, let reply = handler.answerImmediately(call, from: peer) {
                    context.write(wrapOutboundOut(context.channel.allocator.buffer(bytes: reply)), promise: nil)
                    answered = true
                    continue
                }
                activity.received()
                messages.yield(call)
            }
            if answered { context.flush() }
        } catch {
            logger.notice(
                "Closing a connection: \(error)",
                metadata: ["authd.pid": "\(peer.pid)", "authd.uid": "\(peer.uid)"]
            )
            messages.finish()
            context.close(promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if !context.channel.isWritable {
            logger.notice(
                "Closing a connection that does not read its replies",
                metadata: ["authd.pid": "\(peer.pid)", "authd.uid": "\(peer.uid)"]
            )
            context.close(promise: nil)
        }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The peer shut down its side: the calls received are answered, then the connection is closed.
            messages.finish()
            return
        }
        // A connection with a call in flight (a subscription, a wait) is busy, however quiet.
        if event is IdleStateHandler.IdleStateEvent {
            if activity.isIdle {
                logger.debug("Closing an idle connection", metadata: ["authd.pid": "\(peer.pid)"])
                context.close(promise: nil)
            }
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        messages.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Connection error: \(error)", metadata: ["authd.pid": "\(peer.pid)"])
        context.close(promise: nil)
    }
}
