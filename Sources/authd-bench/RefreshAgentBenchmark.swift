// SPDX-License-Identifier: Apache-2.0
import CEpoll
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// N refresh agents (`authctl refresh-agent`, each a process) and M subscribed apps meet the same expiry: how
/// many times the refresh command ran (R28: once), and how long from the expiry event to the new token's
/// `tokenRefreshed` at every subscriber. The command mints with `authctl mint`, so its own start is included.
struct RefreshAgentBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    static let group = "agents"
    static let agentCount = 10
    static let appCount = 1_000

    func run(_ report: Report) throws {
        // As a device runs it (a full release run builds no authctl product beside the daemon).
        let authctl = try settings.authctlLink(in: "agents-authctl")
        let daemon = try settings.newDaemon("agents")
        try daemon.start()
        defer { daemon.stop() }
        let runs = daemon.directory + "/runs"
        let script = try writeCommand(in: daemon.directory, authctl: authctl, runs: runs)

        let control = try UnixStream(connectingTo: daemon.socketPath)
        let exp = Int(Date().timeIntervalSince1970) + 3600
        try control.call(Requests.setToken(Self.group, BenchToken.make(exp: exp, customer: 0)))
        let agents = try (0..<Self.agentCount).map { index in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: authctl)
            process.arguments = ["refresh-agent", Self.group, "--socket", daemon.socketPath, "--", script]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            return process
        }
        defer { for agent in agents { agent.terminate() } }
        let apps = try (0..<Self.appCount).map { _ in try UnixStream(connectingTo: daemon.socketPath) }
        for app in apps { try app.send(Requests.subscribe(Self.group)) }
        try waitForSubscribers(Self.appCount + Self.agentCount, control: control)

        let rounds = settings.pick(full: 10, brief: 2)
        var handover = Samples()
        var commandRuns: [Int] = []
        for round in 1...rounds {
            let before = lines(runs)
            // A token in its last minute: the daemon sends expiredSoon at once.
            let expiring = BenchToken.make(exp: Int(Date().timeIntervalSince1970) + 30, customer: round)
            try control.send(Requests.setToken(Self.group, expiring))
            let generation = try setGeneration(control)
            handover.append(try collect(apps, expiredSoon: generation, refreshed: generation + 1))
            commandRuns.append(lines(runs) - before)
        }
        let runsText = commandRuns.allSatisfy { $0 == 1 } ? "1 each round" : "\(commandRuns)"
        report.add(
            .init(
                measure: "Refresh agents: \(Self.agentCount) agents, \(Self.appCount) apps, one expiry, command runs",
                value: runsText, goal: "1", met: commandRuns.allSatisfy { $0 == 1 }))
        report.add(
            .init(
                measure:
                    "Refresh agents: expiredSoon to the new token at all \(Self.appCount) apps, p50 / max (command included)",
                value: "\(milliseconds(handover.percentile(0.5))) / \(milliseconds(handover.percentile(1)))"))
        for app in apps { shutdown(app.descriptor, Int32(SHUT_RDWR)) }
    }

    /// The refresh command: counts its runs, then mints a token valid for an hour.
    private func writeCommand(in directory: String, authctl: String, runs: String) throws -> String {
        let key = directory + "/stream.key"
        _ = FileManager.default.createFile(
            atPath: key, contents: Data("bench-secret".utf8), attributes: [.posixPermissions: 0o600])
        let script = directory + "/refresh.sh"
        let text = """
            #!/bin/sh
            echo run >> \(runs)
            exec \(authctl) mint --secret-file \(key) --id registered=bench --ttl 3600

            """
        _ = FileManager.default.createFile(
            atPath: script, contents: Data(text.utf8), attributes: [.posixPermissions: 0o755])
        return script
    }

    private func lines(_ path: String) -> Int {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    private func setGeneration(_ control: UnixStream) throws -> UInt64 {
        let reply = String(decoding: try control.receive(), as: UTF8.self)
        guard let match = reply.firstMatch(of: /"generation":(\d+)/), let generation = UInt64(match.output.1) else {
            throw BenchError.unexpectedReply(reply)
        }
        return generation
    }

    private func waitForSubscribers(_ count: Int, control: UnixStream) throws {
        for _ in 0..<2_000 {
            try control.send(Requests.listGroups)
            let reply = String(decoding: try control.receive(), as: UTF8.self)
            if reply.contains(#""subscribers":\#(count)"#) { return }
            usleep(10_000)
        }
        throw BenchError.daemon("the daemon did not count \(count) subscribers in 20 s")
    }

    /// Reads every app's events until each has the `tokenRefreshed` of `refreshed`; returns the nanoseconds from
    /// the first `expiredSoon` of `expiredSoon` any app saw to the last app's new token.
    private func collect(_ apps: [UnixStream], expiredSoon: UInt64, refreshed: UInt64) throws -> UInt64 {
        let poller = epoll_create1(Int32(EPOLL_CLOEXEC))
        defer { close(poller) }
        for (index, app) in apps.enumerated() {
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(u64: UInt64(index)))
            epoll_ctl(poller, EPOLL_CTL_ADD, app.descriptor, &event)
        }
        var expiryAt: UInt64?
        var lastArrival: UInt64 = 0
        var pending = Set(apps.indices)
        var ready = [epoll_event](repeating: epoll_event(), count: 1024)
        let expiry = #""kind":"jwtError""#
        let newToken = #""kind":"tokenRefreshed""#
        while !pending.isEmpty {
            let count = epoll_wait(poller, &ready, Int32(ready.count), 30_000)
            guard count > 0 else { throw BenchError.daemon("\(pending.count) apps got no new token within 30 s") }
            let now = monotonicNanoseconds()
            for slot in ready[..<Int(count)] {
                let index = Int(slot.data.u64)
                repeat {
                    let message = String(decoding: try apps[index].receive(), as: UTF8.self)
                    if expiryAt == nil, message.contains(expiry), message.contains(#""generation":\#(expiredSoon)"#) {
                        expiryAt = now
                    }
                    if message.contains(newToken), message.contains(#""generation":\#(refreshed)"#),
                        pending.remove(index) != nil
                    {
                        lastArrival = now
                    }
                } while apps[index].hasBufferedMessage
            }
        }
        guard let expiryAt else { throw BenchError.daemon("no app saw the expiredSoon event") }
        return lastArrival - expiryAt
    }
}
