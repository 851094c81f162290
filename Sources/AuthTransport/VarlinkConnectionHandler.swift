// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Logging
internal import NIOCore
import Synchronization

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
    var idleTimeout: TimeAmount = .seconds(300)
    /// How long a message may take to arrive whole, once its first byte has come.
    var messageTimeout: TimeAmount = .seconds(10)

    /// The output past which the connection is closed.
    var closingOutput: Int { maximumPendingOutput * 4 }
}

/// How many of a connection's calls are received but not yet finished (and their size), and how many of their
/// replies are handed to the event loop but not yet written. A connection with neither is idle: a reply
/// written now cannot overtake an earlier one.
///
/// It is also where the connection waits for room: at its bound (``isAtBound``) the event loop stops reading,
/// and the call whose end brings it back below half the bound wakes the loop, once.
final class ConnectionActivity: Sendable {
    private let calls = Atomic<Int>(0)
    private let bytes = Atomic<Int>(0)
    private let queuedWrites = Atomic<Int>(0)
    private let waiting = Atomic<Bool>(false)
    /// What wakes the loop, swapped as one reference under the lock. (A debug daemon once sampled at 100% CPU in
    /// the thunks around this closure was not looping in them: its event loops ran every task of a flood before
    /// polling again, and the wake-up is what runs most often then; see `ConcurrencyEventLoop` in AuthDaemonCommand.)
    private let wake = Mutex<Waker?>(nil)
    /// Calls in flight at which the connection stops reading.
    let maximumCalls: Int
    /// Bytes of calls in flight at which the connection stops reading.
    let maximumBytes: Int

    init(maximumCalls: Int = .max, maximumBytes: Int = .max) {
        self.maximumCalls = maximumCalls
        self.maximumBytes = maximumBytes
    }

    /// Sets what wakes the connection's event loop when there is room again.
    func onRoom(_ body: @escaping @Sendable () -> Void) {
        let waker = Waker(body)
        wake.withLock { $0 = waker }
    }

    /// Counts a call of `size` bytes as received.
    func received(size: Int) {
        calls.add(1, ordering: .sequentiallyConsistent)
        bytes.add(size, ordering: .sequentiallyConsistent)
    }

    /// Counts a call of `size` bytes as finished; wakes the loop if it waits and there is room now.
    func finished(size: Int) {
        calls.subtract(1, ordering: .sequentiallyConsistent)
        bytes.subtract(size, ordering: .sequentiallyConsistent)
        if waiting.load(ordering: .sequentiallyConsistent), isBelowLowMark,
            waiting.exchange(false, ordering: .sequentiallyConsistent)
        {
            wake.withLock { $0 }?.body()
        }
    }

    func writeQueued() { queuedWrites.add(1, ordering: .relaxed) }
    func writeDone() { queuedWrites.subtract(1, ordering: .releasing) }
    /// The replies handed to the event loop and not yet written.
    var queuedWriteCount: Int { queuedWrites.load(ordering: .relaxed) }
    var isIdle: Bool {
        calls.load(ordering: .acquiring) == 0 && queuedWrites.load(ordering: .acquiring) == 0
    }
    /// Whether a call is running or waiting to run: a subscription, a wait, a queue of pipelined calls.
    var hasCallsInFlight: Bool { calls.load(ordering: .relaxed) > 0 }
    /// The calls received and not yet finished.
    var callsInFlight: Int { calls.load(ordering: .relaxed) }

    /// Whether no more calls may be read.
    var isAtBound: Bool {
        calls.load(ordering: .sequentiallyConsistent) >= maximumCalls
            || bytes.load(ordering: .sequentiallyConsistent) >= maximumBytes
    }

    private var isBelowLowMark: Bool {
        calls.load(ordering: .sequentiallyConsistent) <= maximumCalls / 2
            && bytes.load(ordering: .sequentiallyConsistent) <= maximumBytes / 2
    }

    /// At the bound, on the event loop: arms the wake-up. Returns false when there is room already (a call
    /// ended meanwhile) and the loop may read on.
    func waitForRoom() -> Bool {
        waiting.store(true, ordering: .sequentiallyConsistent)
        guard isBelowLowMark else { return true }
        // Room already: take the wake-up back, unless the call that made room took it and will wake the loop.
        return !waiting.exchange(false, ordering: .sequentiallyConsistent)
    }
}

/// What wakes a connection's event loop when there is room again.
final class Waker: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// One call read from a connection, for the task that runs the connection's calls.
enum InboundCall: Sendable {
    /// Decoded already (on the event loop, to try ``VarlinkCallHandler/answerImmediately(_:from:)``); nil
    /// when the message is no call.
    case decoded(VarlinkCall?, size: Int)
    /// A message to decode when its turn comes: calls waiting their turn hold their bytes only.
    case message([UInt8])

