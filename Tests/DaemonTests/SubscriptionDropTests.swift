// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// A subscriber that stops reading is let go by its connection's bound, and the daemon goes on serving everyone
/// else: one stuck app must not hold the daemon's memory or its other apps.
@Suite("A subscriber that does not read", .offPool)
struct SubscriptionDropTests {
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
}
