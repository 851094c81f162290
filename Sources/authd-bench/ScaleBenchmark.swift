// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthStore
import Foundation

/// 100,000 app groups with tokens: how long the daemon takes to load them and arm every timer (to
/// `READY=1`), its memory once the start-up is over, and how late the expiry timers fire, seen as `JwtError`
/// (expiredSoon) signals at a D-Bus monitor, in two patterns:
///
/// - 10,000 deadlines spread evenly over 20 s (`exp` with a fraction of a second, as RFC 7519 allows): the
///   timer's accuracy, one signal at a time (the goal);
/// - 500 deadlines in the same second (the same whole-second `exp`): how fast a burst drains through the daemon
///   and `dbus-daemon`, which passes about 40,000 signals a second.
struct ScaleBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let groups = settings.pick(full: 100_000, brief: 2_000)
        let spreadTimers = settings.pick(full: 10_000, brief: 400)
        let burstTimers = settings.pick(full: 500, brief: 100)
        // The spread timers fall due over `spread` seconds, starting `allowance` seconds after the records are
        // written (time enough to start the daemon); the burst a second after the last of them.
        let spread = settings.pick(full: 20, brief: 2)
        let allowance = settings.pick(full: 10, brief: 3)
        let timers = spreadTimers + burstTimers
        let daemon = try settings.newDaemon("scale")
        let store = try daemon.openStore()

        progress("  writing \(groups) records")
        let longExp = Double(Int(Date().timeIntervalSince1970) + 30 * 24 * 3600)
        try Self.write(store, (timers..<groups).map { ($0, longExp) })
        // expiredSoon falls due 60 s before exp.
        let first = Double(Int(Date().timeIntervalSince1970) + allowance)
        let spreadDeadlines = (0..<spreadTimers).map { first + Double(spread) * Double($0) / Double(spreadTimers) }
        let burstDeadline = first + Double(spread + 1)
        try Self.write(store, spreadDeadlines.enumerated().map { ($0.offset, $0.element + 60) })
        try Self.write(store, (spreadTimers..<timers).map { ($0, burstDeadline + 60) })

        let bus = try PrivateBusDaemon(directory: try settings.scratch.folder("scale-bus"))
        defer { bus.stop() }
        let monitor = try SignalMonitor(address: bus.address, member: "JwtError")
        defer { monitor.stop() }
        // Three starts on the same store, the median kept: one start on a shared 2-core machine varies by a fifth.
        // The timers' first deadline is `allowance` seconds away, time enough for the two extra starts.
        var startups: [Duration] = []
        for _ in 0..<(settings.short ? 0 : 2) {
            startups.append(try daemon.start(busAddress: bus.address))
            daemon.stop()
        }
        startups.append(try daemon.start(busAddress: bus.address))
        let ready = wallClockSeconds()
        defer { daemon.stop() }
        // The memory it holds once the start-up is over, not at READY=1: the start-up hands its pages back after.
        try daemon.settle(calling: ["g000000"])
        let memory = daemon.memory
        startups.sort()
        let startup = startups[startups.count / 2]
        let whole = { (duration: Duration) in duration / .milliseconds(1) }
        let spreadText =
            startups.count > 1
            ? " (median of \(startups.count), \(Int(whole(startups.first!)))-\(Int(whole(startups.last!))) ms)" : ""
        report.add(
            .init(
                measure: "Start-up with \(groups) groups (load, arm timers, READY=1)",
                value: Self.ms(startup) + spreadText, goal: "< 1 s", met: startup < .seconds(1)))
        report.add(
            .init(
                measure: "Memory with \(groups) groups once the start-up is over, RSS (peak during it)",
                value: String(format: "%.1f MiB (%.1f)", Double(memory.resident) / 1024, Double(memory.peak) / 1024),
                goal: "< 64 MiB", met: memory.resident < 64 * 1024))

        progress("  waiting \(Int(burstDeadline - ready) + 1) s for \(timers) timers")
        var arrivals: [Double] = []
        while arrivals.count < timers, let arrival = monitor.next(timeout: burstDeadline - wallClockSeconds() + 10) {
            arrivals.append(arrival)
        }
        guard arrivals.count == timers else {
            throw BenchError.daemon("\(arrivals.count) of \(timers) expiredSoon signals arrived; see \(daemon.logPath)")
        }
        // The k-th signal answers the k-th deadline: timers fire in deadline order. Deadlines that passed before
        // the daemon was ready fire at start and say nothing of the timer.
        let deadlines = spreadDeadlines + Array(repeating: burstDeadline, count: burstTimers)
        let sorted = arrivals.sorted()
        Self.addLateness(
            report, "\(spreadTimers) deadlines spread over \(spread) s",
            zip(deadlines.prefix(spreadTimers), sorted.prefix(spreadTimers)), ready: ready, goal: true)
        Self.addLateness(
            report, "\(burstTimers) deadlines in the same second",
            zip(deadlines.suffix(burstTimers), sorted.suffix(burstTimers)), ready: ready, goal: false)
    }

    private static func addLateness(
        _ report: Report, _ pattern: String, _ pairs: some Sequence<(Double, Double)>, ready: Double, goal: Bool
    ) {
        var lateness = Samples()
        var early = 0
        for (deadline, arrival) in pairs where deadline > ready {
            if arrival < deadline { early += 1 }
            lateness.append(UInt64(max(0, arrival - deadline) * 1e9))
        }
        report.add(
            .init(
                measure: "Timer lateness at a D-Bus monitor, \(pattern), \(lateness.count) seen, p50 / p99 / max"
                    + (early > 0 ? " (\(early) early)" : ""),
                value: "\(milliseconds(lateness.percentile(0.5))) / \(milliseconds(lateness.percentile(0.99)))"
                    + " / \(milliseconds(lateness.percentile(1)))",
                goal: goal ? "p99 < 10 ms" : "",
                met: goal ? early == 0 && lateness.percentile(0.99) < 10_000_000 : nil))
    }

    /// Writes one record per (group index, exp) on two threads.
    static func write(_ store: TokenStore, _ records: [(Int, Double)]) throws {
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

    private static func ms(_ duration: Duration) -> String { milliseconds(UInt64(duration / .nanoseconds(1))) }
}
