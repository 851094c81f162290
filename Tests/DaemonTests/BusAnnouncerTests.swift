// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemonCommand
import AuthProtocol
import AuthStore
import AuthTestKit
import Foundation
import Logging
import Synchronization
import Systemd
import Testing

@testable import AuthDaemon

@Suite("D-Bus signals from the service's events", .offPool)
struct BusAnnouncerTests {
    @Test func theServicesEventsBecomeSignalsWithoutTokensOrIds() async throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        let logs = LogCapture()
        let attemptsEnded = AttemptsEnded()
        let (thread, announcer) = try Self.announcer(
            on: .address(bus.address), logger: logs.logger(), firstAttemptEnded: attemptsEnded)
        defer { thread.stop() }
        #expect(await logs.waitForEntry { $0.message == "Announcing on D-Bus" })
        #expect(announcer.isConnected)  // on the loop's thread: after the turn that owned the name
        #expect(attemptsEnded.count == 1)

        let monitor = try BackgroundProcess(
            "/usr/bin/dbus-monitor",
            ["--address", bus.address, "type='signal',interface='\(BusAnnouncer.interface)'"]
        )
        defer { monitor.stop() }
        // The monitor is in place once the bus took its name away (it became a monitor).
        #expect(monitor.waitForOutput { $0.contains("member=NameLost") })

        let directory = try TemporaryDirectory(prefix: "authd-announce")
        defer { directory.remove() }
        let store = try TokenStore(
            directory: directory.appending("state"),
            key: StoreKey(material: Array(repeating: 1, count: 32)),
            logger: Logger(label: "test")
        )
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: store, records: [], clock: SystemClock(executor: loop.executor), storeWriters: StoreWriters.shared,
            executor: loop.executor, logger: Logger(label: "test"))
        let events = await service.observeAll()
        let forwarding = Task { for await event in events { announcer.announce(event) } }
        defer { forwarding.cancel() }

        let shop = try AppGroup("shop")
        let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "secret-customer"])
        _ = try await service.identifyCustomer(shop, customerIds: ["registered": "secret-customer"], token: token)
        _ = try await service.identifyCustomer(shop, customerIds: ["registered": "secret-customer"], token: nil)
        _ = await service.preflight(shop)
        try await service.clear(shop, cause: .anonymize)

        #expect(
            monitor.waitForOutput {
                $0.contains("member=Cleared") && $0.contains(#"string "anonymize""#)
            })
        let signals = Self.signals(in: monitor.output)
        #expect(
            signals == [
                ["TokenRefreshed", #"string "shop""#, "uint64 1"],
                ["JwtError", #"string "shop""#, #"string "notProvided""#, "uint64 2"],
                ["Cleared", #"string "shop""#, #"string "anonymize""#],
            ]
        )
        #expect(!monitor.output.contains("secret-customer"))
        #expect(!monitor.output.contains(token.split(separator: ".")[1]))
    }

    @Test func aBusThatAppearsLaterIsConnectedTo() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-late-bus")
        defer { directory.remove() }
        let path = directory.appending("bus")
        let logs = LogCapture()
        let attemptsEnded = AttemptsEnded()
        let (thread, announcer) = try Self.announcer(
            on: .address("unix:path=\(path)"), logger: logs.logger(), firstAttemptEnded: attemptsEnded)
        defer { thread.stop() }
        // A barrier, not a pause: the first attempt and a retry both failed.
        #expect(
            await logs.waitForEntry(timeout: .seconds(10)) { _ in
                logs.entries.filter { $0.message.hasPrefix("D-Bus is not reachable") }.count >= 2
            })
        #expect(!announcer.isConnected)
        // The first attempt's end is told once: the failure, not the retry.
        #expect(attemptsEnded.count == 1)

        let bus = try PrivateBus(socketPath: path)
        defer { bus.stop() }
        #expect(await logs.waitForEntry { $0.message == "Announcing on D-Bus" })
        #expect(announcer.isConnected)
        let names = try ChildProcess.run("/usr/bin/busctl", ["--address=\(bus.address)", "list", "--acquired"])
        #expect(names.standardOutput.contains(BusAnnouncer.name))
        #expect(attemptsEnded.count == 1)
    }

    /// An announcer on a loop of its own thread, reached on that thread as the daemon reaches its own.
    static func announcer(
        on bus: BusAnnouncer.Bus, logger: Logger = Logger(label: "test"), firstAttemptEnded: AttemptsEnded? = nil
    ) throws -> (LoopThread, AnnouncerOnLoop) {
        let thread = try LoopThread()
        try thread.sync { context in
            let announcer = BusAnnouncer(
                bus: bus, loop: context.loop, logger: logger, firstAttemptEnded: firstAttemptEnded.map { $0.add })
            context.keep(announcer)
            context.onStop { announcer.stop() }
        }
        return (thread, AnnouncerOnLoop(thread: thread))
    }

    /// Each signal in dbus-monitor's output: the member, then its argument lines.
    static func signals(in output: String) -> [[String]] {
        var signals: [[String]] = []
        for line in output.split(separator: "\n") {
            if line.hasPrefix("signal "), let member = line.split(separator: "member=").last {
                signals.append([String(member)])
            } else if line.hasPrefix("   "), !signals.isEmpty {
                signals[signals.count - 1].append(line.trimmingCharacters(in: .whitespaces))
            } else {
                continue
            }
        }
        return signals.filter { $0.first != "NameAcquired" && $0.first != "NameLost" }
    }
}

/// How many times an announcer said its first attempt ended.
final class AttemptsEnded: Sendable {
    private let value = Mutex(0)
    var count: Int { value.withLock { $0 } }
    func add() { value.withLock { $0 += 1 } }
}

/// A ``BusAnnouncer`` kept by a ``LoopThread``: each use runs on the loop's thread and waits for it there.
struct AnnouncerOnLoop: Sendable {
    let thread: LoopThread

    func announce(_ event: AuthEvent) {
        try? thread.sync { context in Self.announcer(context).emit(event) }
    }

    var isConnected: Bool { (try? thread.sync { context in Self.announcer(context).isConnected }) ?? false }

    private static func announcer(_ context: LoopThread.Context) -> BusAnnouncer {
        context.kept.compactMap { $0 as? BusAnnouncer }[0]
    }
}
