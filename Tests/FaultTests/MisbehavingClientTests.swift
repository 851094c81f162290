// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Clients that break the rules: the daemon survives each, keeps answering the others, and holds on to no
/// descriptor or memory once they are gone.
@Suite("Fault: misbehaving clients", .offPool)
struct MisbehavingClientTests {
    /// A daemon with a token for "shop", its figures once warmed up, and a well-behaved client.
    final class Session {
        let daemon: DaemonUnderTest
        let pid: Int32
        let token = TestJWT().token(expiringIn: 3600)
        let baseline: ProcessFigures
        /// The connections the session opened itself (the warm-up's, each ``expectAnswersOthers()``'s), all closed.
        private var opened = 1

        init() throws {
            let daemon = try DaemonUnderTest()
            self.daemon = daemon
            pid = try #require(daemon.pid)
            let client = try FaultClient(path: daemon.socketPath)
            try client.call("SetToken", ["group": "shop", "token": token])
            // Warm up what the daemon creates once (event loop threads, the first task).
            for _ in 0..<20 { try client.call("GetToken", ["group": "shop"]) }
            client.close()
            #expect(daemon.waitForOutput { $0.contains("Token set") })
            // What the daemon frees after the calls (the closed connection, its ended task) is not in the baseline:
            // its "Released a connection" comes once both are gone.
            #expect(daemon.waitForReleasedConnections(1))
            baseline = try ProcessFigures(pid: pid)
        }

        deinit { daemon.stop() }

        /// A fresh client gets the token promptly.
        func expectAnswersOthers(_ comment: Comment? = nil) {
            opened += 1
            let client = try? FaultClient(path: daemon.socketPath, receiveTimeout: .seconds(10))
            defer { client?.close() }
            let reply = try? client?.call("GetToken", ["group": "shop"])
            #expect(reply?["token"] as? String == token, comment)
            #expect(kill(pid, 0) == 0, "the daemon died")
        }

