// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A device daemon's footprint while idle, beside two daemons every such device runs, measured in the same
/// window: `ssh-agent` and a `dbus-daemon` with a private configuration.
///
/// - Idle RSS (`VmRSS`) of the daemon holding a few groups, after a start and a few calls, and what it is made
///   of (`/proc/PID/smaps`): anonymous memory (heaps, thread stacks), the pages of the daemon's own binary, and
///   those of the shared libraries; and the threads it runs.
/// - Idle wake-ups over all threads: the growth of `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches`
///   summed over `/proc/PID/task/*` (threads that end or start in the window count with what they had), over
///   60 s (5 s in a short run). The daemon runs without a watchdog (whose pings are wake-ups by design).
/// - The installed size: the daemon and `authctl` built next to it, stripped.
///
/// Measure a release build with the Swift runtime linked in (`swift build -c release --static-swift-stdlib`),
/// as a device installs it; a debug build maps much more.
struct FootprintBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let seconds = settings.pick(full: 60, brief: 5)
        let daemon = try settings.newDaemon("footprint")
        let store = try daemon.openStore()
        let exp = Double(Int(Date().timeIntervalSince1970) + 7 * 24 * 3600)
        try ScaleBenchmark.write(store, (0..<3).map { ($0, exp) })

        let bus = try PrivateBusDaemon(directory: try settings.scratch.folder("footprint-bus"))
        defer { bus.stop() }
        try daemon.start(busAddress: bus.address)
        defer { daemon.stop() }
        // Idle means settled: the daemon's bus connection comes up on its own after READY=1 (its name request and
        // the bus's answers would count as wake-ups in the window); a few calls then map the daemon's paths for
        // them, as on a device in use.
        try daemon.settle(calling: ["g000000", "g000001", "g000002"])
        let agentFolder = try settings.scratch.folder("footprint-agent")
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: "/usr/bin/ssh-agent")
        agent.arguments = ["-D", "-a", agentFolder + "/agent.socket"]
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        defer {
            agent.terminate()
            agent.waitUntilExit()
        }
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: agentFolder + "/agent.socket") {
            usleep(10_000)
        }

        progress("  idle for \(seconds) s")
        let pids = [daemon.pid, agent.processIdentifier, bus.pid]
        let before = pids.map(Self.switches)
        sleep(UInt32(seconds))
        let after = pids.map(Self.switches)
        let wakeups = zip(before, after).map { before, after in
            Double(after.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }) / Double(seconds)
        }
        let resident = pids.map { Double(Self.residentKiB($0)) / 1024 }
        // Which of the daemon's threads woke, for whoever has to find out why.
        for (task, count) in after[0].sorted(by: { $0.key < $1.key }) where count != before[0][task] {
            let name = (try? String(contentsOfFile: "/proc/\(pids[0])/task/\(task)/comm", encoding: .utf8)) ?? "?"
            progress(
                "  thread \(task) (\(name.trimmingCharacters(in: .whitespacesAndNewlines))) woke \(count - (before[0][task] ?? 0)) times"
            )
        }
        let parts = pids.map { Self.residentParts($0) }
        let threads = pids.map { Self.threads($0) }
        let woken = zip(before, after).map { before, after in
            after.reduce(0) { $0 + $1.value - (before[$1.key] ?? 0) }
        }

        report.add(
            .init(
                measure: "Idle RSS with 3 groups",
                value: String(format: "%.1f MiB", resident[0]),
                baseline: String(format: "ssh-agent %.1f, dbus-daemon %.1f MiB", resident[1], resident[2]),
                ratio: String(format: "%.1fx dbus-daemon", resident[0] / max(resident[2], 0.1)),
                goal: "<= 6 MiB", met: resident[0] <= 6))
        func describe(_ part: (anonymous: Int, binary: Int, libraries: Int)) -> String {
            String(
                format: "%.1f anon + %.1f binary + %.1f libs", Double(part.anonymous) / 1024,
                Double(part.binary) / 1024, Double(part.libraries) / 1024)
        }
        report.add(
            .init(
                measure: "Idle RSS parts, MiB (anonymous, own binary's pages, shared libraries)",
                value: describe(parts[0]),
                baseline: "ssh-agent \(describe(parts[1])); dbus-daemon \(describe(parts[2]))",
                goal: "anonymous <= 1.5 MiB", met: parts[0].anonymous <= 1536))
        report.add(
            .init(
                measure: "Threads while idle", value: "\(threads[0])",
                baseline: "ssh-agent \(threads[1]), dbus-daemon \(threads[2])", goal: "1", met: threads[0] == 1))
        report.add(
            .init(
                measure: "Idle wake-ups over all threads in \(seconds) s (no watchdog)",
                value: "\(woken[0]) (\(String(format: "%.2f", wakeups[0]))/s)",
                baseline: "ssh-agent \(woken[1]), dbus-daemon \(woken[2])",
                goal: "0", met: woken[0] == 0))
        if let (size, names) = try installedSize() {
            report.add(
                .init(
                    measure: "Installed size (\(names.joined(separator: " and ")), stripped)",
                    value: String(format: "%.1f MiB", Double(size) / 1_048_576),
                    goal: "<= 18 MiB", met: size <= 18 * 1_048_576))
        }
    }

    /// Context switches so far of each thread of `pid`, by thread id.
    static func switches(_ pid: Int32) -> [String: Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var counts: [String: Int] = [:]
        for task in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else {
                continue
            }
            counts[task] = status.split(separator: "\n").filter { $0.contains("ctxt_switches:") }
                .reduce(0) { $0 + (Int($1.split(separator: "\t").last ?? "") ?? 0) }
        }
        return counts
    }

    /// The resident KiB of `pid` in three parts, from `/proc/PID/smaps`: anonymous pages (heaps, stacks, also
    /// those of file mappings written to), the file pages of its own executable, and the file pages of every
    /// other file (the shared libraries).
    static func residentParts(_ pid: Int32) -> (anonymous: Int, binary: Int, libraries: Int) {
        // Read to the end: /proc files say they are empty, and a read that trusts the size stops early.
        guard let handle = FileHandle(forReadingAtPath: "/proc/\(pid)/smaps") else { return (0, 0, 0) }
        defer { try? handle.close() }
        let smaps = String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) ?? ""
        var parts = (anonymous: 0, binary: 0, libraries: 0)
        var path = ""
        var rss = 0
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let key = fields.first, fields.count > 1 else { continue }
            if key.contains("-"), !key.hasSuffix(":") {
                path = fields.count > 5 ? fields[5...].joined(separator: " ") : ""
            } else if key == "Rss:" {
                rss = Int(fields[1]) ?? 0
            } else if key == "Anonymous:" {
                let anonymous = Int(fields[1]) ?? 0
                parts.anonymous += anonymous
                if path == executable {
                    parts.binary += rss - anonymous
                } else if path.hasPrefix("/") {
                    parts.libraries += rss - anonymous
                }
            }
        }
        return parts
    }

    /// How many threads `pid` runs.
    static func threads(_ pid: Int32) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).count
    }

    static func residentKiB(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }

    /// The stripped size of the daemon and of the authctl beside it (when there is one), with the names
    /// counted, or nil when `strip` is missing.
    private func installedSize() throws -> (Int, [String])? {
        // The package installs one binary: /usr/bin/authctl is a link to exponea-authd (the development build's
        // separate authctl is not shipped).
        let folder = try settings.scratch.folder("footprint-strip")
        var total = 0
        var names: [String] = []
        for binary in [settings.daemon] where FileManager.default.fileExists(atPath: binary) {
            names.append((binary as NSString).lastPathComponent + ", which is authctl too")
            let copy = folder + "/" + (binary as NSString).lastPathComponent
            try? FileManager.default.removeItem(atPath: copy)
            try FileManager.default.copyItem(atPath: binary, toPath: copy)
            let strip = Process()
            strip.executableURL = URL(fileURLWithPath: "/usr/bin/strip")
            strip.arguments = [copy]
            guard (try? strip.run()) != nil else { return nil }
            strip.waitUntilExit()
            let attributes = try FileManager.default.attributesOfItem(atPath: copy)
            total += (attributes[.size] as? Int) ?? 0
        }
        return (total, names)
    }
}
