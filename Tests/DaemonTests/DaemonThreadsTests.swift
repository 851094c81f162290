// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The daemon runs on one thread, its loop, with the store's writers beside it while it writes: no job of it
/// reaches Swift's global executor, which would start libdispatch's threads. Every path that starts a task or
/// resumes one is taken (a store write's completion, a timer's action, a cancelled wait, a subscription's end, a
/// claim's lease, a flush's bound, the expiry timer), then the threads are listed.
@Suite("exponea-authd: the loop and the store's writers, no other thread", .offPool)
struct DaemonThreadsTests {
    @Test func everyPathRunsOnTheLoop() throws {
        let daemon = try DaemonUnderTest(arguments: ["--flush-timeout", "0.1", "--refresh-lease", "0.1"])
        let pid = try #require(daemon.pid)
        let app = try VarlinkTestClient(path: daemon.socketPath)
        defer { app.close() }
        let watcher = try VarlinkTestClient(path: daemon.socketPath)
        defer { watcher.close() }
        let calls = try VarlinkTestClient(path: daemon.socketPath)
        defer { calls.close() }

        try app.subscribe("shop")
        #expect(try app.event()["kind"] as? String == "state")
        try watcher.subscribe("news")
        #expect(try watcher.event()["kind"] as? String == "state")
        // Expiring in 60 to 61 s: the expiry timer fires expiredSoon within a second (R13).
        let token = TestJWT().token(exp: (Date().timeIntervalSince1970 + 61).rounded(.down))
        try calls.call("SetToken", ["group": "shop", "token": token])
        #expect(try app.event()["kind"] as? String == "tokenRefreshed")
        #expect(try app.event()["reason"] as? String == "expiredSoon")
        // A claim whose lease lapses: the pending jwtError goes out again (R28).
        #expect(try calls.call("ClaimRefresh", ["group": "shop", "generation": 1])["granted"] as? Bool == true)
        #expect(try app.event()["kind"] as? String == "jwtError")
        // A wait whose bound ends it.
        try calls.call("WaitForToken", ["group": "shop", "after": 1, "timeoutMs": 50])
        for method in ["GetToken", "Preflight", "ListGroups", "CountGroups"] {
            try calls.call(method, method.hasSuffix("Groups") ? [:] : ["group": "shop"])
        }
        try calls.call("ReportAuthFailure", ["group": "shop", "status": 401, "generation": 1])
        // A subscription whose app leaves; a claim, and a wait, whose caller leaves.
        let subscriber = try VarlinkTestClient(path: daemon.socketPath)
        try subscriber.subscribe("shop")
        _ = try subscriber.event()
        subscriber.close()
        let leaving = try VarlinkTestClient(path: daemon.socketPath)
        try leaving.call("Preflight", ["group": "news"])
        #expect(try watcher.event()["reason"] as? String == "notProvided")
        #expect(try leaving.call("ClaimRefresh", ["group": "news", "generation": 0])["granted"] as? Bool == true)
        try leaving.send("WaitForToken", ["group": "shop", "after": 1, "timeoutMs": 5000])
        leaving.close()
        // The claim ended with the connection, once its wait was cancelled: the jwtError goes out again.
        #expect(try watcher.event()["reason"] as? String == "notProvided")
        // A clear whose app never acknowledges: its flush's bound ends it.
        try calls.call("Anonymize", ["group": "shop"])
        try calls.call("IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "bob"], "token": token])

        let threads = Self.threads(of: pid)
        let others = threads.filter { $0.tid != pid && $0.name != "store-writer" }
        #expect(others.isEmpty, "threads besides the loop and the store's writers: \(others)")
        #expect(threads.contains { $0.tid == pid })
    }

    /// Each thread of `pid`: its id and its name (`comm`).
    static func threads(of pid: Int32) -> [(tid: Int32, name: String)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            guard let tid = Int32(task),
                let name = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8)
            else { return nil }
            return (tid, name.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
