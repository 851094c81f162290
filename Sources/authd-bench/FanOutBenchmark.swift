// SPDX-License-Identifier: Apache-2.0
import CEpoll
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// From one SetToken to every one of N subscribed connections holding its `tokenRefreshed` event.
struct FanOutBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    static let group = "fanout"

    func run(_ report: Report) throws {
        let daemon = try settings.newDaemon("fanout")
        try daemon.start()
        defer { daemon.stop() }
        let control = try UnixStream(connectingTo: daemon.socketPath)
        let rounds = settings.pick(full: 30, brief: 3)
        let exp = Int(Date().timeIntervalSince1970) + 3600
        let tokens = (0..<(rounds + 1)).map { BenchToken.make(exp: exp, customer: $0) }
        for subscribers in [10, 100, 1_000] {
            let connections = try subscribe(subscribers, daemon: daemon, control: control)
            var each = Samples()
            var all = Samples()
            for round in 0...rounds {
                let arrivals = try setAndCollect(tokens[round], control: control, connections: connections)
                guard round > 0 else { continue }  // warm-up
                each.append(contentsOf: Samples(arrivals))
                all.append(arrivals.max() ?? 0)
            }
            report.add(
                .init(
                    measure: "Fan-out to \(subscribers) subscribers, each event p50 / p99",
                    value: "\(milliseconds(each.percentile(0.5))) / \(milliseconds(each.percentile(0.99)))"))
            let lastP50 = all.percentile(0.5)
            report.add(
                .init(
                    measure: "Fan-out to \(subscribers) subscribers, last event p50 / p99",
                    value: "\(milliseconds(lastP50)) / \(milliseconds(all.percentile(0.99)))",
                    goal: subscribers == 1_000 ? "< 10 ms" : "",
                    met: subscribers == 1_000 ? lastP50 < 10_000_000 : nil))
            for connection in connections { shutdown(connection.descriptor, Int32(SHUT_RDWR)) }
        }
    }

    /// Opens `count` connections subscribed to ``group`` and waits until the daemon counts them all.
    private func subscribe(_ count: Int, daemon: DaemonProcess, control: UnixStream) throws -> [UnixStream] {
        let connections = try (0..<count).map { _ in try UnixStream(connectingTo: daemon.socketPath) }
        for connection in connections { try connection.send(Requests.subscribe(Self.group)) }
        for _ in 0..<1_000 {
            try control.send(Requests.listGroups)
            let reply = String(decoding: try control.receive(), as: UTF8.self)
            if reply.contains(#""subscribers":\#(count)"#) {
                // Each subscription starts with the group's state: read it, so that it is not taken for the
                // first round's event.
                for connection in connections { _ = try connection.receive() }
                return connections
            }
            if reply.contains("TooManySubscribers") { throw BenchError.unexpectedReply(reply) }
            usleep(10_000)
        }
        throw BenchError.daemon("the daemon did not count \(count) subscribers in 10 s")
    }

    /// Sends SetToken and returns, for each connection, the nanoseconds until its event arrived.
    private func setAndCollect(_ token: String, control: UnixStream, connections: [UnixStream]) throws -> [UInt64] {
        let poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        defer { close(poller) }
        for (index, connection) in connections.enumerated() {
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: UInt64(index)))
            epoll_ctl(poller, EPOLL_CTL_ADD, connection.descriptor, &event)
        }
        var arrivals = [UInt64](repeating: 0, count: connections.count)
        var pending = connections.count
        var ready = [epoll_event](repeating: epoll_event(), count: 1024)
        let start = monotonicNanoseconds()
        try control.send(Requests.setToken(Self.group, token))
        while pending > 0 {
            let count = epoll_wait(poller, &ready, Int32(ready.count), 10_000)
            guard count > 0 else { throw BenchError.daemon("\(pending) subscribers got no event within 10 s") }
            let now = monotonicNanoseconds()
            for slot in ready[..<Int(count)] {
                let index = Int(slot.data.u64)
                _ = try connections[index].receive()
                guard arrivals[index] == 0 else { continue }
                arrivals[index] = now - start
                pending -= 1
                var unused = epoll_event()
                epoll_ctl(poller, EPOLL_CTL_DEL, connections[index].descriptor, &unused)
            }
        }
        let reply = String(decoding: try control.receive(), as: UTF8.self)
        guard reply.contains("\"generation\"") else { throw BenchError.unexpectedReply(reply) }
        return arrivals
    }
}
