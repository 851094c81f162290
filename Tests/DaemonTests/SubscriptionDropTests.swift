// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import AuthDaemonCommand
import AuthProtocol
import AuthStore
import AuthTestKit
import Foundation
import Logging
import Testing

/// A subscriber that stops reading is let go, and the daemon goes on serving everyone else: one stuck app must
/// not hold the daemon's memory or its other apps.
@Suite("A subscriber that does not read", .offPool)
struct SubscriptionDropTests {
    /// The service's own bound: a subscription with 256 events unread is dropped, its stream ends after what it
    /// holds (nothing lost before the cut, nothing after it), and the group no longer counts it.
    @Test func theServiceDropsASubscriber256EventsBehind() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-drop")
        defer { directory.remove() }
        let store = try TokenStore(
            directory: directory.appending("state"), key: StoreKey(material: Array(repeating: 2, count: 32)),
            logger: Logger(label: "test"))
        let logs = LogCapture()
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: store, records: [], clock: ManualClock(Date(timeIntervalSince1970: 1_900_000_000)),
            storeWriters: StoreWriters.shared, executor: loop.executor, logger: logs.logger())
        let shop = try AppGroup("shop")
        let stuck = try #require(await service.subscribe(shop, pid: 42))
        let reading = Collector(try #require(await service.subscribe(shop, pid: 43)))
        let token = TestJWT().token(exp: 1_900_003_600)
        for _ in 0..<300 { _ = try await service.setToken(token, for: shop) }

        var received: [AuthEvent] = []
        for await event in stuck { received.append(event) }  // ends: the service let it go
        #expect(received.count == 256)
        #expect(received.first?.kind == .state)
        #expect(received.dropFirst().map(\.generation) == (1...255).map { UInt64($0) })
        #expect(await service.summaries().first?.subscribers == 1)
        #expect(logs.entries.contains { $0.message == "Dropping a subscriber that does not read its events" })
        // The other app heard every one.
        #expect(await reading.arrivals.waitFor(count: 301))
        #expect(reading.arrivals.all.last?.generation == 300)
    }

    /// Over a real socket the connection's own bound (its unsent output) comes first: the stuck app's
    /// connection is closed, what it was sent before arrives in order, and the others go on.
    @Test func theDaemonClosesAStuckSubscribersConnectionAndServesTheOthers() throws {
        let daemon = try DaemonUnderTest()
        let stuck = try VarlinkTestClient(path: daemon.socketPath)
        defer { stuck.close() }
        let app = try VarlinkTestClient(path: daemon.socketPath)
        defer { app.close() }
        try stuck.subscribe("shop")
        // Its first event, the state it starts with, comes once it is registered: no event is missed. Then it
        // reads no more until the daemon has let it go.
        var generations = [try stuck.event()["generation"] as? Int ?? -1]

        // Events pile up in the socket's buffer, then in the daemon's output for the connection, until the
        // daemon lets the subscriber go. Bounded, so a daemon that never does fails here instead of hanging.
        let token = TestJWT().token(expiringIn: 3600)
        var sets = 0
        while sets < 5000 {
            try app.call("SetToken", ["group": "shop", "token": token])
            sets += 1
            if sets % 25 == 0, Self.subscribers(app) == 0 { break }
        }
        #expect(Self.subscribers(app) == 0, "still subscribed after \(sets) events")

        // The stuck app reads at last: events in order up to the cut, then the end.
        var ended = false
        while !ended, generations.count <= sets + 1 {
            do {
                generations.append(try stuck.event()["generation"] as? Int ?? -1)
            } catch let failure as VarlinkTestClient.Failure {
                #expect(failure.name == "com.exponea.Auth.SubscriptionDropped")
                ended = true
            } catch {
                ended = true  // the connection was closed
            }
        }
        #expect(ended)
        #expect(generations.first == 0)  // the state it started with
        #expect(Array(generations.dropFirst()) == Array(1..<generations.count))
        #expect(generations.count < sets)
        #expect(daemon.output.contains("does not read"))

        // The others go on: a new subscription works.
        let again = try VarlinkTestClient(path: daemon.socketPath)
        defer { again.close() }
        try again.subscribe("shop")
        #expect(try again.event()["kind"] as? String == "state")
        #expect(try app.call("GetToken", ["group": "shop"])["generation"] as? Int == sets)
    }

    static func subscribers(_ client: VarlinkTestClient) -> Int? {
        let groups = (try? client.call("ListGroups"))?["groups"] as? [[String: Any]] ?? []
        return groups.first { $0["name"] as? String == "shop" }?["subscribers"] as? Int
    }

    /// Collects a stream's events as they arrive.
    final class Collector: Sendable {
        let arrivals = Arrivals<AuthEvent>()
        let task: Task<Void, Never>

        init(_ stream: AsyncStream<AuthEvent>) {
            let arrivals = self.arrivals
            task = Task { for await event in stream { arrivals.append(event) } }
        }

        deinit { task.cancel() }
    }
}
