// SPDX-License-Identifier: Apache-2.0
import CEpoll
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
        try pinnedRows(
            report, daemon: daemon.pid, floor: floor.processIdentifier, daemonClient: daemonClient,
            floorClient: floorClient, request: request.bytes, calls: calls)
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
                baseline: microseconds(epoll50), ratio: ratio(Double(p50), Double(epoll50)),
                goal: "<= 1.05x", met: Double(p50) <= 1.05 * Double(epoll50)))
    }

    /// The same round trips with client, daemon (every thread) and floor on one CPU: an idle vCPU's wake-up,
    /// which hides the server's own cost when they run apart, is gone, and the ratio is the server's. With the
    /// servers' CPU time per call, from /proc.
    private func pinnedRows(
        _ report: Report, daemon: Int32, floor: Int32, daemonClient: UnixStream, floorClient: UnixStream,
        request: [UInt8], calls: Int
    ) throws {
        guard let restore = CPUPinning.pin([getpid(), daemon, floor], to: 0) else { return }
        defer { CPUPinning.restore(restore) }
        var daemonSamples = Samples()
        var floorSamples = Samples()
        var daemonCPU: Int64 = 0
        var floorCPU: Int64 = 0
        for _ in 0..<4 {
            var before = CPUPinning.cpuTime(of: floor)
            floorSamples.append(contentsOf: try Self.roundTrips(floorClient, request, count: calls))
            floorCPU += CPUPinning.cpuTime(of: floor) - before
            before = CPUPinning.cpuTime(of: daemon)
            daemonSamples.append(contentsOf: try Self.roundTrips(daemonClient, request, count: calls))
            daemonCPU += CPUPinning.cpuTime(of: daemon) - before
        }
        let (p50, floor50) = (daemonSamples.percentile(0.5), floorSamples.percentile(0.5))
        report.add(
            .init(
                measure: "GetToken round trip, 1 client, p50, client and servers pinned to one CPU",
                value: microseconds(p50), baseline: microseconds(floor50), ratio: ratio(Double(p50), Double(floor50)),
                goal: "<= 1.25x floor", met: Double(p50) <= 1.25 * Double(floor50)))
        let perCall = { (nanoseconds: Int64) in Double(nanoseconds) / Double(4 * calls) }
        report.add(
            .init(
                measure: "Server CPU per GetToken, pinned (/proc utime+stime)",
                value: String(format: "%.1f µs", perCall(daemonCPU) / 1000),
                baseline: String(format: "%.1f µs", perCall(floorCPU) / 1000),
                ratio: ratio(perCall(daemonCPU), perCall(floorCPU)), goal: "<= 1.3x floor",
                met: perCall(daemonCPU) <= 1.3 * perCall(floorCPU)))
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

/// Moves processes, every thread of each, to one CPU for a measurement, and back.
enum CPUPinning {
    /// Each thread's CPU set before it was pinned.
    typealias Saved = [(thread: Int32, set: cpu_set_t)]

    /// Pins every thread of `processes` to `cpu`; nil when the machine has one CPU or a thread cannot be moved.
    static func pin(_ processes: [Int32], to cpu: Int) -> Saved? {
        guard sysconf(Int32(_SC_NPROCESSORS_ONLN)) > 1 else { return nil }
        var saved: Saved = []
        var one = cpu_set_t()
        withUnsafeMutableBytes(of: &one) { $0[cpu / 8] |= UInt8(1 << (cpu % 8)) }
        for process in processes {
            for thread in threads(of: process) {
                var current = cpu_set_t()
                guard sched_getaffinity(thread, MemoryLayout<cpu_set_t>.size, &current) == 0,
                    sched_setaffinity(thread, MemoryLayout<cpu_set_t>.size, &one) == 0
                else {
                    restore(saved)
                    return nil
                }
                saved.append((thread, current))
            }
        }
        return saved
    }

    static func restore(_ saved: Saved) {
        for (thread, set) in saved {
            var set = set
            _ = sched_setaffinity(thread, MemoryLayout<cpu_set_t>.size, &set)
        }
    }

    /// The threads of `process` (`/proc/PID/task`).
    static func threads(of process: Int32) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process)/task")) ?? []).compactMap { Int32($0) }
    }

    /// The CPU time `process` used, user and system, in nanoseconds (`/proc/PID/stat`, in clock ticks).
    static func cpuTime(of process: Int32) -> Int64 {
        guard let stat = try? String(contentsOfFile: "/proc/\(process)/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
        guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return 0 }
        return (user + system) * 1_000_000_000 / Int64(sysconf(Int32(_SC_CLK_TCK)))
    }
}
