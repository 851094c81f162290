// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// SIGKILL in the middle of a storm of SetToken calls: what the daemon acknowledged is never lost, nothing is
/// torn, and the expiry timers of the tokens it had are armed again when it starts.
@Suite("Fault: SIGKILL during 10,000 SetToken calls", .offPool)
struct KillDuringWritesTests {
    static let groups = 100
    static let setsPerGroup = 100  // 10,000 calls in all
    static let connections = 4
    /// Calls a connection sends before it waits for the first reply, so some are in flight at the kill.
    static let window = 8

    /// What one connection sent and had acknowledged, per group: the highest k of `token(group, k)`.
    final class Progress: @unchecked Sendable {
        // @unchecked: guarded by `lock`, which each acknowledgement signals.
        private let lock = NSCondition()
        private var sent = [Int](repeating: 0, count: KillDuringWritesTests.groups)
        private var acknowledged = [Int](repeating: 0, count: KillDuringWritesTests.groups)
        private var acknowledgedCount = 0
        private var problems: [String] = []

        func didSend(_ group: Int, _ k: Int) { lock.withLock { sent[group] = k } }

        func didAcknowledge(_ group: Int, _ k: Int) {
            lock.withLock {
                acknowledged[group] = k
                acknowledgedCount += 1
                lock.broadcast()
            }
        }

        func problem(_ text: String) { lock.withLock { problems.append(text) } }

        /// Waits until at least `count` calls are acknowledged and every group in `groups` has had one, checking
        /// at each acknowledgement (no polling), or until `deadline`: whether they are.
        func waitForAcknowledged(_ count: Int, each groups: Range<Int>, by deadline: Date) -> Bool {
            lock.withLock {
                func reached() -> Bool { acknowledgedCount >= count && acknowledged[groups].allSatisfy { $0 > 0 } }
                while !reached() {
                    guard lock.wait(until: deadline) else { return reached() }
                }
                return true
            }
        }

        var snapshot: (sent: [Int], acknowledged: [Int], problems: [String]) {
            lock.withLock { (sent, acknowledged, problems) }
        }
    }

    @Test func everyGroupKeepsItsLastAcknowledgedTokenOrALaterOneAndItsTimersAreArmedAgain() throws {
        let daemon = try DaemonUnderTest()
        let jwt = TestJWT()
        let started = Date()
        // The kill comes once the writes have gone far enough to tell anything (every group with a timer to watch
        // holds a token, a hundred calls acknowledged), and then once half the calls are acknowledged or 4 s have
        // passed; on a loaded machine that can take longer, so it waits for that progress until `killBy`. The
        // timers that must fire after the restart are due at `dueAt`, late enough for a slow restart and
        // subscription after a kill at `killBy`.
        let killAt = started.addingTimeInterval(4)
        let killBy = started.addingTimeInterval(15)
        let dueAt = (killBy.timeIntervalSince1970 + 10).rounded(.up)
        // Groups 0-9 expire at dueAt (their "expired" timer fires after the restart); groups 10-19 enter their
        // last minute at dueAt ("expiredSoon"); the others stay valid. The k-th token of a group says k in its
        // claims, so what the store holds can be told apart; k = 0 stands for no token.
        func expiry(_ group: Int) -> Double {
            switch group {
            case 0..<10: dueAt
            case 10..<20: dueAt + 60
            default: dueAt + 3600
            }
        }
        let tokens = (0..<Self.groups).map { group in
            [""]
                + (1...Self.setsPerGroup).map { k in
                    jwt.token(exp: expiry(group), ids: ["registered": "customer-\(group)", "k": "\(k)"])
                }
        }

        let progress = Progress()
        let socketPath = daemon.socketPath
        let writers = Thread.detachedGroup(Self.connections) { connection in
            Self.write(tokens, on: connection, to: socketPath, progress: progress)
        }
        // In the middle: once half the calls are acknowledged if the machine is fast, at killAt otherwise, but not
        // before the groups with timers hold a token and there are enough calls to tell anything.
        let midway =
            progress.waitForAcknowledged(Self.groups * Self.setsPerGroup / 2, each: 0..<20, by: killAt)
            || progress.waitForAcknowledged(Self.groups, each: 0..<20, by: killBy)
        let killedAt = Date()
        daemon.stop(signal: SIGKILL)
        writers.wait()
        let (sent, acknowledged, problems) = progress.snapshot
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        let acknowledgedTotal = acknowledged.reduce(0, +)
        let sentTotal = sent.reduce(0, +)
        print(
            """
            KillDuringWrites: killed after \(String(format: "%.1f", killedAt.timeIntervalSince(started))) s \
            (\(midway ? "enough acknowledged" : "at the time limit, too few acknowledged")): \(acknowledgedTotal) SetToken calls \
            acknowledged, \(sentTotal - acknowledgedTotal) in flight, of \(Self.groups * Self.setsPerGroup)
            """)
        #expect(acknowledgedTotal >= Self.groups, "too few calls before the kill to tell anything")
        #expect(acknowledged[0..<20].allSatisfy { $0 > 0 }, "groups 0-19 must hold a token for their timers")
        #expect(acknowledgedTotal < Self.groups * Self.setsPerGroup, "the kill came after the last call")
        #expect(sentTotal > acknowledgedTotal, "no call was in flight at the kill")

        try daemon.start()
        let restartedAt = Date()
        #expect(
            restartedAt.timeIntervalSince1970 < dueAt - 1,
            "the restart took too long to watch the timers fire afterwards")

