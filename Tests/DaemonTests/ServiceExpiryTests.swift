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

@Suite("The service's expiry timers (R13, R14)")
struct ServiceExpiryTests {
    static func store(_ directory: TemporaryDirectory) throws -> TokenStore {
        try TokenStore(
            directory: directory.appending("state"),
            key: StoreKey(material: Array(repeating: 3, count: 32)),
            logger: Logger(label: "test")
        )
    }

    static func nextEvent(_ events: AsyncStream<AuthEvent>, within bound: Duration = .seconds(20)) async -> AuthEvent? {
        await withTaskGroup(of: AuthEvent?.self) { group in
            group.addTask {
                var iterator = events.makeAsyncIterator()
                return await iterator.next()
            }
            group.addTask {
                // The bound, not an ordering: the event ends the wait first.
                try? await Task.sleep(for: bound)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    @Test func tokensThatEnteredTheirLastMinuteWhileTheDaemonWasDownFireAtStart() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-expiry")
        defer { directory.remove() }
        let clock = ManualClock(Date(timeIntervalSince1970: 1_900_000_000))
        let signer = TestJWT()
        let records = try [
            TokenRecord(
                group: AppGroup("soon"),
                token: StreamJWT(parsing: signer.token(exp: 1_900_000_030)),
                customerIds: ["registered": "a"],
                generation: 4,
                changedAt: clock.now
            ),
            TokenRecord(
                group: AppGroup("later"),
                token: StreamJWT(parsing: signer.token(exp: 1_900_003_600)),
                generation: 1,
                changedAt: clock.now
            ),
        ]
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: try Self.store(directory),
            records: records,
            clock: clock,
            storeWriters: StoreWriters.shared, executor: loop.executor, logger: Logger(label: "test")
        )
        let events = await service.observeAll()
        await service.start()

        let first = await Self.nextEvent(events)
        #expect(
            first
                == AuthEvent(
                    kind: .jwtError, group: "soon", generation: 4, reason: .expiredSoon,
                    customerIds: ["registered": "a"]))
        #expect(await service.expiry.nextDeadline == Date(timeIntervalSince1970: 1_900_000_030))

        clock.advance(by: 30)
        await service.expiryTimerFired()
        #expect(await Self.nextEvent(events)?.reason == .expired)
        #expect(await service.expiry.nextDeadline == Date(timeIntervalSince1970: 1_900_003_540))
    }

    @Test func theRealWallClockTimerFiresExpiredSoonAMinuteBeforeExp() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-expiry")
        defer { directory.remove() }
        let timer = try WallClockTimer()
        // The timer's source on the loop the service's actor runs on, as in the daemon.
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: try Self.store(directory), records: [], clock: SystemClock(executor: loop.executor),
            storeWriters: StoreWriters.shared, executor: loop.executor, timer: timer, logger: Logger(label: "test"))
        try await loop.run { mainLoop in
            try ExpiryTimerSource.watch(on: mainLoop, service: service, logger: Logger(label: "test"))
        }
        await service.start()
        let events = await service.observeAll()

        // exp ~61.5 s away: expiredSoon is due in ~1.5 s.
        let exp = (Date().timeIntervalSince1970 + 61.5).rounded(.down)
        _ = try await service.setToken(TestJWT().token(exp: exp), for: try AppGroup("shop"))
        let started = Date()
        let event = await Self.nextEvent(events)
        #expect(event?.kind == .tokenRefreshed)
        let expiring = await Self.nextEvent(events)
        let firedAt = Date()
        #expect(expiring?.kind == .jwtError && expiring?.reason == .expiredSoon)
        // Never early; late only by scheduling (generous: the suite's blocking tests can hold the test
        // process's two pool threads for seconds; the daemon's own lateness is DaemonMethodsTests').
        #expect(firedAt.timeIntervalSince1970 >= exp - 60)
        #expect(firedAt.timeIntervalSince(started) < 30)
    }

    @Test func settingAnExpiredTokenReportsItAtOnceAfterTheRefresh() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-expiry")
        defer { directory.remove() }
        let clock = ManualClock(Date(timeIntervalSince1970: 1_900_000_000))
        let loop = try TestLoop()
        defer { loop.stop() }
        let service = AuthService(
            store: try Self.store(directory), records: [], clock: clock, storeWriters: StoreWriters.shared,
            executor: loop.executor, logger: Logger(label: "test"))
        let events = await service.observeAll()
        _ = try await service.setToken(TestJWT().token(exp: 1_899_999_000), for: try AppGroup("shop"))
        #expect(await Self.nextEvent(events)?.kind == .tokenRefreshed)  // R6: even an expired token
        #expect(await Self.nextEvent(events)?.reason == .expired)
        #expect(await service.expiry.nextDeadline == nil)
    }

    /// A clock set in a loop: every set re-checks the deadlines, but the notice comes once per interval, with the
    /// count of the sets since the last line.
    @Test func aClockSetInALoopIsHandledEachTimeAndLoggedOncePerInterval() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-expiry")
        defer { directory.remove() }
        let clock = ManualClock(Date(timeIntervalSince1970: 1_900_000_000))
        let loop = try TestLoop()
        defer { loop.stop() }
        let capture = LogCapture()
        let service = AuthService(
            store: try Self.store(directory), records: [], clock: clock, storeWriters: StoreWriters.shared,
            executor: loop.executor, logger: capture.logger())
        let throttleClock = ManualInstant()
        await Self.setClockChangeLog(service, LogThrottle(interval: .seconds(10)) { throttleClock.now })
        let events = await service.observeAll()
        _ = try await service.setToken(TestJWT().token(exp: 1_900_003_600), for: try AppGroup("shop"))
        #expect(await Self.nextEvent(events)?.kind == .tokenRefreshed)

        await service.wallClockChanged()
        clock.advance(by: 3600 - 30)  // set into the token's last minute
        await service.wallClockChanged()
        #expect(await Self.nextEvent(events)?.reason == .expiredSoon)
        for _ in 0..<98 { await service.wallClockChanged() }
        throttleClock.advance(by: .seconds(10))
        await service.wallClockChanged()

        let notices = capture.entries.filter { $0.message.hasPrefix("The wall clock changed") }.map(\.message)
        #expect(
            notices == [
                "The wall clock changed; re-checking every token's expiry",
                "The wall clock changed; re-checking every token's expiry (100 since the last such line)",
            ])
    }

    static func setClockChangeLog(_ service: isolated AuthService, _ throttle: LogThrottle) {
        service.clockChangeLog = throttle
    }

    /// A monotonic instant that moves only when the test moves it.
    final class ManualInstant: Sendable {
        private let instant = Mutex(ContinuousClock.now)
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
        func advance(by duration: Duration) { instant.withLock { $0 += duration } }
    }
}