        /// Once the test's `connections` and the session's are closed: the daemon let go of every one (its
        /// "Released a connection" lines, the last naming none held), is back to its baseline descriptors (it
        /// closed each before), and within `marginKiB` of its baseline memory.
        func expectNoLeak(marginKiB: Int, _ what: String, connections: Int) throws {
            #expect(
                daemon.waitForReleasedConnections(opened + connections, timeout: .seconds(30)),
                "\(what): connections outlived their clients")
            let descriptors = ProcessFigures.descriptors(of: pid)
            #expect(descriptors <= baseline.descriptors, "\(what): \(descriptors) fds, \(baseline.descriptors) before")
            let after = try ProcessFigures(pid: pid)
            print("MisbehavingClients, \(what): daemon \(self.baseline) before, \(after) after")
            #expect(
                after.residentKiB - self.baseline.residentKiB < marginKiB,
                "\(what): RSS grew from \(self.baseline.residentKiB) to \(after.residentKiB) KiB")
        }
    }

    @Test func aSubscriberThatNeverReadsIsClosedAtTheHighWaterMarkAndTheOthersGoOn() throws {
        let session = try Session()
        let path = session.daemon.socketPath
        let stalled = try FaultClient(path: path)
        try stalled.send("Subscribe", ["group": "storm"], more: true)
        let reader = try FaultClient(path: path, receiveTimeout: .seconds(30))
        try reader.send("Subscribe", ["group": "storm"], more: true)
        let control = try FaultClient(path: path)
        defer { control.close() }
        func subscribers() throws -> Int {
            let groups = try control.call("ListGroups")["groups"] as? [[String: Any]] ?? []
            return groups.first { $0["name"] as? String == "storm" }?["subscribers"] as? Int ?? -1
        }
        #expect(session.daemon.waitForSubscribers("storm", count: 2))

        // Big events: each jwtError names the customer, here 32 ids of 1 KiB.
        let ids = Dictionary(
            uniqueKeysWithValues: (0..<32).map {
                ("id-\($0)-" + String(repeating: "k", count: 500), String(repeating: "v", count: 500))
            })
        let received = Tally()
        let readerDone = Thread.detachedGroup(1) { _ in
            while let reply = try? reader.reply(), reply.error == nil {
                let event = reply.parameters["event"] as? [String: Any]
                if event?["kind"] as? String == "jwtError" { received.increment() }
            }
        }
        let producer = try FaultClient(path: path)
        defer { producer.close() }
        var produced = 0
        var stalledDropped = false
        while produced < 400 && !stalledDropped {
            try producer.call("IdentifyCustomer", ["group": "storm", "customerIds": ids])
            #expect(try producer.call("Preflight", ["group": "storm"])["reason"] as? String == "notProvided")
            produced += 1
            if produced % 10 == 0 { stalledDropped = try subscribers() == 1 }
        }
        print("MisbehavingClients, stalled subscriber: dropped after \(produced) events of about 33 KiB")
        #expect(stalledDropped, "the subscriber that does not read was still subscribed after \(produced) events")
        #expect(session.daemon.waitForOutput { $0.contains("Closing a connection that does not read its replies") })
        #expect(stalled.closedByPeer(within: .seconds(10)))
        stalled.close()

        // The reader got every event, and the daemon still answers.
        #expect(
            received.wait(until: produced, timeout: .seconds(20)),
            "the reading subscriber got \(received.count) of \(produced) events")
        session.expectAnswersOthers()
        try control.call("SetToken", ["group": "storm", "token": session.token])
        reader.shutDown()
        readerDone.wait()
        reader.close()
        control.close()
        producer.close()
        // The stalled subscriber, the reader, the control and the producer.
        try session.expectNoLeak(marginKiB: 16 * 1024, "stalled subscriber", connections: 4)
    }

    @Test func clientsThatSendHalfAMessageAndHangHoldNothingOnceGone() throws {
        let session = try Session()
        let path = session.daemon.socketPath
        // 100 clients each send 60 KiB of a GetToken call (under the 64 KiB bound) without its NUL, and hang.
        let head = Array(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"},"padding":""#.utf8)
        let partial = head + [UInt8](repeating: UInt8(ascii: "x"), count: 60 * 1024 - head.count)
        let hanging = try (0..<100).map { _ in
            let client = try FaultClient(path: path, receiveTimeout: .seconds(10))
            try client.sendRaw(partial)
            return client
        }
        defer { for client in hanging { client.close() } }
        let pid = session.pid
        // The session's client, then the hanging ones: the daemon holds each once it has logged its "Accepted".
        #expect(session.daemon.waitForAcceptedConnections(1 + hanging.count))
        // The daemon holds every half message: it has read all that was sent. Polled: the kernel's count of unread
        // bytes has no event.
        #expect(BackgroundProcess.waitUntil(timeout: .seconds(20)) { hanging.allSatisfy { $0.unreadByPeer == 0 } })
        session.expectAnswersOthers("while 100 clients hang in the middle of a message")
        let holding = try ProcessFigures(pid: pid)
        print("MisbehavingClients, 100 half messages of 60 KiB: daemon \(holding)")
        // Each holds its 60 KiB and little more.
        #expect(holding.residentKiB - session.baseline.residentKiB < 100 * 60 + 32 * 1024)
        // None was closed (they are under the bound), and one that finishes its message gets its reply.
        #expect(!hanging[0].closedByPeer(within: .milliseconds(100)))
        try hanging[0].sendRaw(Array(#""}"#.utf8) + [0])
        #expect(try hanging[0].reply().parameters["token"] as? String == session.token)

        for client in hanging { client.close() }
        try session.expectNoLeak(marginKiB: 16 * 1024, "half messages", connections: hanging.count)
    }

    @Test func tenMebibytesWithoutANulAreCutOffAtTheMessageBound() throws {
        let session = try Session()
        let path = session.daemon.socketPath
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 64 * 1024)
        for attempt in 1...5 {
            let client = try FaultClient(path: path)
            defer { client.close() }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(client.descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var written = 0
            var failure: (any Error)?
            while written < 10 * 1024 * 1024 {
                do {
                    try client.sendRaw(chunk)
                    written += chunk.count
                } catch {
                    failure = error
                    break
                }
            }
            let code = (failure as? POSIXError)?.code
            #expect(code == .EPIPE || code == .ECONNRESET, "attempt \(attempt): \(String(describing: failure))")
            // The daemon read 64 KiB and closed; what else was written sat in the socket buffers.
            #expect(written < 2 * 1024 * 1024, "attempt \(attempt): wrote \(written) bytes before the close")
            if attempt == 1 { print("MisbehavingClients, 10 MiB without a NUL: closed after \(written) bytes written") }
        }
        #expect(session.daemon.waitForOutput { $0.contains("a message is longer than 65536 bytes") })
        session.expectAnswersOthers()
        try session.expectNoLeak(marginKiB: 8 * 1024, "10 MiB messages", connections: 5)  // the five attempts
    }

    @Test func tenThousandConnectAndCloseCyclesLeaveNothingBehind() throws {
        let session = try Session()
        let path = session.daemon.socketPath
        let call = FaultClient.encode("GetToken", ["group": "shop"])
        let failures = Locked(0)
        let started = ContinuousClock.now
        // Four threads of 2,500 each; every 50th sends a call and closes without reading the reply.
        onThreads(4) { thread in
            for cycle in 0..<2500 {
                guard let client = try? FaultClient(path: path) else {
                    failures.withLock { $0 += 1 }
                    continue
                }
                if cycle % 50 == 0 { try? client.sendRaw(call) }
                client.close()
            }
        }
        let elapsed = ContinuousClock.now - started
        print("MisbehavingClients, 10,000 connect-and-close cycles in \(elapsed)")
        #expect(failures.withLock { $0 } == 0, "connections refused")
        session.expectAnswersOthers()
        try session.expectNoLeak(
            marginKiB: 16 * 1024, "10,000 connect and close", connections: 10_000 - failures.withLock { $0 })
    }
}
