// SPDX-License-Identifier: Apache-2.0
import AuthStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `io.systemd.Metrics.List` of a daemon holding 1,000 groups with tokens: the time from the call to its last
/// reply, beside GetToken's round trip on the same daemon in the same run.
struct MetricsBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    static let list = Array(#"{"method":"io.systemd.Metrics.List","more":true}"#.utf8) + [0]

    func run(_ report: Report) throws {
        let groups = 1_000
        let rounds = settings.pick(full: 200, brief: 10)
        let daemon = try settings.newDaemon("metrics")
        let store = try daemon.openStore()
        let exp = Double(Int(Date().timeIntervalSince1970) + 30 * 24 * 3600)
        try ScaleBenchmark.write(store, (0..<groups).map { ($0, exp) })
        try daemon.start()
        defer { daemon.stop() }
        let request = try GetTokenTarget.prepare(daemon)
        let client = try UnixStream(connectingTo: daemon.socketPath)

        var figures = 0
        var listSamples = Samples()
        var getTokenSamples = Samples()
        _ = try LatencyBenchmark.roundTrips(client, request.bytes, count: rounds)  // warm-up
        for round in 0..<rounds {
            let start = monotonicNanoseconds()
            figures = try Self.listAll(daemon.socketPath)
            if round > 0 { listSamples.append(monotonicNanoseconds() - start) }
            getTokenSamples.append(contentsOf: try LatencyBenchmark.roundTrips(client, request.bytes, count: 10))
        }
        let (list, getToken) = (listSamples.percentile(0.5), getTokenSamples.percentile(0.5))
        report.add(
            .init(
                measure: "io.systemd.Metrics.List, \(groups + 1) groups (\(figures) figures), call to last reply, p50"
                    + " (beside: GetToken on the same daemon)",
                value: milliseconds(list), baseline: microseconds(getToken),
                ratio: ratio(Double(list), Double(getToken)), goal: "<= 5 ms", met: list <= 5_000_000))
    }

    /// Calls List on a connection of its own and reads its replies to the last, in large reads (as a collector
    /// would, and as a client that parses reply by reply would not: that measured the client); how many came.
    static func listAll(_ path: String) throws -> Int {
        let client = try UnixStream(connectingTo: path)
        try client.send(list)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var count = 0
        var tail: [UInt8] = []
        while true {
            let read = buffer.withUnsafeMutableBytes { Glibc.read(client.descriptor, $0.baseAddress!, $0.count) }
            if read < 0 && errno == EINTR { continue }
            guard read > 0 else { throw BenchError.closed }
            count += buffer.withUnsafeBytes { bytes in
                var found = 0
                var at = bytes.baseAddress!
                let end = at + read
                while let nul = memchr(at, 0, end - at) {
                    found += 1
                    at = UnsafeRawPointer(nul) + 1
                }
                return found
            }
            tail = Array((tail + buffer[max(0, read - 32)..<read]).suffix(32))
            // The last reply ends without `"continues":true}` before its NUL.
            if tail.last == 0 && !String(decoding: tail, as: UTF8.self).contains(#""continues":true}"#) {
                return count
            }
        }
    }
}
