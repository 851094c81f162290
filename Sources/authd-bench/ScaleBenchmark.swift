import AuthCore
import AuthStore
import Foundation

/// 100,000 app groups with tokens: how long the daemon takes to load them and arm every timer (to
/// `READY=1`), its memory, and how late the expiry timers fire: the `expiredSoon` signals of 10,000 of the
/// groups fall due while the benchmark watches.
struct ScaleBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let groups = settings.pick(full: 100_000, brief: 2_000)
        let timers = settings.pick(full: 10_000, brief: 500)
        // The timers fall due over `spread` seconds, starting `allowance` seconds after the records are written:
        // time enough to start the daemon.
        let spread = settings.pick(full: 20, brief: 2)
        let allowance = settings.pick(full: 8, brief: 3)
        let daemon = try settings.newDaemon("scale")
        let store = try daemon.openStore()

        progress("  writing \(groups) records")
        let longExp = Int(Date().timeIntervalSince1970) + 30 * 24 * 3600
        try Self.write(store, (timers..<groups).map { ($0, longExp) })
        let first = Int(Date().timeIntervalSince1970) + allowance + 60
        let timed = (0..<timers).map { ($0, first + $0 % spread) }
        try Self.write(store, timed)
        let deadlines = timed.map { Double($0.1 - 60) }.sorted()

        let bus = try PrivateBusDaemon(directory: try settings.scratch.folder("scale-bus"))
        defer { bus.stop() }
        let monitor = try SignalMonitor(address: bus.address, member: "JwtError")
        defer { monitor.stop() }
        let startup = try daemon.start(busAddress: bus.address)
        let ready = wallClockSeconds()
        defer { daemon.stop() }
        let memory = daemon.memory
        report.add(
            .init(
                measure: "Start-up with \(groups) groups (load, arm timers, READY=1)",
                value: milliseconds(UInt64(startup / .nanoseconds(1))), goal: "< 1 s",
                met: startup < .seconds(1)))
        report.add(
            .init(
                measure: "Memory with \(groups) groups, RSS (peak)",
                value: String(format: "%.1f MiB (%.1f)", Double(memory.resident) / 1024, Double(memory.peak) / 1024),
                goal: "< 64 MiB", met: memory.resident < 64 * 1024))

        progress("  waiting \(Int(deadlines.last! - ready) + 1) s for \(timers) timers")
        var arrivals: [Double] = []
        while arrivals.count < timers, let arrival = monitor.next(timeout: deadlines.last! - wallClockSeconds() + 10) {
            arrivals.append(arrival)
        }
        guard arrivals.count == timers else {
            throw BenchError.daemon("\(arrivals.count) of \(timers) expiredSoon signals arrived; see \(daemon.logPath)")
        }
        // The k-th signal answers the k-th deadline: timers fire in deadline order. Deadlines that passed before
        // the daemon was ready fire at start and say nothing of the timer.
        var lateness = Samples()
        var early = 0
        for (deadline, arrival) in zip(deadlines, arrivals.sorted()) where deadline > ready {
            if arrival < deadline { early += 1 }
            lateness.append(UInt64(max(0, arrival - deadline) * 1e9))
        }
        report.add(
            .init(
                measure:
                    "Timer lateness, seen as JwtError at a D-Bus monitor, \(lateness.count) timers, p50 / p99 / max"
                    + (early > 0 ? " (\(early) early)" : ""),
                value: "\(milliseconds(lateness.percentile(0.5))) / \(milliseconds(lateness.percentile(0.99)))"
                    + " / \(milliseconds(lateness.percentile(1)))",
                goal: "p99 < 10 ms", met: early == 0 && lateness.percentile(0.99) < 10_000_000))
    }

    /// Writes one record per (group index, exp) on two threads.
    static func write(_ store: TokenStore, _ records: [(Int, Int)]) throws {
        let shared = UnsafeSendable(store)
        let failures = onThreads(2) { part in
            for (index, exp) in records[(records.count * part / 2)..<(records.count * (part + 1) / 2)] {
                do {
                    let token = try StreamJWT(parsing: BenchToken.make(exp: exp, customer: index))
                    let record = TokenRecord(
                        group: try AppGroup(String(format: "g%06d", index)), token: token, generation: 1,
                        changedAt: Date())
                    try shared.value.save(record)
                } catch {
                    return "\(error)"
                }
            }
            return ""
        }
        if let failure = failures.first(where: { !$0.isEmpty }) { throw BenchError.daemon(failure) }
    }
}
