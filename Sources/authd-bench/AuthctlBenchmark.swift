// SPDX-License-Identifier: Apache-2.0
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `authctl` as a script runs it: one process per command, from `exec` to exit, beside `busctl --version` (a
/// small C tool linked against libsystemd) measured in the same run, in interleaved rounds so that a change of
/// load hits every command alike.
///
/// - Wall time of `authctl get GROUP` and of `authctl status` against a daemon holding 10,000 groups, each the
///   median over the rounds.
/// - Peak RSS of each, as GNU time reports it (`/usr/bin/time -f %M`): the `ru_maxrss` of a child spawned from
///   this process would be this process's own size, which the kernel records at `exec` after a `vfork`.
///
/// Measure a release build linked as a device's is (`scripts/build-release --product authd-bench`): authctl is
/// run as a device runs it, through a link named `authctl` to the daemon's binary (the one binary installed),
/// not the development product `authctl` that may lie beside it.
struct AuthctlBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let authctl = try settings.authctlLink(in: "authctl-link")
        let busctl = "/usr/bin/busctl"
        guard FileManager.default.isExecutableFile(atPath: busctl) else {
            progress("  skipped: no \(busctl) to measure beside")
            return
        }
        let groups = 10_000
        let rounds = settings.pick(full: 200, brief: 20)
        let daemon = try settings.newDaemon("authctl")
        let exp = Double(Int(Date().timeIntervalSince1970) + 7 * 24 * 3600)
        try ScaleBenchmark.write(try daemon.openStore(), (0..<groups).map { ($0, exp) })
        try daemon.start()
        defer { daemon.stop() }
        let environment = ["EXPONEA_AUTHD_SOCKET=\(daemon.socketPath)", "PATH=/usr/bin:/bin", "TZ=UTC"]

        let commands: [(name: String, argv: [String])] = [
            ("busctl", [busctl, "--version"]),
            ("get", [authctl, "get", "g000000"]),
            ("status", [authctl, "status"]),
        ]
        // Each command once first, so that every binary's pages are in the page cache; then checked.
        for command in commands {
            let status = try Self.spawn(command.argv, environment: environment).status
            guard status == 0 else {
                throw BenchError.daemon("'\(command.argv.joined(separator: " "))' exited with status \(status)")
            }
        }
        progress("  \(rounds) interleaved rounds of busctl --version, authctl get, authctl status (\(groups) groups)")
        var times = Array(repeating: Samples(), count: commands.count)
        for round in 0..<rounds {
            // A different first command each round: none always runs right after another's exit.
            for offset in 0..<commands.count {
                let index = (round + offset) % commands.count
                times[index].append(try Self.spawn(commands[index].argv, environment: environment).nanoseconds)
            }
        }
        let wall = times.indices.map { times[$0].percentile(0.5) }
        let measuredPeaks = try commands.map { command in
            try Self.peakKiB(command.argv, environment: environment, runs: 5, in: daemon.directory)
        }
        let (busctlTime, getTime, statusTime) = (Double(wall[0]), Double(wall[1]), Double(wall[2]))

        report.add(
            .init(
                measure: "`authctl get`, wall time per run (median of \(rounds))",
                value: milliseconds(wall[1]),
                baseline: "busctl --version \(milliseconds(wall[0]))",
                ratio: ratio(getTime, busctlTime),
                goal: "<= 1.5x busctl", met: getTime <= 1.5 * busctlTime))
        report.add(
            .init(
                measure: "`authctl status` with \(groups) groups, wall time per run",
                value: milliseconds(wall[2]),
                baseline: "authctl get \(milliseconds(wall[1]))",
                ratio: ratio(statusTime, getTime),
                goal: "<= 1.2x get", met: statusTime <= 1.2 * getTime))
        let peaks = measuredPeaks.compactMap { $0 }
        guard peaks.count == commands.count else {
            progress("  no peak RSS rows: /usr/bin/time (GNU time) is not installed")
            return
        }
        let peak = peaks.map { Double($0) / 1024 }
        report.add(
            .init(
                measure: "`authctl get`, peak RSS",
                value: String(format: "%.1f MB", peak[1] * 1.048576),
                baseline: String(format: "busctl --version %.1f MB", peak[0] * 1.048576),
                ratio: ratio(peak[1], peak[0]),
                goal: "<= 8 MB", met: peak[1] * 1.048576 <= 8))
        report.add(
            .init(
                measure: "`authctl status` with \(groups) groups, peak RSS",
                value: String(format: "%.1f MB", peak[2] * 1.048576),
                baseline: String(format: "busctl --version %.1f MB", peak[0] * 1.048576),
                ratio: ratio(peak[2], peak[0]),
                goal: "<= 8 MB", met: peak[2] * 1.048576 <= 8))
    }

    /// Runs `argv` with `environment`, standard input, output and error on `/dev/null`, and waits for it.
    ///
    /// - Returns: Its exit status, and its wall time from spawn to exit.
    @discardableResult
    static func spawn(_ argv: [String], environment: [String]) throws -> (status: Int32, nanoseconds: UInt64) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for descriptor: Int32 in 0...2 {
            posix_spawn_file_actions_addopen(
                &actions, descriptor, "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        let arguments = argv.map { strdup($0) } + [nil]
        let variables = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in arguments + variables { free(pointer) }
        }
        var pid: pid_t = 0
        let started = monotonicNanoseconds()
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, arguments, variables)
        guard spawned == 0 else {
            throw BenchError.daemon("cannot start \(argv[0]): \(String(cString: strerror(spawned)))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let elapsed = monotonicNanoseconds() - started
        let exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (exitStatus, elapsed)
    }

    /// The median peak RSS in KiB of `runs` runs of `argv`, measured by GNU time; nil without it.
    static func peakKiB(_ argv: [String], environment: [String], runs: Int, in folder: String) throws -> Int? {
        let time = "/usr/bin/time"
        guard FileManager.default.isExecutableFile(atPath: time) else { return nil }
        let output = folder + "/peak-rss"
        var peaks: [Int] = []
        for _ in 0..<runs {
            let status = try spawn([time, "-f", "%M", "-o", output] + argv, environment: environment).status
            let text = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
            guard status == 0, let kib = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw BenchError.daemon("'\(argv.joined(separator: " "))' under GNU time: status \(status), \(text)")
            }
            peaks.append(kib)
        }
        return peaks.sorted()[runs / 2]
    }
}
