// SPDX-License-Identifier: Apache-2.0
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Nanoseconds on the monotonic clock.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Seconds since the Unix epoch on the wall clock, to compare with timestamps other processes print.
func wallClockSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// A set of durations, in nanoseconds, and their percentiles.
struct Samples {
    private(set) var values: [UInt64] = []
    private var sorted = true

    init(_ values: [UInt64] = []) {
        self.values = values
        sorted = false
    }

    mutating func append(_ value: UInt64) {
        values.append(value)
        sorted = false
    }

    mutating func append(contentsOf other: Samples) {
        values += other.values
        sorted = false
    }

    var count: Int { values.count }

    /// The `fraction` percentile (0.5 for the median), by nearest rank.
    mutating func percentile(_ fraction: Double) -> UInt64 {
        guard !values.isEmpty else { return 0 }
        if !sorted {
            values.sort()
            sorted = true
        }
        let rank = Int((fraction * Double(values.count)).rounded(.up)) - 1
        return values[min(max(rank, 0), values.count - 1)]
    }
}

/// Runs `body(index)` on `count` threads of their own, started together, and returns their results in order.
func onThreads<T>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    let results = ThreadResults<T>(count: count)
    var threads: [Thread] = []
    for index in 0..<count {
        let thread = Thread { results.set(index, body(index)) }
        thread.stackSize = 256 * 1024
        threads.append(thread)
    }
    for thread in threads { thread.start() }
    return results.wait()
}

/// Results collected from threads.
private final class ThreadResults<T>: @unchecked Sendable {
    // @unchecked: every access holds `condition`.
    private let condition = NSCondition()
    private var values: [T?]
    private var pending: Int

    init(count: Int) {
        values = Array(repeating: nil, count: count)
        pending = count
    }

    func set(_ index: Int, _ value: T) {
        condition.withLock {
            values[index] = value
            pending -= 1
            condition.broadcast()
        }
    }

    func wait() -> [T] {
        condition.withLock {
            while pending > 0 { condition.wait() }
            return values.map { $0! }
        }
    }
}

/// Raises this process's soft limit on open files to its hard limit: the fan-out benchmark holds a thousand
/// connections.
func raiseOpenFileLimit() {
    var limit = rlimit()
    guard getrlimit(openFilesResource, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    setrlimit(openFilesResource, &limit)
}

private let openFilesResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
