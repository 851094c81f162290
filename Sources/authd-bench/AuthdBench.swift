// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import Foundation

/// `authd-bench`: measures exponea-authd against the floor a Unix socket allows, in one run, and prints a
/// Markdown table. `--short` runs every benchmark for a few seconds (CI); the default runs take a few minutes.
@main
struct AuthdBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authd-bench",
        abstract: "Measure exponea-authd beside the floor of a raw Unix-socket ping-pong, in one run.",
        subcommands: [Run.self, FloorServer.self, FloodClient.self, LatencyProbe.self],
        defaultSubcommand: Run.self
    )
}

/// The benchmarks.
enum Benchmark: String, CaseIterable, ExpressibleByArgument {
    case latency, hops, client, clib, throughput, fanout, bus, scale, durability, agents, footprint, flood, authctl,
        metrics,
        counting, churn, identity
}

struct Run: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Run the benchmarks and print the table (the default).")

    @Flag(help: "Run each benchmark briefly, to check that they work (a few seconds in all).")
    var short = false

    @Option(name: .customLong("only"), help: "Run only these benchmarks (repeatable).")
    var benchmarks: [Benchmark] = Benchmark.allCases

    @Option(
        help: ArgumentHelp("The daemon to measure; by default the one built next to authd-bench.", valueName: "path"))
    var daemon: String?

    @Option(
        help: ArgumentHelp("Scratch space on tmpfs, for everything but the durability benchmark.", valueName: "path"))
    var memoryDirectory = "/dev/shm"

    @Option(
        help: ArgumentHelp(
            "Scratch space on the disk the store would use, for the durability benchmark.", valueName: "path"))
    var diskDirectory = "/var/tmp"

    @Flag(help: "Fail (exit 1) when a goal is missed.")
    var strict = false

    @Flag(help: "Keep the scratch folders (stores, sockets, logs) for profiling the daemon on them afterwards.")
    var keepScratch = false

    func run() throws {
        raiseOpenFileLimit()
        let executable = try daemonExecutable()
        let scratch = try Scratch(memory: memoryDirectory, disk: diskDirectory)
        defer {
            if keepScratch {
                progress("kept the scratch folders \(scratch.memory) and \(scratch.disk)")
            } else {
                scratch.remove()
            }
        }
        let report = Report()
        let settings = BenchSettings(short: short, daemon: executable, scratch: scratch)
        progress("authd-bench: \(short ? "short" : "full") run of \(executable)")
        for benchmark in Benchmark.allCases where benchmarks.contains(benchmark) {
            progress("\n\(benchmark.rawValue):")
            switch benchmark {
            case .latency: try LatencyBenchmark(settings).run(report)
            case .hops: try HopsBenchmark(settings).run(report)
            case .client: try ClientBenchmark(settings).run(report)
            case .clib: try CLibraryBenchmark(settings).run(report)
            case .throughput: try ThroughputBenchmark(settings).run(report)
            case .fanout: try FanOutBenchmark(settings).run(report)
            case .bus: try BusFanOutBenchmark(settings).run(report)
            case .scale: try ScaleBenchmark(settings).run(report)
            case .durability: try DurabilityBenchmark(settings).run(report)
            case .agents: try RefreshAgentBenchmark(settings).run(report)
            case .footprint: try FootprintBenchmark(settings).run(report)
            case .churn: try ChurnBenchmark(settings).run(report)
            case .identity: try IdentityBenchmark(settings).run(report)
            case .flood: try FloodBenchmark(settings).run(report)
            case .authctl: try AuthctlBenchmark(settings).run(report)
            case .metrics: try MetricsBenchmark(settings).run(report)
            case .counting: try CountingCostBenchmark(settings).run(report)
            }
        }
        print(MachineDescription.current)
        print()
        print(report.markdown)
        if strict && !report.missed.isEmpty { throw ExitCode.failure }
    }

    private func daemonExecutable() throws -> String {
        if let daemon { return daemon }
        let me =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let sibling = (me as NSString).deletingLastPathComponent + "/exponea-authd"
        guard FileManager.default.isExecutableFile(atPath: sibling) else {
            throw ValidationError(
                "exponea-authd is not built next to authd-bench (\(sibling)); run 'swift build -c release' first, or pass --daemon"
            )
        }
        return sibling
    }
}

/// What every benchmark gets: the run's length, the daemon and scratch space.
struct BenchSettings {
    var short: Bool
    var daemon: String
    var scratch: Scratch

    /// `full` in a full run, `brief` in a short one.
    func pick<T>(full: T, brief: T) -> T { short ? brief : full }

    /// A new daemon in a fresh folder on tmpfs (or on the disk).
    func newDaemon(_ name: String, onDisk: Bool = false) throws -> DaemonProcess {
        try DaemonProcess(executable: daemon, directory: scratch.folder(name, onDisk: onDisk))
    }

    /// authctl as a device runs it: a link named `authctl` to the daemon's binary (the one binary installed),
    /// in the fresh scratch folder `folder`, not the development product `authctl` that may lie beside it.
    func authctlLink(in folder: String) throws -> String {
        let authctl = try scratch.folder(folder) + "/authctl"
        try FileManager.default.createSymbolicLink(
            atPath: authctl, withDestinationPath: URL(fileURLWithPath: daemon).resolvingSymlinksInPath().path)
        return authctl
    }
}

/// The run's scratch folders, removed at the end.
struct Scratch {
    let memory: String
    let disk: String

    init(memory: String, disk: String) throws {
        let name = "authd-bench-\(getpid())"
        self.memory = memory + "/" + name
        self.disk = disk + "/" + name
        for path in [self.memory, self.disk] {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
    }

    func folder(_ name: String, onDisk: Bool = false) throws -> String {
        let path = (onDisk ? disk : memory) + "/" + name
        try? FileManager.default.removeItem(atPath: path)
        // 0700: in user mode the daemon serves only from a private directory.
        try FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return path
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: memory)
        try? FileManager.default.removeItem(atPath: disk)
    }
}

/// The machine the figures were measured on, for the table's heading.
enum MachineDescription {
    static var current: String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }?
            .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let memory = ProcessInfo.processInfo.physicalMemory / (1 << 30)
        var system = utsname()
        uname(&system)
        let kernel = withUnsafeBytes(of: &system.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let load = ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "").split(separator: " ")
            .prefix(3).joined(separator: " ")
        return "Measured on \(model), \(cores) cores, \(memory) GiB, Linux \(kernel), load average \(load)."
    }
}
