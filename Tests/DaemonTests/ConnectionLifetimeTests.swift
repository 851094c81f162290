// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import AuthTestKit
import AuthTransport
import Foundation
import Logging
import Synchronization
import Systemd
import Testing

@testable import AuthDaemon

/// Nothing a connection makes outlives it (issue 36): the daemon's handler (com.exponea.Auth and
/// io.systemd.Metrics over org.varlink.service) served by a `VarlinkServer` on a loop with its executor, as in the
/// daemon, and clients that open and close connections of every kind. Once they are gone the server holds no
/// connection object, the service's clock no timer (a claim's lease, a wait's bound, a flush's bound), the group no
/// subscription and no claim.
@Suite("What a connection makes dies with it")
struct ConnectionLifetimeTests {
    final class Fixture: Sendable {
        let directory: TemporaryDirectory
        let loop: TestLoop
        let clock = ManualClock(Date())
        let service: AuthService
        let counters: LoopBound<ConnectionCounters>
        let server: LoopBound<VarlinkServer>
        let path: String
        /// The refusals and closings of a thousand connections are not the test's output.
        static let quiet = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        /// What the server logs, in memory: among it, a debug line for each connection it lets go of.
        let serverLog = LogCapture()
        /// The connections the test has opened so far, each of which it closes.
        let opened = Atomic<Int>(0)

        init() async throws {
            let loop = try TestLoop()
            self.loop = loop
            let counters = LoopBound(handingOver: ConnectionCounters(), to: loop.executor)
            self.counters = counters
            directory = try TemporaryDirectory(prefix: "authd-lifetime")
            path = directory.appending("io.socket")
            let store = try TokenStore(
                directory: directory.appending("state"), key: StoreKey(material: Array(repeating: 7, count: 32)),
                logger: Self.quiet)
            let service = AuthService(
                store: store, records: [], clock: clock, storeWriters: StoreWriters.shared, executor: loop.executor,
                logger: Self.quiet)
            self.service = service
            let access = AccessControl(owner: getuid())
            let dispatcher = AuthCallDispatcher(service: service, access: access, logger: Self.quiet)
            let handler = VarlinkServiceHandler(
                vendor: "test", product: "test", version: "0", url: "",
                interfaces: [
                    (
                        AuthInterface.name, AuthInterface.description, dispatcher
                    ),
                    (
                        MetricsInterface.name, MetricsInterface.description,
                        MetricsCallHandler(
                            service: service, dispatcher: dispatcher, connections: counters,
                            lifetime: LoopBound(
                                handingOver: DaemonLifetime(version: "0", started: .now), to: loop.executor))
                    ),
                ])
            var configuration = VarlinkServer.Configuration(listen: .path(path, mode: 0o600))
            configuration.counters = counters
            server = try await loop.run { [configuration, serverLog] mainLoop in
                let server = VarlinkServer(
                    configuration: configuration, handler: handler, loop: mainLoop, executor: loop.executor,
                    logger: serverLog.logger())
                try server.start()
                return LoopBound(server, executor: loop.executor)
            }
        }

        func stop() async throws {
            try await loop.run { [server] _ in server.value.stop() }
            loop.stop()
            directory.remove()
        }

        func client() throws -> UnixClient {
            let client = try UnixClient(path: path)
            opened.add(1, ordering: .relaxed)
            return client
        }

        /// Waits until the server has let go of every connection the test opened, all closed by now, and holds
        /// none: its debug line "Released a connection", logged once a connection is closed and nothing holds it any
        /// more (its last task ended), names the count it still holds. A connection kept after its client left
        /// never logs it, and the wait fails at its bound.
        func waitUntilAllReleased(timeout: Duration = .seconds(20)) async -> Bool {
            let count = opened.load(ordering: .relaxed)
            return await serverLog.waitForEntries(timeout: timeout) { entries in
                let released = entries.filter { $0.message == "Released a connection" }
                return released.count >= count && released.last?.metadata["authd.connections"] == "0"
            }
        }
    }

