// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import AuthTestKit
import AuthTransport
import Foundation
import Logging
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
