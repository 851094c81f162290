// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTestKit
import Foundation
import Logging
import Synchronization
import Systemd
import Testing

@testable import AuthTransport

@Suite("Varlink server on a Unix socket")
struct VarlinkServerTests {
    /// Answers test.Peer with the caller's credentials, floods test.Flood with large replies until the
    /// connection is gone, holds test.Hold until released, and says on which thread it runs test.Thread (at once)
    /// and test.TaskThread (in the connection's task).
    final class TestHandler: VarlinkCallHandler {
        let floodEnded = CountBarrier()
        let held = Gate()

        struct PeerReply: Codable, Sendable { var pid: Int32, uid: UInt32, gid: UInt32 }
        struct Blob: Codable, Sendable { var data: String }
        struct ThreadReply: Codable, Sendable { var thread: UInt }

        func dispatch(_ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch {
            if call.method == "test.Thread" {
                return .answered(try? VarlinkReplyEncoder.reply(ThreadReply(thread: UInt(pthread_self()))))
            }
            return .later { [self] replies in await handle(call, from: peer, replies: replies) }
        }

        func handle(_ call: VarlinkCall, from peer: Caller, replies: VarlinkReplies) async {
            switch call.method {
            case "test.Peer":
                try? replies.send(VarlinkReplyEncoder.reply(PeerReply(pid: peer.pid, uid: peer.uid, gid: peer.gid)))
            case "test.Thread", "test.TaskThread":
                try? replies.send(VarlinkReplyEncoder.reply(ThreadReply(thread: UInt(pthread_self()))))
            case "test.Flood":
                let blob = Blob(data: String(repeating: "x", count: 64 * 1024))
                while (try? replies.send(VarlinkReplyEncoder.reply(blob, continues: true))) != nil {
                    await Task.yield()
                }
                floodEnded.increment()
            case "test.Hold":
                await held.wait()
                try? replies.send(VarlinkReplyEncoder.reply(Blob(data: "held")))
            default:
                try? replies.send(VarlinkReplyEncoder.error(.methodNotFound(call.method)))
            }
        }
    }

