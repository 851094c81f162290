// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Apps that open a connection per request, or C programs that run as one-shots, make the real daemon accept and
/// close connections without end: it must hold none of them once they are gone (issue 36), whatever each did.
@Suite("Fault: connections opened and closed without end", .offPool)
struct ConnectionChurnTests {
    /// Connections of each kind, after as many to warm up: a connection kept each time (about 800 bytes) would
    /// grow the daemon by megabytes.
    static let rounds = 3_000
    /// What the daemon's resident size may move by over all of them: pages the allocator takes once.
    static let marginKiB = 512
    /// What the main arena's heap (`[heap]`, where the loop allocates) may grow by: malloc moves its top in steps of
    /// 128 KiB (M_TOP_PAD), and a connection kept each time would grow it by megabytes.
    static let heapMarginKiB = 256

    typealias Kind = @Sendable (FaultClient) throws -> Void
    static let kinds: [(String, Kind)] = [
        ("connect, close", { _ in }),
        ("half a message", { try $0.sendRaw(Array(#"{"method":"com.exponea.Au"#.utf8)) }),
        ("GetToken", { try $0.call("GetToken", ["group": "shop"]) }),
        (
            "Subscribe",
            {
                try $0.send("Subscribe", ["group": "shop"], more: true)
                _ = try $0.reply()
            }
        ),
        ("ClaimRefresh", { try $0.call("ClaimRefresh", ["group": "shop", "generation": 1]) }),
    ]

    @Test func theDaemonHoldsNoConnectionOnceItsClientsAreGone() throws {
        let daemon = try DaemonUnderTest()
        let pid = try #require(daemon.pid)
        let setter = try FaultClient(path: daemon.socketPath)
        try setter.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        setter.close()

        func churn(_ kind: Kind, _ count: Int) throws {
            for _ in 0..<count {
                let client = try FaultClient(path: daemon.socketPath)
                defer { client.close() }
                try kind(client)
            }
        }
        for (_, kind) in Self.kinds { try churn(kind, Self.rounds) }
        #expect(try Self.waitUntilHeld(1, socket: daemon.socketPath))
        let before = try MemoryFigures(pid: pid)
        let heapBefore = try Self.heapKiB(pid)

        for (name, kind) in Self.kinds {
            try churn(kind, Self.rounds)
            // Only the connection that asks is held.
            #expect(try Self.waitUntilHeld(1, socket: daemon.socketPath), "\(name): connections outlived their clients")
        }
        let after = try MemoryFigures(pid: pid)
        let heapAfter = try Self.heapKiB(pid)
        print(
            "Churn: \(Self.kinds.count) x \(Self.rounds) connections, daemon \(before) before, \(after) after; "
                + "heap \(heapBefore) KiB before, \(heapAfter) KiB after")
        #expect(after.residentKiB - before.residentKiB <= Self.marginKiB)
        #expect(heapAfter - heapBefore <= Self.heapMarginKiB)
    }

    /// The size of the daemon's `[heap]` mapping (the main arena, grown with brk), in KiB.
    static func heapKiB(_ pid: Int32) throws -> Int {
        let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
        let line = try #require(maps.split(separator: "\n").first { $0.hasSuffix("[heap]") })
        let range = line.split(separator: " ")[0].split(separator: "-").compactMap { Int($0, radix: 16) }
        return (range[1] - range[0]) / 1024
    }

    /// Waits until the daemon's `connections` gauge (the connection objects it holds) reads `count`, the asking
    /// connection included. A peer's close reaches the daemon after the peer is gone, with no event a client can
    /// see: so this asks every 10 ms, for at most `timeout`.
    static func waitUntilHeld(_ count: Int, socket: String, timeout: Duration = .seconds(10)) throws -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            let held = try connectionsHeld(socket: socket)
            if held == count { return true }
            guard ContinuousClock.now < deadline else {
                print("Churn: the daemon holds \(held) connections, not \(count)")
                return false
            }
            usleep(10_000)
        }
    }

    /// The daemon's `com.exponea.Auth.connections` gauge, read over io.systemd.Metrics.List.
    static func connectionsHeld(socket: String) throws -> Int {
        let client = try FaultClient(path: socket)
        defer { client.close() }
        try client.send("io.systemd.Metrics.List", [:], more: true)
        var held: Int?
        while true {
            let reply = try client.reply()
            if reply.parameters["name"] as? String == "com.exponea.Auth.connections" {
                held = reply.parameters["value"] as? Int
            }
            if !reply.continues { break }
        }
        return try #require(held)
    }
}
