// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Logging
import Systemd

@testable import AuthTransport

#if canImport(Glibc)
    import Glibc
#endif

/// A ``VarlinkServer`` on a ``TestLoop``, listening on a fresh socket, for one test.
struct ServerFixture: Sendable {
    let loop: TestLoop
    let server: LoopBound<VarlinkServer>
    let path: String

    /// Runs `body` with a started server, then stops it and its loop.
    static func with(
        _ settings: ServerSettings = ServerSettings(),
        handler: any VarlinkCallHandler,
        _ body: (ServerFixture) async throws -> Void
    ) async throws {
        let directory = try TemporaryDirectory(prefix: "authd-transport")
        defer { directory.remove() }
        let path = directory.appending("io.socket")
        var configuration = VarlinkServer.Configuration(listen: .path(path, mode: 0o600))
        settings.apply(to: &configuration)
        let loop = try TestLoop()
        defer { loop.stop() }
        let server = try await loop.run { [configuration] mainLoop in
            let server = VarlinkServer(
                configuration: configuration, handler: handler, loop: mainLoop, executor: loop.executor,
                logger: Logger(label: "test"))
            try server.start()
            return LoopBound(server, executor: loop.executor)
        }
        let fixture = ServerFixture(loop: loop, server: server, path: path)
        do {
            try await body(fixture)
        } catch {
            try await fixture.stop()
            throw error
        }
        try await fixture.stop()
    }

    /// Stops the server: it closes every connection and removes its socket file.
    func stop() async throws {
        try await loop.run { [server] _ in server.value.stop() }
    }

    /// The server's open connections, counted on its loop.
    func connectionCount() async throws -> Int {
        try await loop.run { [server] _ in server.value.connectionCount }
    }

    /// Waits until the server counts `count` connections. The count changes with no event a client can see
    /// (a peer's close reaches the server after the peer has gone), so this asks the loop every 10 ms.
    func waitForConnections(_ count: Int, timeout: Duration = .seconds(10)) async throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if try await connectionCount() == count { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// A connection served through one end of a socket pair, as if accepted; the other end is the client's.
    func connectedPair(receiveTimeout: Duration = .seconds(20)) async throws -> UnixClient {
        try await connectedPairWithServerEnd(receiveTimeout: receiveTimeout).client
    }

    /// The same, with the server's end: `FIONREAD` on it is what the server has not read.
    func connectedPairWithServerEnd(receiveTimeout: Duration = .seconds(20)) async throws -> (
        client: UnixClient, serverEnd: Int32
    ) {
        var pair: [Int32] = [0, 0]
        guard
            socketpair(
                AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0
        else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let serverEnd = pair[0]
        _ = fcntl(serverEnd, F_SETFL, fcntl(serverEnd, F_GETFL) | O_NONBLOCK)
        try await loop.run { [server] _ in server.value.serve(connected: serverEnd) }
        return (UnixClient(connected: pair[1], receiveTimeout: receiveTimeout), serverEnd)
    }
}

/// The server's bounds a test sets; nil keeps the default.
struct ServerSettings {
    var maximumConnections: Int?
    var maximumMessageSize: Int?
    var maximumCallsInFlight: Int?
    var maximumPendingOutput: Int?
    var idleTimeout: Duration?
    var messageTimeout: Duration?

    func apply(to configuration: inout VarlinkServer.Configuration) {
        if let maximumConnections { configuration.maximumConnections = maximumConnections }
        if let maximumMessageSize { configuration.maximumMessageSize = maximumMessageSize }
        if let maximumCallsInFlight { configuration.maximumCallsInFlight = maximumCallsInFlight }
        if let maximumPendingOutput { configuration.maximumPendingOutput = maximumPendingOutput }
        if let idleTimeout { configuration.idleTimeout = idleTimeout }
        if let messageTimeout { configuration.messageTimeout = messageTimeout }
    }
}
