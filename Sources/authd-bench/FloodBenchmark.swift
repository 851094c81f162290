// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One unprivileged user (bob) floods a system-mode daemon: the daemon's peak memory under each flood beside
/// its idle size, and another user's (alice's) GetToken round trip under bob's flood beside the same without
/// it, in one run. Needs root, to run the clients as two other users (`setpriv`); skipped otherwise.
struct FloodBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    static let bob: UInt32 = 4242
    static let alice: UInt32 = 4343

    func run(_ report: Report) throws {
        guard getuid() == 0 else {
            progress("  skipped: needs root to run clients as two other users")
            report.add(.init(measure: "Flood benchmarks", value: "skipped (needs root)"))
            return
        }
        let executable = try FloodClient.executable()
        // A fresh daemon for each flood: what one flood left allocated does not count against the next.
        var runs = 0
        func freshDaemon() throws -> DaemonProcess {
            runs += 1
            let daemon = try settings.newDaemon("flood-\(runs)")
            let config = daemon.directory + "/etc"
            try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
            try """
            [AppGroup]
            Name=shop
            Users=\(Self.alice)

            [AppGroup]
            Name=bobs
            Users=\(Self.bob)
            """.write(toFile: config + "/authd.conf", atomically: true, encoding: .utf8)
            // Other users reach the socket through the folders above it.
            for path in [settings.scratch.memory, daemon.directory] { chmod(path, 0o755) }
            try daemon.start(arguments: ["--config-directory", config], system: true)
            let token = BenchToken.make(exp: Int(Date().timeIntervalSince1970) + 3600, customer: 1)
            let root = try UnixStream(connectingTo: daemon.socketPath)
            for group in ["shop", "bobs"] {
                try root.send(Requests.setToken(group, token))
                _ = try root.receive()
            }
            for _ in 0..<1000 { try root.call(Requests.getToken("bobs")) }
            return daemon
        }

        func peakGrowth(_ what: String, _ plan: FloodClient.Plan) throws {
            let daemon = try freshDaemon()
            defer { daemon.stop() }
            let idle = daemon.resetPeak()
            let flood = try FloodClient.spawn(executable, uid: Self.bob, socket: daemon.socketPath, plan: plan)
            defer { FloodClient.stop(flood) }
            let figures = try FloodClient.figures(flood)
            let peak = daemon.memory.peak
            let grown = peak - idle
            report.add(
                .init(
                    measure: "Daemon RSS peak under \(what) (\(figures))", value: mebibytes(peak),
                    baseline: mebibytes(idle) + " idle", ratio: "+" + mebibytes(grown),
                    goal: "within +16 MiB of idle", met: grown <= 16 * 1024))
        }

        let quota = settings.pick(full: 64 << 20, brief: 4 << 20)
        try peakGrowth(
            "\(quota >> 20) MB of one-way Preflights, 1 connection",
            .init(
                message: #"{"method":"com.exponea.Auth.Preflight","oneway":true,"parameters":{"group":"shop"}}"#,
                quota: quota, final: #"{"method":"com.exponea.Auth.Preflight","parameters":{"group":"shop"}}"#))
        try peakGrowth(
            "pipelined GetTokens, replies unread, 256 connections",
            .init(
                connections: 256, message: String(decoding: Requests.getToken("bobs").dropLast(), as: UTF8.self),
                quota: 1 << 20))
        try peakGrowth(
            "Subscribe then pipelined Preflights, 256 connections",
            .init(
                connections: 256, prelude: String(decoding: Requests.subscribe("bobs").dropLast(), as: UTF8.self),
                message: #"{"method":"com.exponea.Auth.Preflight","parameters":{"group":"bobs"}}"#,
                quota: 1 << 20))

        // alice alone, then beside bob at his share of connections, each flooding one-way calls.
        let daemon = try freshDaemon()
        defer { daemon.stop() }
        let count = settings.pick(full: 20_000, brief: 2_000)
        let alone = try LatencyProbe.measure(executable, uid: Self.alice, socket: daemon.socketPath, count: count)
        let idle = daemon.resetPeak()
        let flood = try FloodClient.spawn(
            executable, uid: Self.bob, socket: daemon.socketPath,
            plan: .init(
                connections: 300,
                message: #"{"method":"com.exponea.Auth.Preflight","oneway":true,"parameters":{"group":"shop"}}"#,
                quota: 0))
        defer { FloodClient.stop(flood) }
        let figures = try FloodClient.figures(flood)
        let crowded = try LatencyProbe.measure(executable, uid: Self.alice, socket: daemon.socketPath, count: count)
        let peak = daemon.memory.peak
        report.add(
            .init(
                measure: "Daemon RSS peak, bob at his share flooding one-way Preflights (\(figures))",
                value: mebibytes(peak), baseline: mebibytes(idle) + " idle", ratio: "+" + mebibytes(peak - idle),
                goal: "within +16 MiB of idle", met: peak - idle <= 16 * 1024))
        report.add(
            .init(
                measure: "alice's GetToken p50 under bob's flood (beside: without it)",
                value: microseconds(crowded.p50), baseline: microseconds(alone.p50),
                ratio: ratio(Double(crowded.p50), Double(alone.p50))))
        report.add(
            .init(
                measure: "alice's GetToken p99 under bob's flood (beside: without it)",
                value: microseconds(crowded.p99), baseline: microseconds(alone.p99),
                ratio: ratio(Double(crowded.p99), Double(alone.p99)), goal: "under 10 ms",
                met: crowded.p99 < 10_000_000 && crowded.tokens == count))
        if crowded.tokens != count { progress("  alice got \(crowded.tokens) of \(count) tokens under the flood") }
    }
}

/// KiB as "12.3 MiB".
func mebibytes(_ kibibytes: Int) -> String { String(format: "%.1f MiB", Double(kibibytes) / 1024) }

/// `authd-bench flood-client`: the flooding user, run as another user by `setpriv`. Opens connections, finds
/// out which the daemon holds (a GetInfo answered), sends a prelude on each, then writes the same call over and
/// over without reading a reply until each connection has sent its quota or the daemon takes nothing more for
/// a while; then prints `FLOODED` and its figures and holds its connections until killed. With a quota of 0 it
/// floods without end (and prints once it has started).
struct FloodClient: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flood-client", abstract: "Flood the daemon as one user (for the flood benchmark).",
        shouldDisplay: false)

    struct Plan: Codable {
        var connections = 1
        var prelude: String?
        var message: String
        var quota: Int
        var final: String?
    }

    @Option(help: "The socket path.") var socket: String
    @Option(help: "The plan, as JSON.") var plan: String

    func run() throws {
        // A refused connection is closed by the daemon, maybe before the GetInfo is written: EPIPE, not SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let plan = try JSONDecoder().decode(Plan.self, from: Data(plan.utf8))
        var held: [UnixStream] = []
        var refused = 0
        let getInfo = Array(#"{"method":"org.varlink.service.GetInfo"}"#.utf8) + [0]
        for _ in 0..<plan.connections {
            let client = try UnixStream(connectingTo: socket)
            if (try? client.call(getInfo)) != nil { held.append(client) } else { refused += 1 }
        }
        for client in held {
            if let prelude = plan.prelude { try client.send(Array(prelude.utf8) + [0]) }
            _ = fcntl(client.descriptor, F_SETFL, fcntl(client.descriptor, F_GETFL) | O_NONBLOCK)
        }
        let message = Array(plan.message.utf8) + [0]
        let chunk = Array([[UInt8]](repeating: message, count: max(1, 16384 / message.count)).joined())
        var sent = [Int](repeating: 0, count: held.count)
        var pollers = held.map { pollfd(fd: $0.descriptor, events: Int16(POLLOUT), revents: 0) }
        var live = held.count
        var announced = false
        func announce() {
            print("FLOODED \(held.count) held, \(refused) refused, \(sent.reduce(0, +) >> 20) MB sent")
            fflush(nil)
            announced = true
        }
        while live > 0 {
            let ready = poll(&pollers, nfds_t(pollers.count), 1000)
            if ready == 0 && plan.quota > 0 { break }  // the daemon takes nothing more: it holds the rest back
            for index in pollers.indices where pollers[index].fd >= 0 && pollers[index].revents != 0 {
                let offset = sent[index] % chunk.count
                var length = chunk.count - offset
                if plan.quota > 0 { length = min(length, plan.quota - sent[index]) }
                let count = chunk.withUnsafeBytes {
                    Glibc.send(pollers[index].fd, $0.baseAddress! + offset, length, Int32(MSG_NOSIGNAL))
                }
                if count < 0 && (errno == EAGAIN || errno == EINTR) { continue }
                if count > 0 { sent[index] += count }
                if count <= 0 || (plan.quota > 0 && sent[index] >= plan.quota) {
                    pollers[index].fd = -1
                    live -= 1
                }
            }
            if plan.quota == 0 && !announced && sent.reduce(0, +) > 0 { announce() }
        }
        if let final = plan.final {
            for client in held {
                _ = fcntl(client.descriptor, F_SETFL, fcntl(client.descriptor, F_GETFL) & ~O_NONBLOCK)
                _ = try? client.call(Array(final.utf8) + [0])
            }
        }
        if !announced { announce() }
        while true { pause() }
    }

    /// This executable's path, for another user to run it.
    static func executable() throws -> String {
        try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
    }

    /// Starts a flood as `uid`; its output goes to a pipe read by ``figures(_:)``.
    static func spawn(_ executable: String, uid: UInt32, socket: String, plan: Plan) throws -> (Process, Pipe) {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = [
            "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable, "flood-client", "--socket", socket,
            "--plan", String(decoding: try JSONEncoder().encode(plan), as: UTF8.self),
        ]
        process.standardOutput = output
        try process.run()
        return (process, output)
    }

    /// Waits for the flood to reach its peak and returns what it printed then.
    static func figures(_ flood: (Process, Pipe)) throws -> String {
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let data = flood.1.fileHandleForReading.availableData
            guard !data.isEmpty else { throw BenchError.daemon("the flood client ended: \(flood.0.terminationStatus)") }
            line.append(data)
        }
        let text = String(decoding: line, as: UTF8.self).split(separator: "\n").first ?? ""
        return String(text.dropFirst("FLOODED ".count))
    }

    static func stop(_ flood: (Process, Pipe)) {
        flood.0.terminate()
        flood.0.waitUntilExit()
    }
}

