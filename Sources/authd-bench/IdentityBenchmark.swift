// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Foundation
import Systemd

/// What finding a peer's unit costs each connection (issue 40), beside the same connection without it, in one run:
/// a client connects, the server accepts and reads the peer's credentials (`SO_PEERCRED`, `SO_PEERGROUPS`), as
/// `VarlinkServer` does, then both close; the measured variant also finds the unit (`PeerUnitResolver`:
/// `SO_PEERPIDFD`, `PIDFD_GET_INFO`, the index of the cgroups' units). The two alternate in blocks, so the machine's
/// noise falls on both. Where the benchmark may, it runs in a cgroup of a unit of its own
/// (`authd-bench-PID.slice/bench.service`), so the lookup finds a unit, as it does for an app.
struct IdentityBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let blocks = settings.pick(full: 40, brief: 4)
        let perBlock = settings.pick(full: 2_000, brief: 500)
        let folder = try settings.scratch.folder("identity")
        let path = folder + "/identity.socket"
        let listener = try Self.listen(at: path)
        defer { close(listener) }
        let unitCgroup = Self.enterUnitCgroup()
        defer { unitCgroup?.leave() }
        let resolver = PeerUnitResolver()

        // The first lookup reads the cgroup tree; its cost is paid once per new cgroup.
        let start = DispatchTime.now().uptimeNanoseconds
        let found = try Self.connection(listener, path, resolver)
        let firstLookup = DispatchTime.now().uptimeNanoseconds - start
        progress("  the unit found: \(found.map(\.description) ?? "none") (\(resolver.index.readings) reading)")

        var without: [Double] = []
        var with: [Double] = []
        for _ in 0..<blocks {
            without.append(try Self.block(perBlock) { _ = try Self.connection(listener, path, nil) })
            with.append(try Self.block(perBlock) { _ = try Self.connection(listener, path, resolver) })
        }
        let base = Self.median(without)
        let measured = Self.median(with)
        let added = measured - base
        report.add(
            .init(
                measure:
                    "connect, accept, credentials, close: with the peer's unit (\(found?.unit ?? "none")) vs without",
                value: microseconds(UInt64(max(0, measured))), baseline: microseconds(UInt64(base)),
                ratio: ratio(measured, base), goal: "<= +50 µs", met: added <= 50_000))
        report.add(
            .init(
                measure: "the peer's unit at connect: added per connection (median of \(blocks) blocks)",
                value: String(format: "%+.1f µs", added / 1_000)))
        report.add(
            .init(
                measure: "the first lookup, which reads the cgroup tree (\(resolver.index.readings) reading)",
                value: microseconds(firstLookup)))
    }

    /// The mean nanoseconds of `count` runs of `body`.
    private static func block(_ count: Int, _ body: () throws -> Void) throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<count { try body() }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count)
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    /// One connection: connect, accept, the peer's credentials (and its unit when `resolver` is given), close.
    private static func connection(
        _ listener: Int32, _ path: String, _ resolver: PeerUnitResolver?
    ) throws -> ProcessUnits? {
        let client = try UnixStream(connectingTo: path)
        let accepted = accept(listener, nil, nil)
        guard accepted >= 0 else { throw BenchError.daemon("accept: \(String(cString: strerror(errno)))") }
        defer {
            close(accepted)
            withExtendedLifetime(client) {}  // closed as it goes: after the server's end
        }
        var credentials = (pid: Int32(0), uid: UInt32(0), gid: UInt32(0))
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(accepted, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0 else {
            throw BenchError.daemon("SO_PEERCRED: \(String(cString: strerror(errno)))")
        }
        var groups = [UInt32](repeating: 0, count: 64)
        var groupsLength = socklen_t(groups.count * 4)
        _ = groups.withUnsafeMutableBytes {
            getsockopt(accepted, SOL_SOCKET, SO_PEERGROUPS, $0.baseAddress, &groupsLength)
        }
        return resolver?.units(ofPeer: accepted, pid: credentials.pid)
    }

    private static func listen(at path: String) throws -> Int32 {
        unlink(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let bound = UnixSocketAddress.withAddress(path) { bind(descriptor, $0, $1) }
        guard bound == 0, Glibc.listen(descriptor, 128) == 0 else {
            throw BenchError.daemon("cannot listen at \(path): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }

    /// This process moved into a cgroup of a unit of its own, and how to move it back.
    struct UnitCgroup {
        let previous: String
        let made: [String]
        func leave() {
            try? "\(getpid())".write(toFile: previous + "/cgroup.procs", atomically: false, encoding: .utf8)
            for path in made.reversed() { rmdir(path) }
        }
    }

    /// Moves this process into `authd-bench-PID.slice/bench.service` of the cgroup v2 tree, where it may.
    private static func enterUnitCgroup() -> UnitCgroup? {
        guard
            let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"].first(where: {
                access($0 + "/cgroup.controllers", F_OK) == 0 && access($0, W_OK) == 0
            }),
            let own = try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)
                .split(separator: "\n").first(where: { $0.hasPrefix("0::") })?.dropFirst(3)
        else { return nil }
        let slice = root + "/authd-bench-\(getpid()).slice"
        let unit = slice + "/bench.service"
        guard mkdir(slice, 0o755) == 0 else { return nil }
        guard mkdir(unit, 0o755) == 0 else {
            rmdir(slice)
            return nil
        }
        let cgroup = UnitCgroup(previous: root + own, made: [slice, unit])
        do {
            try "\(getpid())".write(toFile: unit + "/cgroup.procs", atomically: false, encoding: .utf8)
        } catch {
            cgroup.leave()
            return nil
        }
        return cgroup
    }
}
