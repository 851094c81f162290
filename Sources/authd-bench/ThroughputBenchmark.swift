// SPDX-License-Identifier: Apache-2.0
import CEpoll
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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

    /// Calls per second that `clients` connections complete together over `seconds`, each with one call in
    /// flight. One thread drives every connection through epoll, as wrk does: with a thread per connection the
    /// load generator's own context switches would take most of the two cores from the server it measures.
    static func rate(_ socket: String, _ request: [UInt8], clients: Int, seconds: Double) throws -> Double {
        let connections = try (0..<clients).map { _ in try UnixStream(connectingTo: socket) }
        let poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard poller >= 0 else { throw BenchError.system("epoll_create1", errno) }
        defer { close(poller) }
        for (index, connection) in connections.enumerated() {
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: UInt64(index)))
            guard epoll_ctl(poller, EPOLL_CTL_ADD, connection.descriptor, &event) == 0 else {
                throw BenchError.system("epoll_ctl", errno)
            }
        }
        var ready = [epoll_event](repeating: epoll_event(), count: clients)
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        var done = 0
        for connection in connections { try connection.send(request) }
        while monotonicNanoseconds() < deadline {
            let count = epoll_wait(poller, &ready, Int32(ready.count), 1_000)
            guard count >= 0 || errno == EINTR else { throw BenchError.system("epoll_wait", errno) }
            for slot in ready[..<Int(max(count, 0))] {
                let connection = connections[Int(slot.data.u64)]
                // One call in flight per connection: the bytes read are (part of) its one reply.
                let read = buffer.withUnsafeMutableBytes {
                    Glibc.read(connection.descriptor, $0.baseAddress!, $0.count)
                }
                guard read > 0 else { throw BenchError.closed }
                if buffer[read - 1] == 0 {
                    done += 1
                    try connection.send(request)
                }
            }
        }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        // Read each connection's last reply before closing it: a server writing to a closed socket may die of
        // SIGPIPE (the floor server does not ignore it).
        for connection in connections {
            var last: UInt8 = 1
            while last != 0 {
                let read = buffer.withUnsafeMutableBytes {
                    Glibc.read(connection.descriptor, $0.baseAddress!, $0.count)
                }
                guard read > 0 else { break }
                last = buffer[read - 1]
            }
        }
        return Double(done) / elapsed
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
