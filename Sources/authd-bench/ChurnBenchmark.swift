// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// What the daemon keeps of connections that are gone, beside 0, the figure of a daemon that keeps nothing:
///
/// - RSS growth per 100,000 connections of each kind (connect and close; half a message; one GetToken; a
///   Subscribe; a ClaimRefresh), each kind run once to warm up and once to measure, one client at a time;
/// - the RSS high-water of 50,000 connect-ClaimRefresh-close in a row above the daemon's resident size before;
/// - a mixed load (app loops that connect per request, setters, a clearer, a claimant): RSS growth from the end of
///   a warm-up to the end of the load.
///
/// RSS is read from `/proc/PID/status` once the daemon has settled (its `connections` gauge back to the one
/// connection that asks).
struct ChurnBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    /// A kind of connection, as a client makes it.
    typealias Kind = @Sendable (UnixStream) throws -> Void

    static let group = "churn"

    func run(_ report: Report) throws {
        let count = settings.pick(full: 100_000, brief: 5_000)
        let daemon = try settings.newDaemon("churn")
        try daemon.start()
        defer { daemon.stop() }
        let token = BenchToken.make(exp: Int(Date().timeIntervalSince1970) + 24 * 3600, customer: 1)
        try UnixStream(connectingTo: daemon.socketPath).call(Requests.setToken(Self.group, token))
        let claim = Array(
            #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"\#(Self.group)","generation":1}}"#.utf8)
        let kinds: [(String, Kind)] = [
            ("connect, close", { _ in }),
            ("half a message", { try $0.send(Array(#"{"method":"com.exponea.Au"#.utf8)) }),
            ("one GetToken", { try $0.call(Requests.getToken(Self.group)) }),
            ("Subscribe", { try $0.call(Requests.subscribe(Self.group)) }),
            ("ClaimRefresh", { try $0.call(claim + [0]) }),
        ]
        for (name, kind) in kinds {
            try churn(daemon, count, kind)
            let before = try settled(daemon)
            try churn(daemon, count, kind)
            let grown = try settled(daemon) - before
            let perHundredThousand = Double(grown) * 100_000 / Double(count)
            report.add(
                .init(
                    measure: "RSS growth per 100,000 connections: \(name)",
                    value: String(format: "%.0f KiB", perHundredThousand), baseline: "0 KiB",
                    goal: "<= 256 KiB", met: perHundredThousand <= 256))
        }

        let claims = settings.pick(full: 50_000, brief: 5_000)
        let claimDaemon = try settings.newDaemon("churn-claims")
        try claimDaemon.start()
        defer { claimDaemon.stop() }
        try UnixStream(connectingTo: claimDaemon.socketPath).call(Requests.setToken(Self.group, token))
        let idle = claimDaemon.resetPeak()
        try churn(claimDaemon, claims, kinds[4].1)
        _ = try settled(claimDaemon)
        let highWater = claimDaemon.memory.peak - idle
        report.add(
            .init(
                measure: "RSS high-water above idle, \(claims) connect-ClaimRefresh-close in a row",
                value: String(format: "%.1f MiB", Double(highWater) / 1024), baseline: "0 MiB",
                goal: "<= 8 MiB", met: highWater <= 8 * 1024))

        try mixedLoad(report, token: token)
    }

    /// `count` connections one after another, each made, used by `kind` and closed.
    private func churn(_ daemon: DaemonProcess, _ count: Int, _ kind: Kind) throws {
        for _ in 0..<count {
            try kind(try UnixStream(connectingTo: daemon.socketPath))
        }
    }

    /// The daemon's resident KiB once it holds no connection but the one that asks: a peer's close reaches the
    /// daemon after the peer is gone, so the gauge is read until it says so.
    private func settled(_ daemon: DaemonProcess) throws -> Int {
        let deadline = ContinuousClock.now + .seconds(30)
        while try Self.connectionsHeld(daemon.socketPath) != 1 {
            guard ContinuousClock.now < deadline else { throw BenchError.daemon("connections are still held") }
            usleep(10_000)
        }
        return daemon.memory.resident
    }

    /// The daemon's `com.exponea.Auth.connections` gauge.
    static func connectionsHeld(_ socket: String) throws -> Int {
        let client = try UnixStream(connectingTo: socket)
        try client.send(Array(#"{"method":"io.systemd.Metrics.List","more":true}"#.utf8) + [0])
        let name = Array(#""name":"com.exponea.Auth.connections""#.utf8)
        var held = -1
        while true {
            let reply = String(decoding: try client.receive(), as: UTF8.self)
            if reply.utf8.firstRange(of: name) != nil,
                let value = reply.split(separator: "\"value\":").last?.prefix(while: \.isNumber)
            {
                held = Int(value) ?? -1
            }
            if !reply.contains(#""continues":true"#) { return held }
        }
    }

    /// Apps that connect per request, setters, a clearer and a claimant, on one daemon: RSS after a warm-up, and
    /// after the load.
    private func mixedLoad(_ report: Report, token: String) throws {
        let (warmUp, load) = settings.pick(full: (60.0, 300.0), brief: (2.0, 5.0))
        let daemon = try settings.newDaemon("churn-mixed")
        try daemon.start()
        defer { daemon.stop() }
        let socket = daemon.socketPath
        let group = Self.group
        try UnixStream(connectingTo: socket).call(Requests.setToken(group, token))
        let claim = Array(
            #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"\#(group)","generation":1}}"#.utf8)
        let clear = Array(#"{"method":"com.exponea.Auth.ClearLocalCustomerData","parameters":{"group":"g1"}}"#.utf8)
        // Each role: what one of its connections does.
        let roles: [(count: Int, work: Kind)] = [
            (16, { try $0.call(Requests.getToken(group)) }),
            (4, { try $0.call(Requests.setToken("g1", token)) }),
            (1, { try $0.call(clear + [0]) }),
            (1, { try $0.call(claim + [0]) }),
        ]
        let state = LoadState()
        var threads: [Thread] = []
        for role in roles {
            for _ in 0..<role.count {
                let work = role.work
                let thread = Thread {
                    while !state.stopped.load(ordering: .relaxed) {
                        guard let client = try? UnixStream(connectingTo: socket) else { continue }
                        if (try? work(client)) != nil { state.calls.add(1, ordering: .relaxed) }
                    }
                }
                thread.start()
                threads.append(thread)
            }
        }
        progress("  mixed load: \(Int(warmUp)) s warm-up, then \(Int(load)) s")
        Thread.sleep(forTimeInterval: warmUp)
        let before = daemon.memory.resident
        let callsBefore = state.calls.load(ordering: .relaxed)
        Thread.sleep(forTimeInterval: load)
        let during = state.calls.load(ordering: .relaxed) - callsBefore
        state.stopped.store(true, ordering: .relaxed)
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        let after = try settled(daemon)
        let grown = after - before
        report.add(
            .init(
                measure: "Mixed load (\(roles.map(\.count).reduce(0, +)) clients, a connection per call) for "
                    + "\(Int(load)) s after \(Int(warmUp)) s warm-up: RSS growth, \(during) calls",
                value: String(format: "%.2f MiB", Double(grown) / 1024), baseline: "0 MiB",
                goal: "<= 2 MiB", met: grown <= 2 * 1024))
    }
}

/// What the mixed load's threads share: when to stop, and the calls they made.
private final class LoadState: Sendable {
    let stopped = Atomic<Bool>(false)
    let calls = Atomic<Int>(0)
}
