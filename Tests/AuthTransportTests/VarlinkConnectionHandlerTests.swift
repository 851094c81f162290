// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Logging
import NIOCore
import NIOEmbedded
import Synchronization
import Testing

@testable import AuthTransport

/// One connection's handler on an `EmbeddedChannel`: its framing, its bound on calls in flight with NIO
/// back-pressure (a `read()` held back), its bound on output, and its timeouts on the loop's manual clock.
@Suite("Varlink connection handler")
struct VarlinkConnectionHandlerTests {
    /// Answers `test.Now` at once on the loop; every other call goes to the calls' task (here: the test).
    struct ImmediateHandler: VarlinkCallHandler {
        func handle(_ call: VarlinkCall, from peer: PeerCredentials, replies: VarlinkReplies) async {}

        func answerImmediately(_ call: VarlinkCall, from peer: PeerCredentials) -> [UInt8]? {
            call.method == "test.Now" ? Array(#"{"parameters":{}}"#.utf8) + [0] : nil
        }
    }

    /// Counts the `read()`s that reach the head of the pipeline: those the handler let through.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = ByteBuffer
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    /// A connection handler on an embedded channel, with what it hands to the calls' task.
    final class Connection {
        let channel = EmbeddedChannel()
        let loop: EmbeddedEventLoop
        let activity: ConnectionActivity
        let readCounter = ReadCounter()
        /// How many times the connection started its calls' task.
        private(set) var tasksStarted = 0
        private var calls: AsyncStream<InboundCall>.Iterator?

        init(limits: ConnectionLimits) throws {
            loop = channel.embeddedEventLoop
            activity = ConnectionActivity(
                maximumCalls: limits.maximumCallsInFlight, maximumBytes: limits.maximumBytesInFlight)
            let queue = ConnectionCallQueue { [unowned self] stream in
                tasksStarted += 1
                calls = stream.makeAsyncIterator()
            }
            let handler = VarlinkConnectionHandler(
                limits: limits,
                peer: PeerCredentials(pid: 1, uid: 1000, gid: 1000),
                calls: queue,
                handler: ImmediateHandler(),
                activity: activity,
                logger: Logger(label: "test"),
                throttle: LogThrottle()
            )
            try channel.pipeline.syncOperations.addHandlers(readCounter, handler)
            try channel.connect(to: SocketAddress(unixDomainSocketPath: "/nonexistent")).wait()
        }

        /// Sends `bytes` as one read from the socket.
        func receive(_ bytes: [UInt8]) throws {
            try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
        }

        /// Asks for a read, as NIO does after each read with auto-read on.
        func askToRead() { channel.read() }

        /// The next call handed to the task, and counts it finished as the task would.
        func finishNextCall() async -> InboundCall? {
            guard let call = await calls?.next() else { return nil }
            activity.finished(size: call.size)
            loop.run()  // the wake-up the task's end scheduled
            return call
        }

        /// The replies written and flushed so far.
        func writtenReplies() throws -> [String] {
            var replies: [String] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
                replies += buffer.readableBytesView.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            }
            return replies
        }
    }

