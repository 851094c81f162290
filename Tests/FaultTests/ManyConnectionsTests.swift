// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// 1,000 clients that connect and do nothing, beside 100 that call all the time: the idle ones cost a bounded
/// amount of memory and do not slow the busy ones down.
@Suite("Fault: 1,000 idle connections beside 100 busy clients", .offPool)
struct ManyConnectionsTests {
    static let idle = 1000
    static let busy = 100

    @Test(.enabled(if: raiseOpenFileLimit() >= 1500, "needs an open file limit of 1,500 for 1,100 clients"))
    func idleConnectionsCostBoundedMemoryAndDoNotSlowTheBusyOnes() throws {
        let daemon = try DaemonUnderTest()
        defer { daemon.stop() }
        let pid = try #require(daemon.pid)
        let token = TestJWT().token(expiringIn: 3600)
        let setter = try FaultClient(path: daemon.socketPath)
        try setter.call("SetToken", ["group": "shop", "token": token])
        setter.close()

        let busy = try (0..<Self.busy).map { _ in try FaultClient(path: daemon.socketPath) }
        defer { for client in busy { client.close() } }
        _ = try Self.getTokens(on: busy, rounds: 5, expecting: token)  // warm-up
        let alone = try Self.getTokens(on: busy, rounds: 30, expecting: token)
        let before = try ProcessFigures(pid: pid)

        let idle = try (0..<Self.idle).map { _ in try FaultClient(path: daemon.socketPath) }
        defer { for client in idle { client.close() } }
        // The daemon has accepted them all (the setter's, the busy ones' and the idle ones') when it has logged
        // "Accepted a connection" for each: it holds a descriptor for each.
        #expect(
            daemon.waitForAcceptedConnections(1 + Self.busy + Self.idle, timeout: .seconds(30)),
            "the daemon did not accept \(Self.idle) more connections: \(ProcessFigures.descriptors(of: pid)) fds")
        let crowded = try Self.getTokens(on: busy, rounds: 30, expecting: token)
        let after = try ProcessFigures(pid: pid)

        // None of the idle connections was refused or closed.
        let open = idle.filter { client in
            var poller = pollfd(fd: client.descriptor, events: Int16(POLLIN), revents: 0)
            return poll(&poller, 1, 0) == 0
        }
        #expect(open.count == Self.idle, "\(Self.idle - open.count) idle connections were closed")
        let refused = daemon.output.split(separator: "\n").filter { $0.contains("Refusing a connection") }
        #expect(refused.isEmpty, "\(refused.count) connections refused: \(refused.first ?? "")")

        let p99Alone = quantile(0.99, of: alone)
        let p99Crowded = quantile(0.99, of: crowded)
        let grownKiB = after.residentKiB - before.residentKiB
        print(
            """
            ManyConnections: GetToken p99 \(String(format: "%.2f", p99Alone.milliseconds)) ms with \(Self.busy) \
            busy clients alone, \(String(format: "%.2f", p99Crowded.milliseconds)) ms beside \(Self.idle) idle \
            ones (\(alone.count) and \(crowded.count) calls); daemon \(before) before the idle ones, \(after) \
            with them (+\(grownKiB) KiB, \(grownKiB * 1024 / Self.idle) bytes per idle connection)
            """)
        #expect(p99Crowded <= p99Alone * 5, "p99 \(p99Crowded) beside idle connections, \(p99Alone) without")
        // Bound: 32 KiB per idle connection (it needs a few: a channel, its handlers, a task).
        #expect(grownKiB < Self.idle * 32, "the idle connections cost \(grownKiB) KiB")

        // Once they close, the daemon lets go of them (its "Released a connection" for each, and the setter's,
        // the last naming the busy ones, still held) and of their descriptors, which it closed before.
        for client in idle { client.close() }
        #expect(daemon.waitForReleasedConnections(1 + Self.idle, holding: Self.busy, timeout: .seconds(30)))
        #expect(
            ProcessFigures.descriptors(of: pid) <= before.descriptors,
            "still \(ProcessFigures.descriptors(of: pid)) fds, \(before.descriptors) before")
    }

    /// Calls GetToken `rounds` times on each client, every client with one call in flight at a time, all
    /// multiplexed on one thread with poll(2); returns each call's round-trip time.
    static func getTokens(on clients: [FaultClient], rounds: Int, expecting token: String) throws -> [Duration] {
        let call = FaultClient.encode("GetToken", ["group": "shop"])
        let clock = ContinuousClock()
        var sentAt = [ContinuousClock.Instant](repeating: clock.now, count: clients.count)
        var remaining = [Int](repeating: rounds, count: clients.count)
        var latencies: [Duration] = []
        latencies.reserveCapacity(clients.count * rounds)
        for (index, client) in clients.enumerated() {
            sentAt[index] = clock.now
            try client.sendRaw(call)
        }
        var pollers = clients.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        var active = clients.count
        while active > 0 {
            let ready = poll(&pollers, nfds_t(pollers.count), 20_000)
            guard ready > 0 else { throw POSIXError(.ETIMEDOUT) }
            for index in pollers.indices where pollers[index].revents != 0 {
                let client = clients[index]
                try client.fill()
                while client.hasBufferedMessage {
                    let reply = try client.reply()
                    latencies.append(clock.now - sentAt[index])
                    guard reply.parameters["token"] as? String == token else {
                        throw UnexpectedReply(text: reply.text)
                    }
                    remaining[index] -= 1
                    if remaining[index] > 0 {
                        sentAt[index] = clock.now
                        try client.sendRaw(call)
                    } else {
                        pollers[index].fd = -1
                        active -= 1
                    }
                }
            }
        }
        return latencies
    }

    struct UnexpectedReply: Error, CustomStringConvertible {
        var text: String
        var description: String { "unexpected reply: \(text.prefix(300))" }
    }
}
