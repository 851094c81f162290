// SPDX-License-Identifier: Apache-2.0
import Foundation

/// GetToken round trip from one client, beside the floor's ping-pong of the same sizes, in alternating rounds
/// so both see the same machine.
struct LatencyBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let daemon = try settings.newDaemon("latency")
        try daemon.start()
        defer { daemon.stop() }
        let request = try GetTokenTarget.prepare(daemon)
        let floorSocket = daemon.directory + "/floor.socket"
        let floor = try FloorServer.spawn(socket: floorSocket, replySize: request.replySize)
        defer { floor.terminate() }
        // The event-loop floor: a C server that waits as the daemon does (epoll), when there is a C compiler.
        let epollSocket = daemon.directory + "/epoll.socket"
        let epoll = try ClientBenchmark.compileC(
            "c-epoll-server", PackageResources.c_epoll_server_c, into: daemon.directory
        ).map { try FloorServer.start($0, [epollSocket, "\(request.replySize)"], listeningOn: epollSocket) }
        defer { epoll?.terminate() }

        let daemonClient = try UnixStream(connectingTo: daemon.socketPath)
        let floorClient = try UnixStream(connectingTo: floorSocket)
        let epollClient = try epoll.map { _ in try UnixStream(connectingTo: epollSocket) }
        let calls = settings.pick(full: 10_000, brief: 1_000)
        var daemonSamples = Samples()
        var floorSamples = Samples()
        var epollSamples = Samples()
        _ = try Self.roundTrips(floorClient, request.bytes, count: calls / 2)  // warm-up
        _ = try Self.roundTrips(daemonClient, request.bytes, count: calls / 2)
        if let epollClient { _ = try Self.roundTrips(epollClient, request.bytes, count: calls / 2) }
        for _ in 0..<4 {
            floorSamples.append(contentsOf: try Self.roundTrips(floorClient, request.bytes, count: calls))
            daemonSamples.append(contentsOf: try Self.roundTrips(daemonClient, request.bytes, count: calls))
            if let epollClient {
                epollSamples.append(contentsOf: try Self.roundTrips(epollClient, request.bytes, count: calls))
            }
        }
        let (p50, floor50) = (daemonSamples.percentile(0.5), floorSamples.percentile(0.5))
        let (p99, floor99) = (daemonSamples.percentile(0.99), floorSamples.percentile(0.99))
        report.add(
            .init(
                measure:
                    "GetToken round trip, 1 client, p50 (\(request.bytes.count) B call, \(request.replySize) B reply)",
                value: microseconds(p50), baseline: microseconds(floor50), ratio: ratio(Double(p50), Double(floor50)),
                goal: "<= 1.5x floor", met: Double(p50) <= 1.5 * Double(floor50)))
        report.add(
            .init(
                measure: "GetToken round trip, 1 client, p99", value: microseconds(p99),
                baseline: microseconds(floor99), ratio: ratio(Double(p99), Double(floor99))))
        guard epoll != nil else { return }
        let epoll50 = epollSamples.percentile(0.5)
        report.add(
            .init(
                measure: "Event-loop floor: a C epoll server's round trip, p50 (beside: the floor)",
                value: microseconds(epoll50), baseline: microseconds(floor50),
                ratio: ratio(Double(epoll50), Double(floor50))))
        report.add(
            .init(
                measure: "GetToken round trip, p50, beside the C epoll server", value: microseconds(p50),
                baseline: microseconds(epoll50), ratio: ratio(Double(p50), Double(epoll50))))
    }

    /// `count` calls of `request`, each timed.
    static func roundTrips(_ client: UnixStream, _ request: [UInt8], count: Int) throws -> Samples {
        var samples = Samples()
        for _ in 0..<count {
            let start = monotonicNanoseconds()
            try client.call(request)
            samples.append(monotonicNanoseconds() - start)
        }
        return samples
    }
}

/// A group with a token, and the GetToken call for it.
struct GetTokenTarget {
    var bytes: [UInt8]
    var replySize: Int

    static let group = "bench"

    /// Sets a token for ``group`` in `daemon` and checks that GetToken returns it.
    static func prepare(_ daemon: DaemonProcess) throws -> GetTokenTarget {
        let client = try UnixStream(connectingTo: daemon.socketPath)
        let exp = Int(Date().timeIntervalSince1970) + 3600
        let token = BenchToken.make(exp: exp, customer: 1)
        let set = String(
            decoding: try {
                try client.send(Requests.setToken(group, token))
                return try client.receive()
            }(), as: UTF8.self)
        guard set.contains("\"generation\"") else { throw BenchError.unexpectedReply(set) }
        let request = Requests.getToken(group)
        try client.send(request)
        let reply = try client.receive()
        guard String(decoding: reply, as: UTF8.self).contains(token) else {
            throw BenchError.unexpectedReply(String(decoding: reply, as: UTF8.self))
        }
        return GetTokenTarget(bytes: request, replySize: reply.count)
    }
}