    static func call(_ method: String, oneway: Bool = false) -> [UInt8] {
        Array(#"{"method":"\#(method)"\#(oneway ? #","oneway":true"# : "")}"#.utf8) + [0]
    }

    @Test func callsAnsweredAtOnceStartNoTaskAndTheFirstOtherCallStartsOne() async throws {
        let connection = try Connection(limits: ConnectionLimits())
        try connection.receive(Self.call("test.Now") + Self.call("test.Now"))
        #expect(try connection.writtenReplies().count == 2)
        #expect(connection.tasksStarted == 0, "a call answered on the loop started the calls' task")

        try connection.receive(Self.call("test.Slow") + Self.call("test.Slow"))
        #expect(connection.tasksStarted == 1)
        // The first is decoded on the loop (to try answering it); the second waits its turn as bytes.
        guard case .decoded(let first?, _)? = await connection.finishNextCall(),
            case .message(let second)? = await connection.finishNextCall()
        else {
            Issue.record("the two calls were not handed on")
            return
        }
        #expect(first.method == "test.Slow")
        #expect(try VarlinkCall(decoding: second).method == "test.Slow")
        #expect(connection.tasksStarted == 1, "each call started a task of its own")
    }

    @Test func aPeerThatShutsDownItsSideGetsTheRepliesGivenAtOnceThenTheConnectionCloses() throws {
        let connection = try Connection(limits: ConnectionLimits())
        try connection.receive(Self.call("test.Now") + Self.call("test.Now"))
        connection.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        #expect(try connection.writtenReplies().count == 2)
        #expect(connection.tasksStarted == 0)
        #expect(!connection.channel.isActive, "the connection stayed open after its last reply")
    }

    @Test func aCallSentByteByByteIsOneCall() async throws {
        let connection = try Connection(limits: ConnectionLimits())
        for byte in Self.call("test.Slow") { try connection.receive([byte]) }
        #expect(connection.activity.callsInFlight == 1)
        guard case .decoded(let call?, _)? = await connection.finishNextCall() else {
            Issue.record("no call handed on")
            return
        }
        #expect(call.method == "test.Slow")
    }

    @Test func aMessagePastTheBoundClosesTheConnection() throws {
        var limits = ConnectionLimits()
        limits.maximumMessageSize = 1024
        let connection = try Connection(limits: limits)
        try? connection.receive([UInt8](repeating: UInt8(ascii: "x"), count: 2048))
        #expect(!connection.channel.isActive)
    }

    @Test func atItsBoundOfCallsInFlightTheConnectionStopsReadingUntilHalfAreDone() async throws {
        var limits = ConnectionLimits()
        limits.maximumCallsInFlight = 4
        let connection = try Connection(limits: limits)
        connection.askToRead()
        #expect(connection.readCounter.reads == 1)

        // 100 one-way calls in one read: 4 are taken, the others wait in the decoder, and reading stops.
        try connection.receive((0..<100).flatMap { _ in Self.call("test.Slow", oneway: true) })
        #expect(connection.activity.callsInFlight == 4)
        connection.askToRead()
        #expect(connection.readCounter.reads == 1, "the connection read on at its bound")

        // One call done: still above half the bound, nothing more is taken.
        _ = await connection.finishNextCall()
        #expect(connection.activity.callsInFlight == 3)
        // Two done: half the bound; the connection takes calls up to the bound again.
        _ = await connection.finishNextCall()
        #expect(connection.activity.callsInFlight == 4)
        #expect(connection.readCounter.reads == 1)

        // Once every buffered call is taken and done, the held read goes on.
        var finished = 2
        while connection.activity.callsInFlight > 0 {
            _ = await connection.finishNextCall()
            finished += 1
        }
        #expect(finished == 100)
        #expect(connection.readCounter.reads == 2, "the held read was not passed on")
    }

    @Test func theBytesOfCallsInFlightAreBoundedToo() async throws {
        var limits = ConnectionLimits()
        limits.maximumBytesInFlight = 1024
        let connection = try Connection(limits: limits)
        let padded =
            Array(#"{"method":"test.Slow","parameters":{"pad":""#.utf8)
            + [UInt8](repeating: UInt8(ascii: "p"), count: 600) + Array(#""}}"#.utf8) + [0]
        try connection.receive((0..<10).flatMap { _ in padded })
        // The first call is always let through; the second brings it past 1 KiB.
        #expect(connection.activity.callsInFlight == 2)
        connection.askToRead()
        #expect(connection.readCounter.reads == 0)
    }

    @Test func unreadOutputStopsReadingAndTheConnectionReadsOnOnceItDrains() throws {
        let connection = try Connection(limits: ConnectionLimits())
        connection.channel.isWritable = false
        connection.channel.pipeline.fireChannelWritabilityChanged()
        try connection.receive((0..<5).flatMap { _ in Self.call("test.Now") })
        connection.askToRead()
        #expect(try connection.writtenReplies().isEmpty, "answered while the peer does not read")
        #expect(connection.readCounter.reads == 0)

        connection.channel.isWritable = true
        connection.channel.pipeline.fireChannelWritabilityChanged()
        #expect(try connection.writtenReplies().count == 5)
        #expect(connection.readCounter.reads == 1)
    }

    @Test func outputFourTimesPastTheBoundClosesTheConnection() throws {
        var limits = ConnectionLimits()
        limits.maximumPendingOutput = 1024
        let connection = try Connection(limits: limits)
        connection.channel.isWritable = false
        // One reply larger than the bound goes through whole.
        connection.channel.write(connection.channel.allocator.buffer(repeating: 1, count: 3 * 1024), promise: nil)
        #expect(connection.channel.isActive)
        // Events of a subscription keep coming (unflushed here, as if the socket took none): the one written
        // when 4 KiB are waiting already closes the connection.
        connection.channel.write(connection.channel.allocator.buffer(repeating: 1, count: 1024), promise: nil)
        #expect(connection.channel.isActive)
        connection.channel.write(connection.channel.allocator.buffer(repeating: 1, count: 1024), promise: nil)
        #expect(!connection.channel.isActive)
    }

    @Test func onlyAWholeMessageResetsTheIdleTimeout() throws {
        var limits = ConnectionLimits()
        limits.idleTimeout = .seconds(10)
        limits.messageTimeout = .seconds(1000)
        // A whole message every 6 s keeps the connection open.
        let talking = try Connection(limits: limits)
        for _ in 0..<5 {
            talking.loop.advanceTime(by: .seconds(6))
            try talking.receive(Self.call("test.Now"))
        }
        #expect(talking.channel.isActive)
        #expect(try talking.writtenReplies().count == 5)

        // A byte a second does not.
        let trickling = try Connection(limits: limits)
        let message = Self.call("test.Now")
        for second in 0..<9 {
            trickling.loop.advanceTime(by: .seconds(1))
            try trickling.receive([message[second]])
        }
        #expect(trickling.channel.isActive)
        trickling.loop.advanceTime(by: .seconds(1))
        #expect(!trickling.channel.isActive, "bytes that make no message kept the connection open")
    }

    @Test func aMessageThatTakesTooLongToArriveClosesTheConnection() throws {
        var limits = ConnectionLimits()
        limits.messageTimeout = .seconds(5)
        let connection = try Connection(limits: limits)
        try connection.receive(Array(Self.call("test.Now").prefix(8)))
        connection.loop.advanceTime(by: .seconds(4))
        #expect(connection.channel.isActive)
        connection.loop.advanceTime(by: .seconds(1))
        #expect(!connection.channel.isActive)
    }

    @Test func aConnectionWithACallInFlightIsBusyNotIdle() async throws {
        var limits = ConnectionLimits()
        limits.idleTimeout = .seconds(10)
        let connection = try Connection(limits: limits)
        try connection.receive(Self.call("test.Subscribe"))
        connection.loop.advanceTime(by: .seconds(3600))
        #expect(connection.channel.isActive)
        // Once it ends, the connection is idle, and closed a timeout later.
        _ = await connection.finishNextCall()
        connection.loop.advanceTime(by: .seconds(10))
        #expect(!connection.channel.isActive)
    }
}