    @Test func handlersSeeThePeersCredentialsAndTheSocketIsPrivate() async throws {
        try await ServerFixture.with(handler: TestHandler()) { fixture in
            var info = stat()
            #expect(stat(fixture.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            let client = try UnixClient(path: fixture.path)
            defer { client.close() }
            let reply = try await offPool { [client] in try client.exchange(#"{"method":"test.Peer"}"#) }
            #expect(reply == #"{"parameters":{"gid":\#(getgid()),"pid":\#(getpid()),"uid":\#(getuid())}}"#)
        }
    }

    @Test func bothRoutesOfACallRunOnTheLoopsThread() async throws {
        try await ServerFixture.with(handler: TestHandler()) { fixture in
            let loopThread = try await fixture.loop.run { _ in UInt(pthread_self()) }
            let client = try UnixClient(path: fixture.path)
            defer { client.close() }
            let (atOnce, inTask) = try await offPool { [client] in
                (
                    try client.exchange(#"{"method":"test.Thread"}"#),
                    try client.exchange(#"{"method":"test.TaskThread"}"#)
                )
            }
            #expect(atOnce == #"{"parameters":{"thread":\#(loopThread)}}"#)
            #expect(inTask == #"{"parameters":{"thread":\#(loopThread)}}"#)
        }
    }

    @Test func repliesKeepTheOrderOfTheCallsWhateverTheirRoute() async throws {
        let handler = TestHandler()
        try await ServerFixture.with(handler: handler) { fixture in
            let client = try UnixClient(path: fixture.path)
            defer { client.close() }
            // Held in the task, then one the loop could answer at once, then one for the task again.
            try await offPool { [client] in
                try client.send(#"{"method":"test.Hold"}"#)
                try client.send(#"{"method":"test.Thread"}"#)
                try client.send(#"{"method":"test.Peer"}"#)
            }
            await handler.held.waitForWaiters(1)
            handler.held.open()
            let replies = try await offPool { [client] in try (0..<3).map { _ in try client.receiveReply() } }
            #expect(replies[0] == #"{"parameters":{"data":"held"}}"#)
            #expect(replies[1].contains("thread"))
            #expect(replies[2].contains("uid"))
        }
    }

    /// Connections opened, held and closed at random by three clients at once: every one is accepted and
    /// answered, and none is left counted once all are closed.
    @Test func everyConnectionIsAnsweredAndCountedOnce() async throws {
        try await ServerFixture.with(handler: TestHandler()) { fixture in
            let opened = try await withThrowingTaskGroup(of: (opened: Int, answered: Int).self) { group in
                for seed in 1...3 {
                    group.addTask {
                        try await offPool {
                            var random = SplitMix64(seed: UInt64(seed))
                            var held: [UnixClient] = []
                            defer { for client in held { client.close() } }
                            var (opened, answered) = (0, 0)
                            for _ in 0..<400 {
                                if !held.isEmpty && (held.count > 12 || random.next() % 100 < 45) {
                                    held.remove(at: Int(random.next() % UInt64(held.count))).close()
                                    continue
                                }
                                let client = try UnixClient(path: fixture.path, receiveTimeout: .seconds(5))
                                opened += 1
                                let method = random.next() % 2 == 0 ? "test.Thread" : "test.TaskThread"
                                if try client.exchange(#"{"method":"\#(method)"}"#).contains("thread") {
                                    answered += 1
                                }
                                if random.next() % 100 < 60 { held.append(client) } else { client.close() }
                            }
                            return (opened, answered)
                        }
                    }
                }
                var opened = 0
                for try await client in group {
                    #expect(client.opened > 100)
                    #expect(client.answered == client.opened)
                    opened += client.opened
                }
                return opened
            }
            // Every connection the clients opened, they closed: the server let go of each.
            #expect(await fixture.waitForReleased(opened))
        }
    }

    @Test func refusesToTakeOverASocketAnotherServerServes() async throws {
        try await ServerFixture.with(handler: TestHandler()) { fixture in
            let message = try await fixture.loop.run { [path = fixture.path] loop in
                let second = VarlinkServer(
                    configuration: .init(listen: .path(path, mode: 0o600)), handler: TestHandler(), loop: loop,
                    executor: fixture.loop.executor, logger: Logger(label: "test"))
                do {
                    try second.start()
                    return "started"
                } catch {
                    return "\(error)"
                }
            }
            #expect(message.contains("another process is serving \(fixture.path)"))
        }
    }

    @Test func connectionsBeyondTheLimitAreClosedAtOnce() async throws {
        try await ServerFixture.with(ServerSettings(maximumConnections: 2), handler: TestHandler()) { fixture in
            let first = try UnixClient(path: fixture.path)
            let second = try UnixClient(path: fixture.path)
            defer {
                first.close()
                second.close()
            }
            #expect(await fixture.waitForAccepted(2))
            let third = try UnixClient(path: fixture.path)
            defer { third.close() }
            let thirdClosed = try await offPool { [third] in try third.receiveUntilClosed(timeout: .seconds(5)) }
            #expect(thirdClosed)
            let reply = try await offPool { [first] in try first.exchange(#"{"method":"test.Peer"}"#) }
            #expect(reply.contains("uid"))
        }
    }

    /// With no other connection the flooded one is a source of the loop of its own; behind
    /// `ConnectionPoller.directLimit` idle ones it is watched through the poller's epoll set: both ways drop it.
    @Test(arguments: [0, ConnectionPoller.directLimit])
    func aClientThatDoesNotReadIsDroppedAndOthersGoOn(idleBefore: Int) async throws {
        let handler = TestHandler()
        try await ServerFixture.with(ServerSettings(maximumPendingOutput: 256 * 1024), handler: handler) {
            fixture in
            let idle = try (0..<idleBefore).map { _ in try UnixClient(path: fixture.path) }
            defer { for client in idle { client.close() } }
            #expect(await fixture.waitForAccepted(idleBefore))
            let flooded = try UnixClient(path: fixture.path)
            defer { flooded.close() }
            try await offPool { [flooded] in try flooded.send(#"{"method":"test.Flood","more":true}"#) }
            // It never reads: the server must give up on it, and the handler's send must fail.
            #expect(
                await handler.floodEnded.wait(until: 1))
            let other = try UnixClient(path: fixture.path)
            defer { other.close() }
            let reply = try await offPool { [other] in try other.exchange(#"{"method":"test.Peer"}"#) }
            #expect(reply.contains("uid"))
            // The flooded connection is the one let go of; the idle ones and the other stay.
            #expect(await fixture.waitForReleased(1, holding: nil))
            #expect(try await fixture.connectionCount() == idleBefore + 1)
        }
    }

    /// A client that writes calls as fast as it can, and reads its replies, does not hold the loop: another
    /// client's call is answered while the flood's calls are still coming.
    @Test func aFloodingConnectionDoesNotStarveAnother() async throws {
        try await ServerFixture.with(handler: TestHandler()) { fixture in
            let flooder = try UnixClient(path: fixture.path)
            defer { flooder.close() }
            let calls = 20_000
            let burst = Array(repeating: Array(#"{"method":"test.Thread"}"#.utf8) + [0], count: calls).joined()
            let replies = CountBarrier()
            let writer = Task {
                try await offPool { [flooder] in try flooder.send(bytes: Array(burst)) }
            }
            let reader = Task {
                try await offPool { [flooder] in
                    for _ in 0..<calls {
                        _ = try flooder.receiveReply()
                        replies.increment()
                    }
                }
            }
            // Wait for the flood to be under way, then ask.
            #expect(await replies.wait(until: 101))
            let other = try UnixClient(path: fixture.path)
            defer { other.close() }
            let reply = try await offPool { [other] in try other.exchange(#"{"method":"test.Peer"}"#) }
            let answeredMeanwhile = replies.count
            #expect(reply.contains("uid"))
            #expect(answeredMeanwhile < calls)
            try await writer.value
            try await reader.value
            #expect(replies.count == calls)
        }
    }

    @Test func idleConnectionsAreClosedButBusyOnesAreNot() async throws {
        let handler = TestHandler()
        try await ServerFixture.with(ServerSettings(idleTimeout: .milliseconds(200)), handler: handler) { fixture in
            let idle = try UnixClient(path: fixture.path)
            defer { idle.close() }
            let idleClosed = try await offPool { [idle] in try idle.receiveUntilClosed(timeout: .seconds(5)) }
            #expect(idleClosed)

            // A call in flight for longer than the idle timeout keeps its connection.
            let busy = try UnixClient(path: fixture.path)
            defer { busy.close() }
            try await offPool { [busy] in try busy.send(#"{"method":"test.Hold"}"#) }
            await handler.held.waitForWaiters(1)
            // Past the idle timeout, so that a wrong close would have happened (the one sleep: time must pass).
            try await Task.sleep(for: .milliseconds(600))
            handler.held.open()
            let reply = try await offPool { [busy] in try busy.receiveReply() }
            #expect(reply == #"{"parameters":{"data":"held"}}"#)
            let busyClosed = try await offPool { [busy] in try busy.receiveUntilClosed(timeout: .seconds(5)) }
            #expect(busyClosed)
        }
    }

    @Test func stoppingClosesEveryConnectionAndRemovesTheSocket() async throws {
        try await ServerFixture.with(handler: TestHandler()) { fixture in
            let client = try UnixClient(path: fixture.path)
            defer { client.close() }
            #expect(await fixture.waitForAccepted(1))
            try await fixture.stop()
            let clientClosed = try await offPool { [client] in try client.receiveUntilClosed(timeout: .seconds(5)) }
            #expect(clientClosed)
            #expect(access(fixture.path, F_OK) != 0)
        }
    }
}

/// Calls that wait until the test opens the gate; the test can wait until a number of them wait.
final class Gate: Sendable {
    private let state = Mutex<(isOpen: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))
    private let arrivals = CountBarrier()

    /// Waits until the gate opens.
    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state in
                if state.isOpen { return true }
                state.waiters.append(continuation)
                return false
            }
            arrivals.increment()
            if resumeNow { continuation.resume() }
        }
    }

    /// Opens the gate: every waiter goes on, and every later one at once.
    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Lets the first `count` waiters go on.
    func release(_ count: Int) {
        let waiters = state.withLock { state in
            let released = Array(state.waiters.prefix(count))
            state.waiters.removeFirst(released.count)
            return released
        }
        for waiter in waiters { waiter.resume() }
    }

    /// How many calls have come to the gate.
    var arrived: Int { arrivals.count }

    /// Waits until `count` calls have come to the gate in all.
    func waitForWaiters(_ count: Int) async {
        _ = await arrivals.wait(until: count)
    }
}