        // Subscribe before the deadlines: groups 0-19 must get their events from the re-armed timers, 20-24 none.
        let watched = Array(0..<25)
        let subscriptions = try watched.map { group in
            let client = try FaultClient(path: socketPath, receiveTimeout: .seconds(30))
            try client.send("Subscribe", ["group": "g\(group)"], more: true)
            return client
        }
        defer { for client in subscriptions { client.close() } }

        // Every group's token is one that was sent, no older than the last acknowledged, whole and signed.
        let client = try FaultClient(path: socketPath)
        defer { client.close() }
        var held = [Int](repeating: 0, count: Self.groups)
        for group in 0..<Self.groups {
            let reply = try client.call("GetToken", ["group": "g\(group)"])
            let token = reply["token"] as? String ?? ""
            let k = tokens[group].firstIndex(of: token)
            #expect(k != nil, "group \(group) holds a token that was never sent: \(token.prefix(40))…")
            guard let k else { continue }
            held[group] = k
            #expect(
                (acknowledged[group]...max(sent[group], acknowledged[group])).contains(k),
                "group \(group) holds token \(k); acknowledged \(acknowledged[group]), sent \(sent[group])")
            #expect(reply["generation"] as? Int == k, "group \(group): generation and token disagree")
            #expect(k == 0 || jwt.verifies(token))
        }
        let holding = (0..<Self.groups).filter { held[$0] > 0 }
        let listed = try client.call("ListGroups")["groups"] as? [[String: Any]] ?? []
        let listedWithToken = listed.filter { $0["hasToken"] as? Bool == true }.compactMap { $0["name"] as? String }
        #expect(listedWithToken.sorted() == holding.map { "g\($0)" }.sorted())
        // Nothing set aside as corrupt, no temporary file left: one record per group that holds a token.
        // (Beside the lock file the running daemon holds.)
        let files = try FileManager.default.contentsOfDirectory(atPath: daemon.stateDirectory)
            .filter { $0 != "daemon.lock" }
        #expect(files.sorted() == holding.map { "g\($0).token" }.sorted())

        // The timers of the loaded tokens fire at their deadlines.
        let events = Locked<[Int: [(reason: String, at: Date)]]>([:])
        onThreads(watched.count) { index in
            let client = subscriptions[index]
            let until = Date(timeIntervalSince1970: dueAt + 2)
            while Date() < until {
                guard let reply = try? client.reply(timeout: .seconds(until.timeIntervalSinceNow)) else { return }
                let event = reply.parameters["event"] as? [String: Any] ?? [:]
                guard event["kind"] as? String == "jwtError", let reason = event["reason"] as? String else { continue }
                events.withLock { $0[watched[index], default: []].append((reason, Date())) }
                if index < 20 && reason == (index < 10 ? "expired" : "expiredSoon") { return }
            }
        }
        let seen = events.withLock { $0 }
        for group in 0..<10 where held[group] > 0 {
            let expired = seen[group]?.first { $0.reason == "expired" }
            #expect(expired != nil, "group \(group) got no expired event after the restart: \(seen[group] ?? [])")
            if let expired { #expect(expired.at.timeIntervalSince1970 >= dueAt - 0.05, "group \(group) fired early") }
        }
        for group in 10..<20 where held[group] > 0 {
            let soon = seen[group]?.first { $0.reason == "expiredSoon" }
            #expect(soon != nil, "group \(group) got no expiredSoon event after the restart: \(seen[group] ?? [])")
            if let soon { #expect(soon.at.timeIntervalSince1970 >= dueAt - 0.05, "group \(group) fired early") }
        }
        for group in 20..<25 { #expect(seen[group] == nil, "group \(group) has a valid token: \(seen[group] ?? [])") }
    }

    /// One connection's share: the groups `g` with `g % connections == connection`, each set to k = 1, 2, …
    /// in turn, `window` calls in flight; stops at the first error (the kill).
    static func write(_ tokens: [[String]], on connection: Int, to socketPath: String, progress: Progress) {
        guard let client = try? FaultClient(path: socketPath) else {
            progress.problem("connection \(connection) could not connect")
            return
        }
        defer { client.close() }
        let mine = Array(stride(from: connection, to: groups, by: connections))
        var calls: [(group: Int, k: Int)] = []
        for k in 1...setsPerGroup { calls += mine.map { ($0, k) } }
        var next = 0
        var inFlight: [(group: Int, k: Int)] = []
        while next < calls.count || !inFlight.isEmpty {
            while next < calls.count && inFlight.count < window {
                let (group, k) = calls[next]
                progress.didSend(group, k)
                let message = FaultClient.encode("SetToken", ["group": "g\(group)", "token": tokens[group][k]])
                guard (try? client.sendRaw(message)) != nil else { return }
                inFlight.append(calls[next])
                next += 1
            }
            guard let reply = try? client.reply() else { return }
            let (group, k) = inFlight.removeFirst()
            guard reply.error == nil, reply.parameters["generation"] as? Int == k else {
                progress.problem("g\(group) k \(k): \(reply.text.prefix(200))")
                return
            }
            progress.didAcknowledge(group, k)
        }
    }
}
