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
        // The same writes through a C server shaped as the daemon (a loop thread, writer threads), when there is a
        // C compiler: what the client/server shape costs, apart from what the daemon does in it.
        let shapedSocket = daemon.directory + "/durable.socket"
        let shapedDirectory = try settings.scratch.folder("durability-shaped", onDisk: true)
        let shaped = try ClientBenchmark.compileC(
            "c-durable-server", PackageResources.c_durable_server_c, into: daemon.directory
        ).map {
            try FloorServer.start(
                $0, [shapedSocket, shapedDirectory, "64", "\(StoreWriters.defaultThreadCount)"],
                listeningOn: shapedSocket)
        }
        defer { shaped?.terminate() }
        for clients in [1, 8] {
            let name = "\(clients) client\(clients == 1 ? "" : "s")"
            let floorRate = Self.floorRate(floorDirectory, threads: clients, seconds: duration)
            let daemonRate = try Self.setRate(daemon.socketPath, tokens, clients: clients, seconds: duration)
            report.add(
                .init(
                    measure: "SetToken/s on disk (fsync), \(name)",
                    value: ThroughputBenchmark.format(daemonRate), baseline: ThroughputBenchmark.format(floorRate),
                    ratio: ratio(daemonRate, floorRate), goal: clients == 1 ? ">= 0.8x" : ">= 1x",
                    met: daemonRate >= (clients == 1 ? 0.8 : 1) * floorRate))
            guard shaped != nil else { continue }
            let shapedRate = try Self.setRate(shapedSocket, tokens, clients: clients, seconds: duration)
            report.add(
                .init(
                    measure: "Durable writes/s through a C server shaped as the daemon (c-durable-server), \(name)",
                    value: ThroughputBenchmark.format(shapedRate), baseline: ThroughputBenchmark.format(floorRate),
                    ratio: ratio(shapedRate, floorRate)))
        }
        try loopCPU(report, tokens)
        let writers = 8
        let floorRate = Self.floorRate(floorDirectory, threads: writers, seconds: duration)
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
    /// shaped as the daemon (when there is a C compiler).
    private func loopCPU(_ report: Report, _ tokens: [String]) throws {
        let calls = settings.pick(full: 20_000, brief: 500)
        let daemon = try settings.newDaemon("setcpu")
        try daemon.start()
        defer { daemon.stop() }
        let daemonCPU = try Self.loopCPUPerCall(daemon.socketPath, daemon.pid, tokens, calls: calls)
        let socket = daemon.directory + "/shaped-tmpfs.socket"
        let shaped = try ClientBenchmark.compileC(
            "c-durable-server", PackageResources.c_durable_server_c, into: daemon.directory
        ).map {
            try FloorServer.start(
                $0, [socket, try settings.scratch.folder("setcpu-shaped"), "64", "\(StoreWriters.defaultThreadCount)"],
                listeningOn: socket)
        }
        defer { shaped?.terminate() }
        let shapedCPU = try shaped.map { try Self.loopCPUPerCall(socket, $0.processIdentifier, tokens, calls: calls) }
        report.add(
            .init(
                measure:
                    "Loop thread CPU per SetToken, store on tmpfs, 1 client (beside: the C server shaped as the daemon)",
                value: String(format: "%.1f µs", daemonCPU / 1000),
                baseline: shapedCPU.map { String(format: "%.1f µs", $0 / 1000) } ?? "",
                ratio: shapedCPU.map { ratio(daemonCPU, $0) } ?? ""))
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

    /// SetToken calls per second, each client on a group of its own.
    static func setRate(_ socket: String, _ tokens: [String], clients: Int, seconds: Double) throws -> Double {
        let requests = (0..<clients).map { client in tokens.map { Requests.setToken("durable-\(client)", $0) } }
        let connections = UnsafeSendable(try (0..<clients).map { _ in try UnixStream(connectingTo: socket) })
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        let counts = onThreads(clients) { index in
            var done = 0
            while monotonicNanoseconds() < deadline {
                guard (try? connections.value[index].call(requests[index][done % tokens.count])) != nil else {
                    return -1
                }
                done += 1
            }
            return done
        }
        guard !counts.contains(-1) else { throw BenchError.closed }
        return Double(counts.reduce(0, +)) / (Double(monotonicNanoseconds() - start) / 1e9)
    }

    /// Durable replacements per second done directly: write a temp file, fsync it, rename it over the record,
    /// fsync the directory; each thread on a file of its own.
    static func floorRate(_ directory: String, threads: Int, seconds: Double) -> Double {
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
        return Double(counts.reduce(0, +)) / (Double(monotonicNanoseconds() - start) / 1e9)
    }
}
