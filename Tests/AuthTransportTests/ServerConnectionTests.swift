// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTestKit
import Foundation
import Synchronization
import Systemd
import Testing

@testable import AuthTransport

/// One connection on one end of a socket pair, driven by the server's loop: what a socket alone shows. The kernel
/// keeps what the connection does not read at its bound of calls in flight, a peer that does not read its replies
/// is held at the bound on output, a half-closed peer gets its replies, a peer that closes is seen while its call
/// runs, and the timer and the framing error close the socket. The rules themselves (order, bounds, timeouts) are
/// `VarlinkConnectionStateMachineTests`', with no socket.
@Suite("Varlink server connection")
struct ServerConnectionTests {
    /// test.Now is answered at once; test.Wait waits at the gate; test.Big answers with `size` bytes at once.
    final class Handler: VarlinkCallHandler {
        let gate = Gate()
        let handled = Mutex<[String]>([])
        let closed = CountBarrier()
        /// test.Wait calls whose task was cancelled while they waited: the server closed their connection.
        let cancelled = CountBarrier()

        func dispatch(_ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch {
            // At its turn, whether it came at once or waited behind a call that ran.
            if call.method == "test.Now" { return .answered(Array(#"{"parameters":{}}"#.utf8) + [0]) }
            return .later { [self] replies in
                handled.withLock { $0.append(call.method) }
                if call.method == "test.Wait" {
                    await withTaskCancellationHandler {
                        await gate.wait()
                    } onCancel: {
                        cancelled.increment()
                    }
                }
                try? replies.send(Array(#"{"parameters":{"method":"\#(call.method)"}}"#.utf8) + [0])
            }
        }

        func connectionClosed(_ connection: VarlinkConnectionID) async {
            closed.increment()
        }
    }

    static func call(_ method: String) -> String { #"{"method":"\#(method)"}"# }

    /// Bytes the kernel holds for the server's end: sent by the client and not yet read by the server.
    static func unread(_ serverEnd: Int32) -> Int {
        var count: Int32 = 0
        _ = ioctl(serverEnd, UInt(FIONREAD), &count)
        return Int(count)
    }

    /// Lets the loop take several turns: what it could read by now, it has read.
    static func settle(_ fixture: ServerFixture) async throws {
        for _ in 0..<10 { try await fixture.loop.run { _ in } }
    }

    @Test func aMessagePastTheBoundClosesTheConnection() async throws {
        try await ServerFixture.with(ServerSettings(maximumMessageSize: 1024), handler: Handler()) { fixture in
            let client = try await fixture.connectedPair()
            defer { client.close() }
            let closed = try await offPool { [client] in
                try client.send(String(repeating: " ", count: 2048), terminated: false)
                return try client.receiveUntilClosed(timeout: .seconds(5))
            }
            #expect(closed)
        }
    }

    @Test func atItsBoundOfCallsInFlightTheConnectionStopsReadingUntilHalfAreDone() async throws {
        let handler = Handler()
        try await ServerFixture.with(ServerSettings(maximumCallsInFlight: 4), handler: handler) { fixture in
            let (client, serverEnd) = try await fixture.connectedPairWithServerEnd()
            defer { client.close() }
            // Four calls: the first runs and waits at the gate, three wait behind it; the bound is reached.
            for _ in 0..<4 { try client.send(Self.call("test.Wait")) }
            await handler.gate.waitForWaiters(1)
            try await Self.settle(fixture)
            #expect(Self.unread(serverEnd) == 0)
            // More calls stay in the kernel: the connection does not read at its bound.
            for _ in 0..<4 { try client.send(Self.call("test.Now")) }
            try await Self.settle(fixture)
            #expect(Self.unread(serverEnd) == 4 * (Self.call("test.Now").utf8.count + 1))
            // One call done leaves three in flight, over half: still not reading.
            handler.gate.release(1)
            await handler.gate.waitForWaiters(2)
            try await Self.settle(fixture)
            #expect(Self.unread(serverEnd) > 0)
            // Two done: half the bound; the connection reads on, and every call is answered in order.
            handler.gate.open()
            let replies = try await offPool { [client] in try (0..<8).map { _ in try client.receiveReply() } }
            #expect(replies.prefix(4).allSatisfy { $0.contains("test.Wait") })
            #expect(replies.suffix(4).allSatisfy { $0 == #"{"parameters":{}}"# })
            #expect(Self.unread(serverEnd) == 0)
        }
    }

    @Test func aPeerThatShutsDownItsSideGetsItsRepliesThenTheConnectionCloses() async throws {
        let handler = Handler()
        try await ServerFixture.with(handler: handler) { fixture in
            let client = try await fixture.connectedPair()
            defer { client.close() }
            let (replies, closed) = try await offPool { [client] in
                try client.send(Self.call("test.Now"))
                try client.send(Self.call("test.Peer"))
                try client.send(Self.call("test.Now"))
                shutdown(client.descriptor, Int32(SHUT_WR))
                return (
                    try (0..<3).map { _ in try client.receiveReply() },
                    try client.receiveUntilClosed(timeout: .seconds(5))
                )
            }
            #expect(
                replies == [#"{"parameters":{}}"#, #"{"parameters":{"method":"test.Peer"}}"#, #"{"parameters":{}}"#])
            #expect(closed)
            #expect(await fixture.waitForReleased(1))
            // A task ran test.Peer: the handler hears of the close once, whoever closed.
            #expect(await handler.closed.wait(until: 1))
            try await Self.settle(fixture)
            #expect(handler.closed.count == 1)
        }
    }

    @Test func unreadOutputStopsReadingAtItsBound() async throws {
        try await ServerFixture.with(ServerSettings(maximumPendingOutput: 1024), handler: Handler()) { fixture in
            let (client, serverEnd) = try await fixture.connectedPairWithServerEnd()
            defer { client.close() }
            // The client sends far more calls than the kernel's buffers and the bound hold replies for, and reads
            // none: the server stops reading, so the calls stay unread and the connection stays open.
            let calls = 40_000
            let writer = Task {
                try await offPool { [client] in for _ in 0..<calls { try client.send(Self.call("test.Now")) } }
            }
            try await Self.settle(fixture)
            // Polled: the kernel's count of unread bytes has no event.
            #expect(await BackgroundProcess.eventually { Self.unread(serverEnd) > 0 })
            #expect(try await fixture.connectionCount() == 1)
            // Reading lets it go on to the end.
            let replies = try await offPool { [client] in try (0..<calls).map { _ in try client.receiveReply() } }
            try await writer.value
            #expect(replies.count == calls)
        }
    }

    @Test func aMessageThatTakesTooLongToArriveClosesTheConnection() async throws {
        try await ServerFixture.with(ServerSettings(messageTimeout: .milliseconds(200)), handler: Handler()) {
            fixture in
            let client = try await fixture.connectedPair()
            defer { client.close() }
            let closed = try await offPool { [client] in
                try client.send(#"{"method":"#, terminated: false)
                return try client.receiveUntilClosed(timeout: .seconds(5))
            }
            #expect(closed)
        }
    }

    @Test func aPeerThatClosesIsSeenWhileItsCallRunsAndTheHandlerHearsOnceTheCallReturned() async throws {
        let handler = Handler()
        try await ServerFixture.with(handler: handler) { fixture in
            let client = try await fixture.connectedPair()
            try client.send(Self.call("test.Wait"))
            await handler.gate.waitForWaiters(1)
            client.close()
            // The server cancels the running call's task as it closes the connection.
            #expect(await handler.cancelled.wait(until: 1))
            #expect(try await fixture.connectionCount() == 0)
            #expect(handler.closed.count == 0)
            handler.gate.open()
            #expect(await handler.closed.wait(until: 1))
        }
    }
}
