import Foundation

/// GetToken calls per second with 1, 8, 32 and 128 clients, each on a connection of its own calling as fast
/// as it is answered; the floor server's figure for the same clients beside it.
struct ThroughputBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let daemon = try settings.newDaemon("throughput")
        try daemon.start()
        defer { daemon.stop() }
        let request = try GetTokenTarget.prepare(daemon)
        let floorSocket = daemon.directory + "/floor.socket"
        let floor = try FloorServer.spawn(socket: floorSocket, replySize: request.replySize)
        defer { floor.terminate() }

        let duration = settings.pick(full: 3.0, brief: 0.3)
        for clients in [1, 8, 32, 128] {
            let floorRate = try Self.rate(floorSocket, request.bytes, clients: clients, seconds: duration)
            let daemonRate = try Self.rate(daemon.socketPath, request.bytes, clients: clients, seconds: duration)
            let goal = clients == 32 ? 100_000.0 : nil
            report.add(
                .init(
                    measure: "GetToken/s, \(clients) client\(clients == 1 ? "" : "s")",
                    value: Self.format(daemonRate), baseline: Self.format(floorRate),
                    ratio: ratio(daemonRate, floorRate),
                    goal: goal.map { ">= \(Self.format($0))" } ?? "",
                    met: goal.map { daemonRate >= $0 }))
        }
    }

    /// Calls per second that `clients` connections complete together over `seconds`.
    static func rate(_ socket: String, _ request: [UInt8], clients: Int, seconds: Double) throws -> Double {
        let connections = try (0..<clients).map { _ in try UnixStream(connectingTo: socket) }
        let shared = UnsafeSendable(connections)
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let counts = onThreads(clients) { index in
            let client = shared.value[index]
            var done = 0
            while true {
                guard (try? client.call(request)) != nil else { return -1 }
                done += 1
                if done % 16 == 0 && monotonicNanoseconds() >= deadline { return done }
            }
        }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        guard !counts.contains(-1) else { throw BenchError.closed }
        return Double(counts.reduce(0, +)) / elapsed
    }

    static func format(_ rate: Double) -> String {
        rate >= 10_000 ? String(format: "%.0fk", rate / 1000) : String(format: "%.0f", rate)
    }
}

/// Hands non-Sendable values to threads that each use their own part of them.
struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
