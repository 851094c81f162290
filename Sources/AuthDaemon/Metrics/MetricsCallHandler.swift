// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTransport
import Systemd

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Answers `io.systemd.Metrics`: `List` streams the daemon's figures, `Describe` its families (``MetricFamily``).
///
/// A caller sees the per-group figures of the groups it may use only, and the count of groups by state over
/// those; root (and the daemon's own user, and in user mode its owner) sees every group. The figures of the
/// calls, connections, store and daemon are the whole daemon's.
struct MetricsCallHandler: VarlinkCallHandler {
    let service: AuthService
    /// The `com.exponea.Auth` calls' handler, which counts them and holds the access in force.
    let dispatcher: AuthCallDispatcher
    let connections: LoopBound<ConnectionCounters>
    let lifetime: LoopBound<DaemonLifetime>

    func dispatch(_ call: VarlinkCall, from caller: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch {
        do {
            if call.hasMethod(Self.listMethod) {
                try checkCall(call)
                // The groups' figures are the service's: read in its turn.
                return .later { replies in
                    let reply = call.oneway ? VarlinkReplies.discarded : replies
                    try? reply.send(await list(for: caller))
                }
            }
            if call.hasMethod(Self.describeMethod) {
                try checkCall(call)
                return .reply(try Self.describe(), to: call)
            }
            throw VarlinkError.methodNotFound(call.method)
        } catch let error as VarlinkError {
            return .error(error, to: call)
        } catch {
            return .error(.invalidParameter("parameters"), to: call)
        }
    }

    private static let listMethod = Array(MetricsInterface.list.utf8)
    private static let describeMethod = Array(MetricsInterface.describe.utf8)

    /// Both methods stream (`more`) and take no parameter, as sd-varlink's dispatch with no table refuses any.
    private func checkCall(_ call: VarlinkCall) throws(VarlinkError) {
        guard call.more else { throw .expectedMore }
        _ = try call.parameters(EmptyPayload.self)
    }

    /// Every figure `caller` may see, as framed replies.
    private func list(for caller: Caller) async -> [UInt8] {
        var writer = MetricsReplyWriter()
        let access = dispatcher.onLoop { $0.currentAccess }
        if access.allowsEveryGroup(caller) {
            await service.writeMetrics(&writer) { _ in true }
        } else {
            await service.writeMetrics(&writer) { [access] in access.allows(caller, $0) }
        }
        let calls = await dispatcher.callCounts()
        for (method, result, count) in calls {
            writer.append(
                name: MetricFamily.calls.name,
                fields: [("method", method?.rawValue ?? "unknown"), ("result", result.rawValue)],
                value: .unsigned(count))
        }
        for (method, result, count) in calls where result == .permissionDenied {
            writer.append(
                name: MetricFamily.denials.name, fields: [("method", method?.rawValue ?? "unknown")],
                value: .unsigned(count))
        }
        let connections = connections.value
        writer.append(name: MetricFamily.connections.name, value: .unsigned(UInt64(connections.connections)))
        for reason in ConnectionCounters.Refusal.allCases {
            writer.append(
                name: MetricFamily.connectionsRefused.name, fields: [("reason", reason.rawValue)],
                value: .unsigned(connections.refused(reason)))
        }
        let lifetime = lifetime.value
        if let startup = lifetime.startupSeconds {
            writer.append(name: MetricFamily.startupDuration.name, value: .double(startup))
        }
        writer.append(name: MetricFamily.uptime.name, value: .double(lifetime.uptimeSeconds))
        writer.append(name: MetricFamily.version.name, value: .string(lifetime.version))
        return writer.finish()
    }

    /// Every family, one reply each.
    static func describe() throws -> [UInt8] {
        let families = MetricFamily.allCases
        var bytes: [UInt8] = []
        for (index, family) in families.enumerated() {
            bytes += try VarlinkReplyEncoder.reply(family.described, continues: index < families.count - 1)
        }
        return bytes
    }
}

/// When the daemon started and how long its start took, for the metrics. It belongs to the loop, which marks it
/// ready and whose metrics read it: not `Sendable`, so it needs no lock.
final class DaemonLifetime {
    let version: String
    private let started: ContinuousClock.Instant
    /// Seconds from the start to ready; nil until ready.
    private(set) var startupSeconds: Double?

    /// - Parameter started: When the process started (``processStart()``).
    init(version: String, started: ContinuousClock.Instant) {
        self.version = version
        self.started = started
    }

    /// When this process started, by the kernel's count (`/proc/self/stat`), to 10 ms; now if it cannot be read.
    static func processStart() -> ContinuousClock.Instant {
        let now = ContinuousClock.now
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
            let end = stat.lastIndex(of: ")")
        else { return now }
        // After the command's closing parenthesis: field 3 onwards; the start time is field 22.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 19, let ticks = Double(fields[19]) else { return now }
        var boot = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &boot) == 0 else { return now }
        let age = Double(boot.tv_sec) + Double(boot.tv_nsec) / 1e9 - ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        return now - .milliseconds(Int64(max(age, 0) * 1000))
    }

    /// Seconds since the start.
    var uptimeSeconds: Double { Self.seconds(started.duration(to: .now)) }

    /// The daemon is ready (its socket is served and its service started).
    func becameReady() {
        if startupSeconds == nil { startupSeconds = uptimeSeconds }
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
