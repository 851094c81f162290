// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import AuthDaemonCommand
import AuthStore
import Foundation
import Logging
import LoopHarness

#if canImport(Glibc)
    import Glibc
#endif

/// SetToken calls per second with every write made durable (temp file, fsync, rename, fsync of the directory),
/// on a disk, with one and 8 clients; beside the floor: the same file operations done by the benchmark itself
/// on the same file system, with as many threads. Then the same writes through the daemon's `AuthService` in
/// this process, 8 groups at once, on store pools of 1 to 8 threads: how many threads the daemon's pool needs.
/// Last, with the store on tmpfs, the CPU time of the loop's thread alone per SetToken, beside the loop thread of
/// the C server shaped as the daemon: what the daemon's loop does for a write, apart from the writes.
///
/// The C server shaped as the daemon (`c-durable-server.c`) runs twice where there is a C compiler: bare (it
/// parses, seals and logs nothing), and doing the daemon's work for a SetToken (`-DSET_WORK`, with OpenSSL's
/// libcrypto): the first shows what the shape costs, the second what the same work costs written in C.
struct DurabilityBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let daemon = try settings.newDaemon("durability", onDisk: true)
        try daemon.start()
        defer { daemon.stop() }
        let floorDirectory = try settings.scratch.folder("durability-floor", onDisk: true)
        let duration = settings.pick(full: 3.0, brief: 0.3)
        let exp = Int(Date().timeIntervalSince1970) + 3600
        let tokens = (0..<64).map { BenchToken.make(exp: exp, customer: $0) }
        // The same writes through the C server shaped as the daemon (a loop thread, writer threads), bare and doing
        // the daemon's work, when there is a C compiler.
        let bare = try Shaped.start(
            .bare, in: daemon.directory, settings.scratch.folder("durability-bare", onDisk: true))
        defer { bare?.process.terminate() }
        let working = try Shaped.start(
            .working, in: daemon.directory, settings.scratch.folder("durability-working", onDisk: true))
        defer { working?.process.terminate() }
        for clients in [1, 8] {
            let name = "\(clients) client\(clients == 1 ? "" : "s")"
            // The floor, the daemon and the C servers take turns, each a tenth of the duration at a time, so that the
            // disk's drift over the run (a tenth, between runs) falls on all of them alike.
            var meters: [(Double) throws -> Throughput] = [
                { Self.floorCalls(floorDirectory, threads: clients, seconds: $0) },
                try SetClients(daemon.socketPath, tokens, clients: clients).run,
            ]
            for server in [bare, working].compactMap({ $0 }) {
                meters.append(try SetClients(server.socket, tokens, clients: clients).run)
            }
            var rates = try Self.inTurns(meters, seconds: duration, turns: settings.pick(full: 10, brief: 2))
            let (floorRate, daemonRate) = (rates.removeFirst(), rates.removeFirst())
            report.add(
                .init(
                    measure: "SetToken/s on disk (fsync), \(name)",
                    value: ThroughputBenchmark.format(daemonRate), baseline: ThroughputBenchmark.format(floorRate),
                    ratio: ratio(daemonRate, floorRate), goal: clients == 1 ? ">= 0.8x" : ">= 1x",
                    met: daemonRate >= (clients == 1 ? 0.8 : 1) * floorRate))
            if bare != nil {
                let rate = rates.removeFirst()
                report.add(
                    .init(
                        measure: "Durable writes/s through the C server shaped as the daemon, bare, \(name)",
                        value: ThroughputBenchmark.format(rate), baseline: ThroughputBenchmark.format(floorRate),
                        ratio: ratio(rate, floorRate)))
            }
            if working != nil {
                let rate = rates.removeFirst()
                report.add(
                    .init(
                        measure: "SetToken/s on disk (fsync), \(name), beside the C server doing the daemon's work",
                        value: ThroughputBenchmark.format(daemonRate), baseline: ThroughputBenchmark.format(rate),
                        ratio: String(format: "%.2fx", daemonRate / rate), goal: ">= 0.95x",
                        met: daemonRate >= 0.95 * rate))
            }
        }
        try loopCPU(report, tokens)
        let writers = 8
        let floor = Self.floorCalls(floorDirectory, threads: writers, seconds: duration)
        let floorRate = Double(floor.calls) / floor.seconds
        for threads in [1, 2, 4, 8] {
            let directory = try settings.scratch.folder("durability-pool-\(threads)", onDisk: true)
            let rate = try Self.serviceRate(directory, tokens, writers: writers, threads: threads, seconds: duration)
            report.add(
                .init(
                    measure:
                        "SetToken/s on disk through the service, \(writers) groups at once, store pool of \(threads)",
                    value: ThroughputBenchmark.format(rate), baseline: ThroughputBenchmark.format(floorRate),
                    ratio: ratio(rate, floorRate)))
        }
    }

    /// The loop thread's CPU time per SetToken, one client, the store on tmpfs: the daemon's beside the C server's
    /// shaped as the daemon, bare and doing the daemon's work (when there is a C compiler).
    private func loopCPU(_ report: Report, _ tokens: [String]) throws {
        let calls = settings.pick(full: 20_000, brief: 500)
        let daemon = try settings.newDaemon("setcpu")
        try daemon.start()
        defer { daemon.stop() }
        let daemonCPU = try Self.loopCPUPerCall(daemon.socketPath, daemon.pid, tokens, calls: calls)
        for kind in [Shaped.Kind.bare, .working] {
            let shaped = try Shaped.start(kind, in: daemon.directory, settings.scratch.folder("setcpu-\(kind)"))
            defer { shaped?.process.terminate() }
            let shapedCPU = try shaped.map {
                try Self.loopCPUPerCall($0.socket, $0.process.processIdentifier, tokens, calls: calls)
            }
            report.add(
                .init(
                    measure: "Loop thread CPU per SetToken, store on tmpfs, 1 client (beside: the C server shaped as "
                        + (kind == .bare ? "the daemon, bare)" : "the daemon, doing its work)"),
                    value: String(format: "%.1f µs", daemonCPU / 1000),
                    baseline: shapedCPU.map { String(format: "%.1f µs", $0 / 1000) } ?? "",
                    ratio: shapedCPU.map { ratio(daemonCPU, $0) } ?? ""))
        }
    }

    /// A running C server shaped as the daemon (`c-durable-server.c`).
    struct Shaped {
        enum Kind: String { case bare, working }

        let process: Process
        let socket: String

        /// Builds the server of `kind` in `folder` and starts it on a store directory `store`, its log (the working
        /// one's "Token set" lines) in `folder`; nil when it cannot be built.
        static func start(_ kind: Kind, in folder: String, _ store: String) throws -> Shaped? {
            let name = kind == .bare ? "c-durable-server" : "c-durable-server-working"
            guard
                let binary = ClientBenchmark.compileC(
                    "c-durable-server", PackageResources.c_durable_server_c, into: folder, output: name,
                    flags: kind == .bare ? [] : ["-DSET_WORK", "-lcrypto", "-lm"])
            else { return nil }
            let socket = folder + "/\(name).socket"
            let process = try FloorServer.start(
                binary, [socket, store, "64", "\(StoreWriters.defaultThreadCount)"], listeningOn: socket,
                log: folder + "/\(name).log")
            return Shaped(process: process, socket: socket)
        }
    }

    /// The nanoseconds the main thread of `process` (its loop) ran per SetToken, over `calls` calls from one
    /// client after a warm-up (`/proc/PID/task/PID/schedstat`).
    static func loopCPUPerCall(_ socket: String, _ process: Int32, _ tokens: [String], calls: Int) throws -> Double {
        let requests = tokens.map { Requests.setToken("cpu", $0) }
        let connection = try UnixStream(connectingTo: socket)
        for index in 0..<100 { try connection.call(requests[index % requests.count]) }
        let before = threadCPU(process, thread: process)
        for index in 0..<calls { try connection.call(requests[index % requests.count]) }
        return Double(threadCPU(process, thread: process) - before) / Double(calls)
    }

    /// The nanoseconds thread `thread` of `process` has run (`/proc/PID/task/TID/schedstat`, its first field).
    static func threadCPU(_ process: Int32, thread: Int32) -> Int64 {
        let text = (try? String(contentsOfFile: "/proc/\(process)/task/\(thread)/schedstat", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first.flatMap { Int64($0) } ?? 0
    }

    /// SetToken calls per second through an `AuthService` in this process whose store writes run on a pool of
    /// `threads` threads, with `writers` threads each setting the token of a group of its own.
    static func serviceRate(_ directory: String, _ tokens: [String], writers: Int, threads: Int, seconds: Double)
        throws -> Double
    {
        let logger = Logger(label: "pool") { _ in SwiftLogNoOpLogHandler() }
        let store = try TokenStore(
            directory: directory, key: try StoreKey(material: Array(repeating: 9, count: 32)), logger: logger)
        // The service's actor on a loop of its own, as in the daemon.
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: store, records: [], clock: SystemClock(executor: loop.executor),
            storeWriters: StoreWriters(maximumThreads: threads), executor: loop.executor, logger: logger)
        let groups = try (0..<writers).map { try AppGroup("pool-\($0)") }
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let counts = onThreads(writers) { index in
            var done = 0
            while monotonicNanoseconds() < deadline {
                let (token, group) = (tokens[done % tokens.count], groups[index])
                guard (try? blocking { try await service.setToken(token, for: group) }) != nil else { return -1 }
                done += 1
            }
            return done
        }
        guard !counts.contains(-1) else { throw BenchError.closed }
        return Double(counts.reduce(0, +)) / (Double(monotonicNanoseconds() - start) / 1e9)
    }

    /// Calls made in a stretch of time, and the seconds it took.
    typealias Throughput = (calls: Int, seconds: Double)

    /// Each meter's calls per second, over `turns` turns in which each runs for `seconds / turns`.
    static func inTurns(_ meters: [(Double) throws -> Throughput], seconds: Double, turns: Int) throws -> [Double] {
        var totals = Array(repeating: (calls: 0, seconds: 0.0), count: meters.count)
        for _ in 0..<turns {
            for (index, meter) in meters.enumerated() {
                let turn = try meter(seconds / Double(turns))
                totals[index].calls += turn.calls
                totals[index].seconds += turn.seconds
            }
        }
        return totals.map { Double($0.calls) / $0.seconds }
    }

    /// Clients on connections of their own, each setting the token of a group of its own.
    final class SetClients: Sendable {
        private let connections: UnsafeSendable<[UnixStream]>
        private let requests: [[[UInt8]]]

        init(_ socket: String, _ tokens: [String], clients: Int) throws {
            requests = (0..<clients).map { client in tokens.map { Requests.setToken("durable-\(client)", $0) } }
            connections = UnsafeSendable(try (0..<clients).map { _ in try UnixStream(connectingTo: socket) })
        }

        /// SetToken calls for `seconds`, all clients at once.
        func run(seconds: Double) throws -> Throughput {
            let start = monotonicNanoseconds()
            let deadline = start + UInt64(seconds * 1e9)
            let counts = onThreads(requests.count) { [self] index in
                var done = 0
                while monotonicNanoseconds() < deadline {
                    let request = requests[index][done % requests[index].count]
                    guard (try? connections.value[index].call(request)) != nil else { return -1 }
                    done += 1
                }
                return done
            }
            guard !counts.contains(-1) else { throw BenchError.closed }
            return (counts.reduce(0, +), Double(monotonicNanoseconds() - start) / 1e9)
        }
    }

    /// Durable replacements done directly for `seconds`: write a temp file, fsync it, rename it over the record,
    /// fsync the directory; each thread on a file of its own.
    static func floorCalls(_ directory: String, threads: Int, seconds: Double) -> Throughput {
        let record = [UInt8](repeating: 0x5a, count: 600)
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let counts = onThreads(threads) { index in
            let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { close(directoryDescriptor) }
            let (temporary, final) = ("\(directory)/.t\(index)", "\(directory)/r\(index)")
            var done = 0
            while monotonicNanoseconds() < deadline {
                let file = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                _ = record.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
                fsync(file)
                close(file)
                rename(temporary, final)
                fsync(directoryDescriptor)
                done += 1
            }
            return done
        }
        return (counts.reduce(0, +), Double(monotonicNanoseconds() - start) / 1e9)
    }
}
