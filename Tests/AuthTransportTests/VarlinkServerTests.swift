// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import AuthTestKit
import AuthTransport
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

@Suite("Varlink server on a Unix socket")
struct VarlinkServerTests {
    /// Answers test.Peer with the caller's credentials, floods test.Flood with large replies until the
    /// connection is gone, and holds test.Hold for a while before answering.
    struct TestHandler: VarlinkCallHandler {
        let floodEnded = Counter()

        struct PeerReply: Codable, Sendable { var pid: Int32, uid: UInt32, gid: UInt32 }
        struct Blob: Codable, Sendable { var data: String }
        struct ThreadReply: Codable, Sendable { var thread: UInt }

        /// test.Thread: the thread of the event loop that serves the connection.
        func answerImmediately(_ call: VarlinkCall, from peer: PeerCredentials) -> [UInt8]? {
            guard call.method == "test.Thread" else { return nil }
            return try? VarlinkReplyEncoder.reply(ThreadReply(thread: UInt(pthread_self())))
        }

        func handle(_ call: VarlinkCall, from peer: PeerCredentials, replies: VarlinkReplies) async {
            switch call.method {
            case "test.Peer":
                try? replies.send(VarlinkReplyEncoder.reply(PeerReply(pid: peer.pid, uid: peer.uid, gid: peer.gid)))
            case "test.Flood":
                let blob = Blob(data: String(repeating: "x", count: 64 * 1024))
                while (try? replies.send(VarlinkReplyEncoder.reply(blob, continues: true))) != nil {}
                floodEnded.increment()
            case "test.Hold":
                try? await Task.sleep(for: .milliseconds(600))
                try? replies.send(VarlinkReplyEncoder.reply(Blob(data: "held")))
            default:
                try? replies.send(VarlinkReplyEncoder.error(.methodNotFound(call.method)))
            }
        }
    }

    final class Counter: Sendable {
        private let value = Mutex(0)
        func increment() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    /// A server on a fresh socket, running until `body` returns.
    func withServer(
        maximumConnections: Int? = nil,
        maximumPendingOutput: Int? = nil,
        idleTimeout: Duration? = nil,
        handler: TestHandler = TestHandler(),
        _ body: (VarlinkServer, String) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "authd-transport")
        defer { directory.remove() }
        let path = directory.appending("io.socket")
        var configuration = VarlinkServer.Configuration(listen: .path(path, mode: 0o600))
        if let maximumConnections { configuration.maximumConnections = maximumConnections }
        if let maximumPendingOutput { configuration.maximumPendingOutput = maximumPendingOutput }
        if let idleTimeout { configuration.idleTimeout = idleTimeout }
        let server = VarlinkServer(configuration: configuration, handler: handler, logger: Logger(label: "test"))
        let listening = Counter()
        let task = Task { try await server.run { listening.increment() } }
        #expect(await BackgroundProcess.eventually { listening.count == 1 })
        try await body(server, path)
        task.cancel()
        try await task.value
    }