    /// What the call counts against the connection's bound.
    var size: Int {
        switch self {
        case .decoded(_, let size): size
        case .message(let bytes): bytes.count + 1
        }
    }
}

/// One connection's inbound side: splits the byte stream into messages (bounded) and hands each call, in order,
/// to the task that runs them one after another (``ConnectionCallQueue``); a call the handler can answer at once
/// is answered here, on the event loop, when nothing earlier of the connection is still running.
///
/// Bounded: the connection stops reading (NIO back-pressure: `read()` is held back) while it has
/// ``ConnectionLimits/maximumCallsInFlight`` calls or ``ConnectionLimits/maximumBytesInFlight`` bytes of calls in
/// flight, one-way calls included, or while its unsent output is past ``ConnectionLimits/maximumPendingOutput``;
/// it reads on once half of that is done. It closes the connection when a message is too large or takes longer
/// than ``ConnectionLimits/messageTimeout`` to arrive whole, when its unsent output passes four times the
/// bound (a subscriber that does not read its events), and when it has had no call in flight and received no
/// whole message for ``ConnectionLimits/idleTimeout`` (a peer that trickles bytes, or stalls at its bound
/// without reading its replies).
///
/// Not `Sendable`: it is made and added on the channel's event loop and lives there. What reaches it from other
/// threads (the wake-up when a call's end makes room) holds it in a `NIOLoopBound`, which only gives it back on
/// that loop.
final class VarlinkConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var decoder: VarlinkFrameDecoder
    private let calls: ConnectionCallQueue
    private let handler: any VarlinkCallHandler
    private let activity: ConnectionActivity
    private let limits: ConnectionLimits
    private let logger: Logger
    private let throttle: LogThrottle
    private let peer: PeerCredentials

    private var context: ChannelHandlerContext?
    /// A `read()` held back at the bound, to pass on once there is room.
    private var readHeld = false
    /// The peer shut down its side: once the messages received are handed on, no more will come.
    private var inputClosed = false
    private var closing = false
    /// When the last whole message arrived (or the connection opened, or was last seen busy).
    private var lastMessage = NIODeadline.uptimeNanoseconds(0)
    /// When the first byte of a message still incomplete arrived.
    private var partialSince: NIODeadline?
    private var timer: Scheduled<Void>?
    /// The last immediate reply, and the buffer it was written from.
    private var lastReply: (bytes: [UInt8], buffer: ByteBuffer)?

    init(
        limits: ConnectionLimits,
        peer: PeerCredentials,
        calls: ConnectionCallQueue,
        handler: any VarlinkCallHandler,
        activity: ConnectionActivity,
        logger: Logger,
        throttle: LogThrottle
    ) {
        self.handler = handler
        self.decoder = VarlinkFrameDecoder(maximumMessageSize: limits.maximumMessageSize)
        self.limits = limits
        self.peer = peer
        self.calls = calls
        self.activity = activity
        self.logger = logger
        self.throttle = throttle
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        lastMessage = context.eventLoop.now
        let loop = context.eventLoop
        let connection = NIOLoopBound(self, eventLoop: loop)
        activity.onRoom { loop.execute { connection.value.readOn() } }
        scheduleTimer(context: context)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        self.context = nil
        activity.onRoom {}
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        buffer.withUnsafeReadableBytes { decoder.append($0) }
        process(context: context)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { readOn() }
        context.fireChannelWritabilityChanged()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            // The peer shut down its side: the calls received are answered, then the connection is closed.
            inputClosed = true
            process(context: context)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        calls.finish()
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.debug("Connection error: \(error)", metadata: ["authd.pid": "\(peer.pid)"])
        close(context: context)
    }

    // MARK: Outbound

    func read(context: ChannelHandlerContext) {
        if isBlocked(context: context) {
            readHeld = true
        } else {
            context.read()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let size = unwrapOutboundIn(data).readableBytes
        context.write(data, promise: promise)
        // Past the high-water mark the connection reads nothing more, so only what it has in flight and the
        // events of a subscription can add to its output: that much is bounded, anything beyond is a peer that
        // does not read. One reply larger than the bound (a long ListGroups) is let through whole.
        guard !context.channel.isWritable,
            let unsent = try? context.channel.syncOptions?.getOption(ChannelOptions.bufferedWritableBytes),
            unsent - size >= limits.closingOutput
        else { return }
        closeNoticed("does-not-read", "Closing a connection that does not read its replies", context: context)
    }

    // MARK: Flow

    /// Whether the connection may not take another call now: it is at its bound of calls in flight (the wake-up
    /// is then armed), or its output is past the high-water mark (channelWritabilityChanged reads on).
    private func isBlocked(context: ChannelHandlerContext) -> Bool {
        if closing { return true }
        if !context.channel.isWritable { return true }
        return activity.isAtBound && activity.waitForRoom()
    }

    /// Hands on the messages buffered while there is room, then passes a held `read()` on.
    private func readOn() {
        guard let context else { return }
        process(context: context)
        if readHeld && !isBlocked(context: context) {
            readHeld = false
            context.read()
        }
    }

    /// Takes whole messages from the decoder while the connection has room for them.
    private func process(context: ChannelHandlerContext) {
        guard !closing else { return }
        var answered = false
        do {
            while !isBlocked(context: context), let message = try decoder.nextMessage() {
                lastMessage = context.eventLoop.now
                if take(message, context: context) { answered = true }
            }
        } catch {
            closeNoticed("framing", "Closing a connection: \(error)", context: context)
            return
        }
        if answered { context.flush() }
        if isBlocked(context: context) {
            // What is buffered waits for room: the peer is not late.
            partialSince = nil
        } else if inputClosed {
            // Every whole message is handed on; what is left can never end. The calls' task closes the connection
            // after its last reply; without a task, every reply is written here already.
            if calls.hasTask { calls.finish() } else { closeOnceWritten(context: context) }
        } else if decoder.pendingByteCount > 0 {
            if partialSince == nil {
                partialSince = context.eventLoop.now
                scheduleTimer(context: context)
            }
        } else {
            partialSince = nil
        }
    }

    /// Answers `message` at once or hands it to the calls' task; returns whether it wrote a reply.
    private func take(_ message: [UInt8], context: ChannelHandlerContext) -> Bool {
        guard activity.isIdle else {
            // Calls of the connection are running: this one waits its turn as bytes, decoded when it comes.
            let call = InboundCall.message(message)
            activity.received(size: call.size)
            calls.yield(call)
            return false
        }
        // nil: the framing is intact but the message is no call; the task answers it.
        let call = try? VarlinkCall(decoding: message)
        if let call, let reply = handler.answerImmediately(call, from: peer) {
            context.write(wrapOutboundOut(buffer(for: reply, context: context)), promise: nil)
            return true
        }
        let inbound = InboundCall.decoded(call, size: message.count + 1)
        activity.received(size: inbound.size)
        calls.yield(inbound)
        return false
    }

    /// The bytes of `reply` to write: the same buffer as the last immediate reply when `reply` is the same
    /// array (a GetToken answered from the service's snapshot), so that pipelined calls whose replies are not read
    /// share one copy instead of holding one power-of-two allocation each.
    private func buffer(for reply: [UInt8], context: ChannelHandlerContext) -> ByteBuffer {
        if let last = lastReply, PendingWrites.sameStorage(last.bytes, reply) { return last.buffer }
        let buffer = context.channel.allocator.buffer(bytes: reply)
        lastReply = (reply, buffer)
        return buffer
    }

    // MARK: Timeouts

    private func scheduleTimer(context: ChannelHandlerContext) {
        timer?.cancel()
        var deadline = lastMessage + limits.idleTimeout
        if let partialSince { deadline = min(deadline, partialSince + limits.messageTimeout) }
        timer = context.eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timer = nil
            checkTimeouts()
        }
    }

    private func checkTimeouts() {
        guard let context, !closing else { return }
        let now = context.eventLoop.now
        if let partialSince, now >= partialSince + limits.messageTimeout {
            closeNoticed("slow-message", "Closing a connection whose message does not arrive whole", context: context)
            return
        }
        if now >= lastMessage + limits.idleTimeout {
            // A connection with a call in flight (a subscription, a wait) is busy, however quiet.
            guard activity.hasCallsInFlight else {
                logger.debug("Closing an idle connection", metadata: ["authd.pid": "\(peer.pid)"])
                close(context: context)
                return
            }
            lastMessage = now
        }
        scheduleTimer(context: context)
    }

    // MARK: Closing

    /// Closes the connection with a notice, one line per kind and user per interval.
    private func closeNoticed(_ kind: String, _ message: String, context: ChannelHandlerContext) {
        if let count = throttle.admit(kind, uid: peer.uid) {
            logger.notice(
                "\(message)\(LogThrottle.suffix(count))",
                metadata: ["authd.pid": "\(peer.pid)", "authd.uid": "\(peer.uid)", "authd.count": "\(count)"]
            )
        }
        close(context: context)
    }

    private func close(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        timer?.cancel()
        timer = nil
        calls.finish()
        context.close(promise: nil)
    }

    /// Closes the connection once the replies written to it are sent: the peer shut down its side, and no task
    /// runs calls that could still reply.
    private func closeOnceWritten(context: ChannelHandlerContext) {
        guard !closing else { return }
        closing = true
        timer?.cancel()
        timer = nil
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(channel.allocator.buffer(capacity: 0))).whenComplete { _ in
            channel.close(promise: nil)
        }
    }
}