/// `authd-bench latency-probe`: GetToken round trips on one connection, run as another user; prints the
/// count of tokens received, p50 and p99 in nanoseconds.
struct LatencyProbe: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "latency-probe", abstract: "Time GetToken round trips (for the flood benchmark).",
        shouldDisplay: false)

    @Option(help: "The socket path.") var socket: String
    @Option(help: "Round trips.") var count: Int

    func run() throws {
        let client = try UnixStream(connectingTo: socket)
        let request = Requests.getToken("shop")
        var samples = Samples()
        var tokens = 0
        for _ in 0..<count {
            let start = monotonicNanoseconds()
            try client.send(request)
            let reply = try client.receive()
            samples.append(monotonicNanoseconds() - start)
            if String(decoding: reply, as: UTF8.self).contains("\"token\"") { tokens += 1 }
        }
        print("\(tokens) \(samples.percentile(0.5)) \(samples.percentile(0.99))")
    }

    struct Result {
        var tokens: Int
        var p50: UInt64
        var p99: UInt64
    }

    static func measure(_ executable: String, uid: UInt32, socket: String, count: Int) throws -> Result {
        let process = Process()
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = [
            "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable, "latency-probe", "--socket", socket,
            "--count", "\(count)",
        ]
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let fields = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard process.terminationStatus == 0, fields.count == 3 else {
            throw BenchError.daemon("the latency probe failed: \(String(decoding: data, as: UTF8.self))")
        }
        return Result(tokens: Int(fields[0]) ?? 0, p50: UInt64(fields[1]) ?? 0, p99: UInt64(fields[2]) ?? 0)
    }
}
