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
    /// What the server logs, its debug lines of each connection it accepts and releases among it.
    let log: LogCapture

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
        let log = LogCapture()
        let server = try await loop.run { [configuration] mainLoop in
            let server = VarlinkServer(
                configuration: configuration, handler: handler, loop: mainLoop, executor: loop.executor,
                logger: log.logger())
            try server.start()
            return LoopBound(server, executor: loop.executor)
        }
        let fixture = ServerFixture(loop: loop, server: server, path: path, log: log)
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

    /// Waits until the server has accepted `count` connections in all, or more: its debug line "Accepted a
    /// connection", logged once it serves one, checked as each line comes.
    func waitForAccepted(_ count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        await log.waitForEntries(timeout: timeout) { entries in
            entries.lazy.filter { $0.message == "Accepted a connection" }.count >= count
        }
    }

    /// Waits until the server has let go of `count` connections in all, or more, and the last of them left it
    /// holding `held` (nil: any number): its debug line "Released a connection", logged once a connection is closed
    /// and nothing holds it any more, with the count it still holds. A connection that outlives its peer never
    /// logs it, and the wait fails at its bound.
    func waitForReleased(_ count: Int, holding held: Int? = 0, timeout: Duration = .seconds(10)) async -> Bool {
        await log.waitForEntries(timeout: timeout) { entries in
            let released = entries.filter { $0.message == "Released a connection" }
            guard released.count >= count, let last = released.last else { return false }
            return held.map { last.metadata["authd.connections"] == "\($0)" } ?? true
        }
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
