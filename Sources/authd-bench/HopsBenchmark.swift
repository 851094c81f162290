// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import AuthDaemonCommand
import AuthProtocol
import AuthStore
import Foundation
import Logging
import LoopHarness
import Synchronization

/// What each hop of a GetToken and of a SetToken costs (docs/architecture.md's figures): the in-process steps,
/// timed one by one in this process on the daemon's own code, beside the whole round trips to a daemon process
/// and the floor's raw-socket round trip, measured in the same run.
struct HopsBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let rounds = settings.pick(full: 20_000, brief: 1_000)
        let group = try AppGroup("bench")
        let caller = Caller(pid: getpid(), uid: getuid(), gid: getgid())
        let logger = Logger(label: "hops") { _ in SwiftLogNoOpLogHandler() }
        let key = try StoreKey(material: Array(repeating: 9, count: 32))
        let store = try TokenStore(directory: try settings.scratch.folder("hops-store"), key: key, logger: logger)
        let disk = try TokenStore(
            directory: try settings.scratch.folder("hops-disk", onDisk: true), key: key, logger: logger)
        // The service's actor on a loop of its own, as in the daemon.
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: store, records: [], clock: SystemClock(executor: loop.executor), storeWriters: StoreWriters.shared,
            executor: loop.executor, logger: logger)
        let dispatcher = AuthCallDispatcher(service: service, access: AccessControl(owner: getuid()), logger: logger)
        let token = BenchToken.make(exp: Int(Date().timeIntervalSince1970) + 3600, customer: 1)
        _ = try blocking { try await service.setToken(token, for: group) }

        // The anchor: the floor's raw-socket round trip, and the daemon's whole GetToken and SetToken.
        let daemon = try settings.newDaemon("hops")
        try daemon.start()
        defer { daemon.stop() }
        let target = try GetTokenTarget.prepare(daemon)
        let floorSocket = daemon.directory + "/floor.socket"
        let floor = try FloorServer.spawn(socket: floorSocket, replySize: target.replySize)
        defer { floor.terminate() }
        let floorClient = try UnixStream(connectingTo: floorSocket)
        let daemonClient = try UnixStream(connectingTo: daemon.socketPath)
        let calls = settings.pick(full: 5_000, brief: 500)
        _ = try LatencyBenchmark.roundTrips(floorClient, target.bytes, count: calls)
        _ = try LatencyBenchmark.roundTrips(daemonClient, target.bytes, count: calls)
        var floorSamples = try LatencyBenchmark.roundTrips(floorClient, target.bytes, count: calls)
        var getSamples = try LatencyBenchmark.roundTrips(daemonClient, target.bytes, count: calls)
        var setSamples = try LatencyBenchmark.roundTrips(
            daemonClient, Requests.setToken(GetTokenTarget.group, token), count: settings.pick(full: 2_000, brief: 200))
        let floor50 = floorSamples.percentile(0.5)
        func row(_ measure: String, _ nanoseconds: Double) {
            report.add(
                .init(
                    measure: measure, value: String(format: "%.2f µs", nanoseconds / 1_000),
                    baseline: microseconds(floor50), ratio: ratio(nanoseconds, Double(floor50))))
        }
        row("GetToken, whole round trip to the daemon, p50", Double(getSamples.percentile(0.5)))

        // GetToken's hops on the event loop.
        let getCall = Array(Requests.getToken(GetTokenTarget.group).dropLast())
        row(
            "GetToken hop: parse the call (JSONValue, once)",
            try perCall(rounds) { _ = try VarlinkCall(decoding: getCall) })
        let parsed = try VarlinkCall(decoding: Array(Requests.getToken("bench").dropLast()))
        // On the loop, where the transport calls it (the service's state is the actor's, on the loop).
        let answered = try blocking { [self] in
            try await loop.run { _ in
                perCall(rounds) { _ = dispatcher.dispatch(parsed, from: caller, connection: .next()) }
            }
        }
        row("GetToken hop: method, group name, access, the service's kept reply", answered)
        let jwt = try StreamJWT(parsing: token)
        row(
            "GetToken hop: encode the reply (first read after a change)",
            try perCall(rounds) {
                _ = try VarlinkReplyEncoder.reply(
                    GetTokenResult(token: CompactToken(jwt.compact), claims: ClaimsPayload(jwt), generation: 1))
            })

        // SetToken's hops.
        row("SetToken, whole round trip to the daemon (store on tmpfs), p50", Double(setSamples.percentile(0.5)))
        let setCall = Array(Requests.setToken("bench", token).dropLast())
        row(
            "SetToken hop: parse the call and its parameters",
            try perCall(rounds) {
                _ = try VarlinkCall(decoding: setCall).parameters(SetTokenParameters.self)
            })
        row("SetToken hop: parse the JWT (R2)", try perCall(rounds) { _ = try StreamJWT(parsing: token) })
        let writes = settings.pick(full: 500, brief: 50)
        var generation: UInt64 = 10
        let record = { () -> TokenRecord in
            generation += 1
            return TokenRecord(group: group, token: jwt, generation: generation, changedAt: Date())
        }
        row(
            "SetToken hop: store write on tmpfs (seal, write, fsync, rename)",
            try perCall(writes) { try store.save(record()) })
        row(
            "SetToken hop: store write on disk (the same, real fsync)",
            try perCall(writes / 5) { try disk.save(record()) })
        row(
            "SetToken hop: the service (actor, store thread, tmpfs write, commit, events)",
            try perCall(writes) { _ = try blocking { try await service.setToken(token, for: group) } })
        row(
            "SetToken hop: encode the reply",
            try perCall(rounds) {
                _ = try VarlinkReplyEncoder.reply(SetTokenResult(generation: 1, claims: ClaimsPayload(jwt)))
            })
    }

    /// The median cost of one call of `body`, in nanoseconds, over batches of calls.
    private func perCall(_ count: Int, _ body: () throws -> Void) rethrows -> Double {
        let batch = 10
        var samples = Samples()
        for _ in 0..<max(count / batch, 1) {
            let start = monotonicNanoseconds()
            for _ in 0..<batch { try body() }
            samples.append((monotonicNanoseconds() - start) / UInt64(batch))
        }
        return Double(samples.percentile(0.5))
    }
}

/// Runs `body` to its end from synchronous code, as a blocking caller of the service would.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let semaphore = DispatchSemaphore(value: 0)
    let result = Mutex<Result<T, any Error>?>(nil)
    Task {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        semaphore.signal()
    }
    semaphore.wait()
    return try result.withLock { $0 }!.get()
}