    @Test func handlersSeeThePeersCredentialsAndTheSocketIsPrivate() async throws {
        try await withServer { _, path in
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            let client = try UnixClient(path: path)
            defer { client.close() }
            let reply = try await offPool { [client] in try client.exchange(#"{"method":"test.Peer"}"#) }
            #expect(reply == #"{"parameters":{"gid":\#(getgid()),"pid":\#(getpid()),"uid":\#(getuid())}}"#)
        }
    }

    @Test func oneShotConnectionsAreServedByTheLoopThatAcceptedThemAndHeldOnesSpread() async throws {
        try await withServer { server, path in
            func thread(of client: UnixClient) async throws -> String {
                try await offPool { [client] in try client.exchange(#"{"method":"test.Thread"}"#) }
            }
            // One connection at a time, each closed before the next: all served by the one loop that accepts.
            var oneShot: Set<String> = []
            for _ in 0..<6 {
                let client = try UnixClient(path: path)
                oneShot.insert(try await thread(of: client))
                client.close()
                #expect(await BackgroundProcess.eventually { server.connectionCount == 0 })
            }
            #expect(oneShot.count == 1)

            // Connections held open move the accepting to another loop (NIO's shared group has one per core).
            let held = try (0..<4).map { _ in try UnixClient(path: path) }
            defer { for client in held { client.close() } }
            var threads: Set<String> = []
            for client in held { threads.insert(try await thread(of: client)) }
            #expect(threads.count == min(2, System.coreCount))
        }
    }

    /// Connections opened, held and closed at random by three clients at once move the accepting loop back and
    /// forth; every one is accepted and answered. (Two loops reading at once would wake one for a connection the
    /// other took, which NIO's debug build asserts against; one stopping before another starts would strand the
    /// waiting ones.)
    @Test func everyConnectionIsAnsweredWhileTheAcceptingLoopMoves() async throws {
        try await withServer { server, path in
            try await withThrowingTaskGroup(of: (opened: Int, answered: Int).self) { group in
                for seed in 1...3 {
                    group.addTask {
                        try await offPool {
                            var random = SplitMix64(seed: UInt64(seed))
                            var held: [UnixClient] = []
                            defer { for client in held { client.close() } }
                            var (opened, answered) = (0, 0)
                            for _ in 0..<600 {
                                if !held.isEmpty && (held.count > 12 || random.next() % 100 < 45) {
                                    held.remove(at: Int(random.next() % UInt64(held.count))).close()
                                    continue
                                }
                                let client = try UnixClient(path: path, receiveTimeout: .seconds(5))
                                opened += 1
                                if try client.exchange(#"{"method":"test.Thread"}"#).contains("thread") {
                                    answered += 1
                                }
                                if random.next() % 100 < 60 { held.append(client) } else { client.close() }
                            }
                            return (opened, answered)
                        }
                    }
                }
                for try await client in group {
                    #expect(client.opened > 100)
                    #expect(client.answered == client.opened)
                }
            }
            #expect(await BackgroundProcess.eventually { server.connectionCount == 0 })
        }
    }

    @Test func refusesToTakeOverASocketAnotherServerServes() async throws {
        try await withServer { _, path in
            let second = VarlinkServer(
                configuration: .init(listen: .path(path, mode: 0o600)),
                handler: TestHandler(),
                logger: Logger(label: "test")
            )
            await #expect {
                try await second.run()
            } throws: { error in
                "\(error)".contains("another process is serving \(path)")
            }
        }
    }

    @Test func connectionsBeyondTheLimitAreClosedAtOnce() async throws {
        try await withServer(maximumConnections: 2) { server, path in
            let first = try UnixClient(path: path)
            let second = try UnixClient(path: path)
            defer {
                first.close()
                second.close()
            }
            #expect(await BackgroundProcess.eventually { server.connectionCount == 2 })
            let third = try UnixClient(path: path)
            defer { third.close() }
            let result1 = try await offPool { [third] in try third.receiveUntilClosed(timeout: .seconds(5)) }
            #expect(result1)
            let result2 = try await offPool { [first] in try first.exchange(#"{"method":"test.Peer"}"#) }
            #expect(result2.contains("uid"))
        }
    }

    @Test func aClientThatDoesNotReadIsDroppedAndOthersGoOn() async throws {
        let handler = TestHandler()
        try await withServer(maximumPendingOutput: 256 * 1024, handler: handler) { server, path in
            let flooded = try UnixClient(path: path)
            defer { flooded.close() }
            try await offPool { [flooded] in try flooded.send(#"{"method":"test.Flood","more":true}"#) }
            // It never reads: the server must give up on it, and the handler's send must fail.
            #expect(await BackgroundProcess.eventually(timeout: .seconds(20)) { handler.floodEnded.count == 1 })
            let other = try UnixClient(path: path)
            defer { other.close() }
            let result3 = try await offPool { [other] in try other.exchange(#"{"method":"test.Peer"}"#) }
            #expect(result3.contains("uid"))
            #expect(await BackgroundProcess.eventually { server.connectionCount == 1 })
        }
    }

    @Test func idleConnectionsAreClosedButBusyOnesAreNot() async throws {
        try await withServer(idleTimeout: .milliseconds(200)) { _, path in
            let idle = try UnixClient(path: path)
            defer { idle.close() }
            let result4 = try await offPool { [idle] in try idle.receiveUntilClosed(timeout: .seconds(5)) }
            #expect(result4)

            // A call in flight for longer than the idle timeout keeps its connection.
            let busy = try UnixClient(path: path)
            defer { busy.close() }
            let held = try await offPool { [busy] in try busy.exchange(#"{"method":"test.Hold"}"#) }
            #expect(held == #"{"parameters":{"data":"held"}}"#)
        }
    }
}