    static let group = "shop"
    static func call(_ method: String, _ parameters: String, more: Bool = false) -> String {
        #"{"method":"\#(method)","parameters":\#(parameters)\#(more ? #","more":true"# : "")}"#
    }

    /// How many connections of each kind: enough that one kept each time stands out.
    static let rounds = 200

    @Test func everyKindOfConnectionIsReleasedWithAllItMade() async throws {
        let fixture = try await Fixture()
        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "alice"])
        let group = Self.group
        let set = try await offPool {
            let client = try fixture.client()
            defer { client.close() }
            return try client.exchange(
                Self.call("com.exponea.Auth.SetToken", #"{"group":"\#(group)","token":"\#(token)"}"#))
        }
        #expect(set.contains(#""generation":1"#))

        typealias Kind = @Sendable (UnixClient) throws -> Void
        let kinds: [(String, Kind)] = [
            ("connect, close", { _ in }),
            ("half a message", { try $0.send(#"{"method":"com.exponea.Au"#, terminated: false) }),
            (
                "GetToken",
                { _ = try $0.exchange(Self.call("com.exponea.Auth.GetToken", #"{"group":"\#(group)"}"#)) }
            ),
            (
                "Subscribe",
                { _ = try $0.exchange(Self.call("com.exponea.Auth.Subscribe", #"{"group":"\#(group)"}"#, more: true)) }
            ),
            (
                "ClaimRefresh",
                {
                    // Granted, or refused while the connection before (which held the claim) is not yet seen
                    // closed: its hang-up may reach the daemon after this call.
                    _ = try $0.exchange(
                        Self.call("com.exponea.Auth.ClaimRefresh", #"{"group":"\#(group)","generation":1}"#))
                }
            ),
            (
                "metrics List",
                { _ = try $0.exchange(Self.call("io.systemd.Metrics.List", "{}", more: true)) }
            ),
        ]
        for (name, kind) in kinds {
            try await offPool {
                for _ in 0..<Self.rounds {
                    let client = try fixture.client()
                    defer { client.close() }
                    try kind(client)
                }
            }
            #expect(await fixture.waitUntilAllReleased(), "\(name): connections outlived their clients")
        }

        // WaitForToken: each waits until its bound is armed (the call is in the service), then its caller leaves.
        let armedBefore = fixture.clock.armedCount
        for round in 1...Self.rounds {
            let client = try fixture.client()
            try client.send(
                Self.call(
                    "com.exponea.Auth.WaitForToken", #"{"group":"\#(group)","after":1,"timeoutMs":5000}"#))
            #expect(await fixture.clock.waitForTimers(armed: armedBefore + round))
            client.close()
        }
        #expect(await fixture.waitUntilAllReleased(), "WaitForToken: connections outlived their clients")

        // A clear whose caller leaves while the group's app has not acknowledged its flush; then the app leaves.
        let app = try fixture.client()
        _ = try await offPool {
            try app.exchange(Self.call("com.exponea.Auth.Subscribe", #"{"group":"\#(group)"}"#, more: true))
        }
        let clearer = try fixture.client()
        try clearer.send(Self.call("com.exponea.Auth.Anonymize", #"{"group":"\#(group)"}"#))
        let flushRequest = try await offPool { try app.receiveReply() }
        #expect(flushRequest.contains("flushRequested"))
        clearer.close()
        app.close()
        #expect(await fixture.waitUntilAllReleased(), "the clear's connections outlived their clients")

        // What the service held for those connections is gone too: no timer armed, no subscription, no claim
        // (another holder is granted the refresh at once).
        #expect(fixture.clock.pendingCount == 0, "a lease, a wait's bound or a flush's bound outlived its call")
        #expect(await fixture.service.summaries().allSatisfy { $0.subscribers == 0 })
        let shop = try AppGroup(group)
        #expect(await fixture.service.claimRefresh(shop, generation: await fixture.service.token(for: shop).generation))
        try await fixture.stop()
    }
}
