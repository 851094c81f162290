// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Several apps of one group, as separate processes and connections, against the real daemon.
@Suite("exponea-authd: one group, many apps", .offPool)
struct DaemonGroupTests {
    static let subscriber = DaemonVarlinkTests.fixtures.appendingPathComponent("flush-subscriber.py").path

    @Test func clearWaitsForTheAppsThatAcknowledgeAndNotForeverForTheOneThatDoesNot() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start(arguments: ["--flush-timeout", "1.5"])
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        let client = try UnixClient(path: fixture.socketPath)
        defer { client.close() }
        let token = TestJWT().token(expiringIn: 3600)
        _ = try client.exchange(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#)

        let apps = try ["ack", "ack", "silent"].map { mode in
            try BackgroundProcess("/usr/bin/env", ["python3", Self.subscriber, fixture.socketPath, "shop", mode])
        }
        defer { for app in apps { app.stop() } }
        // Each prints "subscribed" once its subscription's first event, the group's state, arrived: registered.
        #expect(apps.allSatisfy { app in app.waitForOutput { $0.contains("subscribed") } })

        let reply = try client.exchange(#"{"method":"com.exponea.Auth.Anonymize","parameters":{"group":"shop"}}"#)
        // The silent app is named: a flush nobody confirmed is no success.
        let result = try JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any]
        let parameters = result?["parameters"] as? [String: Any]
        #expect(parameters?["asked"] as? Int == 3)
        let unconfirmed = parameters?["unconfirmed"] as? [[String: Any]] ?? []
        #expect(unconfirmed.count == 1)
        #expect(unconfirmed.first?["pid"] as? Int == Int(apps[2].pid))
        #expect(unconfirmed.first?["reason"] as? String == "timedOut")

        for app in apps {
            #expect(app.waitForOutput { $0.contains("cleared") })
            #expect(app.output.split(separator: "\n") == ["subscribed", "state", "flushRequested", "cleared"])
        }
        #expect(
            try client.exchange(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#)
                == #"{"parameters":{"generation":2}}"#)
        #expect(!FileManager.default.fileExists(atPath: fixture.stateDirectory + "/shop.token"))
    }

    @Test func ofTwentyConcurrentClaimsExactlyOneIsGranted() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)

        let clients = try (0..<20).map { _ in try UnixClient(path: fixture.socketPath) }
        defer { for client in clients { client.close() } }
        let replies = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: clients.count) { index in
            let reply =
                (try? clients[index].exchange(
                    #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"shop","generation":0}}"#))
                ?? "failed"
            replies.withLock { $0.append(reply) }
        }
        let all = replies.withLock { $0 }
        #expect(all.count == 20)
        #expect(all.filter { $0 == #"{"parameters":{"granted":true,"leaseMs":5000}}"# }.count == 1)
        #expect(all.filter { $0 == #"{"parameters":{"granted":false}}"# }.count == 19)
    }

    @Test func waitForTokenReturnsAsSoonAsAnotherAppSetsOne() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        let waiter = try UnixClient(path: fixture.socketPath)
        let setter = try UnixClient(path: fixture.socketPath)
        defer {
            waiter.close()
            setter.close()
        }
        try waiter.send(
            #"{"method":"com.exponea.Auth.WaitForToken","parameters":{"group":"shop","after":0,"timeoutMs":5000}}"#)
        // The waiting call makes its group known, in the turn in which it starts to wait: the daemon's STATUS=
        // line, sent to the test's notification socket, counts the group.
        #expect(fixture.notify.receive(containing: "Holding 1 app group (0 with a token)") != nil)
        let token = TestJWT().token(expiringIn: 3600)
        _ = try setter.exchange(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)"}}"#)
        let reply = try waiter.receiveReply()
        #expect(reply == #"{"parameters":{"generation":1,"token":"\#(token)"}}"#)
    }
}
