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
        // Every connection of the test, each closed once it is done with: the setter's and the churn's.
        var opened = 1

        func churn(_ kind: Kind, _ count: Int) throws {
            for _ in 0..<count {
                let client = try FaultClient(path: daemon.socketPath)
                opened += 1
                defer { client.close() }
                try kind(client)
            }
        }
        /// Whether the daemon let go of every connection the test opened (its debug lines "Released a connection"),
        /// and holds none.
        func everyConnectionReleased() throws -> Bool {
            guard daemon.waitForReleasedConnections(opened) else {
                opened += 1  // the one that asks
                print("Churn: the daemon holds \(try Self.connectionsHeld(socket: daemon.socketPath) - 1) connections")
                return false
            }
            return true
        }
        for (_, kind) in Self.kinds { try churn(kind, Self.rounds) }
        #expect(try everyConnectionReleased())
        let before = try MemoryFigures(pid: pid)
        let heapBefore = try Self.heapKiB(pid)

        for (name, kind) in Self.kinds {
            try churn(kind, Self.rounds)
            #expect(try everyConnectionReleased(), "\(name): connections outlived their clients")
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

    /// The daemon's `com.exponea.Auth.connections` gauge, read over io.systemd.Metrics.List (the asking connection
    /// included): what a failed wait names.
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
