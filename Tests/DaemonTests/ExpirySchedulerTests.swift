// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthDaemon

@Suite("Expiry scheduler (R13, R14)")
struct ExpirySchedulerTests {
    let exp = Date(timeIntervalSince1970: 1_900_000_000)
    var soon: Date { exp.addingTimeInterval(-60) }

    func group(_ name: String) throws -> AppGroup { try AppGroup(name) }

    func event(_ group: AppGroup, _ reason: JwtErrorReason, exp: Date) -> ExpiryEvent {
        let deadline = reason == .expired ? exp : exp.addingTimeInterval(-60)
        return ExpiryEvent(group: group, reason: reason, deadline: deadline, expiresAt: exp)
    }

    // MARK: Set

    @Test func aValidTokenIsArmedForExpiredSoon() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        #expect(scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-3600)).isEmpty)
        #expect(scheduler.nextDeadline == soon)
        #expect(scheduler.pendingDeadline(of: shop) == ExpiryDeadline(state: .expiredSoon, date: soon))
        #expect(scheduler.count == 1)
    }

    @Test func aTokenSetInItsLastMinuteReportsExpiredSoonAtOnce() throws {
        let shop = try group("shop")
        for offset in [-60.0, -30.0, -0.001] {
            var scheduler = ExpiryScheduler()
            let events = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(offset))
            #expect(events == [event(shop, .expiredSoon, exp: exp)])
            #expect(scheduler.nextDeadline == exp)
        }
    }

    @Test func aTokenSetAlreadyExpiredReportsExpiredOnceAtOnce() throws {
        let shop = try group("shop")
        for offset in [0.0, 1.0, 86_400.0] {
            var scheduler = ExpiryScheduler()
            let now = exp.addingTimeInterval(offset)
            #expect(scheduler.set(shop, expiresAt: exp, now: now) == [event(shop, .expired, exp: exp)])
            #expect(scheduler.nextDeadline == nil)
            #expect(scheduler.fireDue(now: now.addingTimeInterval(3600)).isEmpty)
            #expect(scheduler.count == 1)
        }
    }

    @Test func everySetStartsOverEvenWithTheSameExp() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        let now = exp.addingTimeInterval(5)
        #expect(scheduler.set(shop, expiresAt: exp, now: now) == [event(shop, .expired, exp: exp)])
        #expect(scheduler.set(shop, expiresAt: exp, now: now) == [event(shop, .expired, exp: exp)])
    }

    // MARK: Firing

    @Test func firesExpiredSoonExactlyAtExpMinus60ThenExpiredExactlyAtExp() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-3600))
        #expect(scheduler.fireDue(now: soon.addingTimeInterval(-0.001)).isEmpty)
        #expect(scheduler.fireDue(now: soon) == [event(shop, .expiredSoon, exp: exp)])
        #expect(scheduler.fireDue(now: soon).isEmpty)
        #expect(scheduler.nextDeadline == exp)
        #expect(scheduler.fireDue(now: exp.addingTimeInterval(-0.001)).isEmpty)
        #expect(scheduler.fireDue(now: exp) == [event(shop, .expired, exp: exp)])
        #expect(scheduler.nextDeadline == nil)
        #expect(scheduler.pendingDeadline(of: shop) == nil)
        #expect(scheduler.fireDue(now: exp.addingTimeInterval(86_400)).isEmpty)
    }

    @Test func aBigJumpReportsOnlyExpiredNeverAStaleExpiredSoon() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-3600))
        #expect(scheduler.fireDue(now: exp) == [event(shop, .expired, exp: exp)])
        #expect(scheduler.fireDue(now: exp.addingTimeInterval(10)).isEmpty)
        #expect(scheduler.nextDeadline == nil)
    }

    @Test func aJumpPastSeveralDeadlinesReportsInDeadlineOrder() throws {
        let early = try group("early")
        let late = try group("late")
        let lateExp = exp.addingTimeInterval(1000)
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-3600)
        _ = scheduler.set(late, expiresAt: lateExp, now: start)
        _ = scheduler.set(early, expiresAt: exp, now: start)
        // early: its expiredSoon is skipped for expired at exp; late: only its expiredSoon is due.
        let events = scheduler.fireDue(now: lateExp.addingTimeInterval(-10))
        #expect(events == [event(early, .expired, exp: exp), event(late, .expiredSoon, exp: lateExp)])
        #expect(scheduler.nextDeadline == lateExp)
    }

    @Test func manyGroupsFireInDeadlineOrder() throws {
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-86_400)
        let offsets: [Double] = [500, -200, 0, 3600, 61, 120, -1000]
        var groups: [(AppGroup, Date)] = []
        for (index, offset) in offsets.enumerated() {
            let group = try group("g\(index)")
            groups.append((group, exp.addingTimeInterval(offset)))
            #expect(scheduler.set(group, expiresAt: exp.addingTimeInterval(offset), now: start).isEmpty)
        }
        var reported: [ExpiryEvent] = []
        var now = start
        while let deadline = scheduler.nextDeadline {
            now = deadline
            reported += scheduler.fireDue(now: now)
        }
        let sorted = groups.sorted { $0.1 < $1.1 }
        let expected =
            sorted.map { event($0.0, .expiredSoon, exp: $0.1) } + sorted.map { event($0.0, .expired, exp: $0.1) }
        #expect(reported.sorted { ($0.deadline, $0.group) < ($1.deadline, $1.group) } == reported)
        #expect(Set(reported) == Set(expected))
        #expect(reported.count == expected.count)
    }

    // MARK: Re-set and remove

    @Test func reSetBeforeFiringReplacesTheDeadline() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-3600)
        let later = exp.addingTimeInterval(3600)
        let earlier = exp.addingTimeInterval(-1800)
        _ = scheduler.set(shop, expiresAt: exp, now: start)
        _ = scheduler.set(shop, expiresAt: later, now: start)
        #expect(scheduler.nextDeadline == later.addingTimeInterval(-60))
        #expect(scheduler.fireDue(now: exp).isEmpty)
        _ = scheduler.set(shop, expiresAt: earlier, now: start)
        #expect(scheduler.nextDeadline == earlier.addingTimeInterval(-60))
        #expect(scheduler.fireDue(now: earlier.addingTimeInterval(-60)) == [event(shop, .expiredSoon, exp: earlier)])
        #expect(scheduler.fireDue(now: later.addingTimeInterval(-60)) == [event(shop, .expired, exp: earlier)])
        #expect(scheduler.nextDeadline == nil)
    }

    @Test func reSetAfterExpiredSoonFiredStartsANewCycle() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-3600))
        #expect(scheduler.fireDue(now: soon.addingTimeInterval(1)).count == 1)
        let renewed = exp.addingTimeInterval(3600)
        #expect(scheduler.set(shop, expiresAt: renewed, now: soon.addingTimeInterval(2)).isEmpty)
        #expect(scheduler.fireDue(now: exp).isEmpty)  // the old token's expired never fires
        #expect(scheduler.nextDeadline == renewed.addingTimeInterval(-60))
        #expect(scheduler.fireDue(now: renewed) == [event(shop, .expired, exp: renewed)])
    }

    @Test func reSetAfterExpiredReArms() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-3600))
        #expect(scheduler.fireDue(now: exp).count == 1)
        let renewed = exp.addingTimeInterval(3600)
        #expect(scheduler.set(shop, expiresAt: renewed, now: exp).isEmpty)
        #expect(scheduler.fireDue(now: renewed.addingTimeInterval(-60)) == [event(shop, .expiredSoon, exp: renewed)])
    }

    @Test func removeAndSetNilForgetTheGroup() throws {
        let shop = try group("shop")
        let news = try group("news")
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-3600)
        _ = scheduler.set(shop, expiresAt: exp, now: start)
        _ = scheduler.set(news, expiresAt: exp.addingTimeInterval(10), now: start)
        scheduler.remove(shop)
        #expect(scheduler.nextDeadline == exp.addingTimeInterval(-50))
        #expect(scheduler.set(news, expiresAt: nil, now: start).isEmpty)
        #expect(scheduler.nextDeadline == nil)
        #expect(scheduler.count == 0)
        #expect(scheduler.fireDue(now: exp.addingTimeInterval(3600)).isEmpty)
        scheduler.remove(shop)  // removing an unknown group is harmless
        #expect(scheduler.count == 0)
    }

    @Test func startUpReportsOverdueStoredTokensAtOnce() throws {
        var scheduler = ExpiryScheduler()
        let now = exp
        let stored: [(String, Double)] = [
            ("valid", 3600), ("last-minute", 30), ("expired", -10), ("long-gone", -86_400),
        ]
        var events: [ExpiryEvent] = []
        for (name, offset) in stored {
            let group = try group(name)
            events += scheduler.set(group, expiresAt: now.addingTimeInterval(offset), now: now)
        }
        let lastMinute = try group("last-minute")
        let expired = try group("expired")
        let longGone = try group("long-gone")
        #expect(
            events == [
                event(lastMinute, .expiredSoon, exp: now.addingTimeInterval(30)),
                event(expired, .expired, exp: now.addingTimeInterval(-10)),
                event(longGone, .expired, exp: now.addingTimeInterval(-86_400)),
            ]
        )
        #expect(scheduler.nextDeadline == now.addingTimeInterval(30))
    }

    // MARK: Clock changes

    @Test func clockForwardReportsWhatIsNowDueOnlyTheLatestState() throws {
        let shop = try group("shop")
        let news = try group("news")
        let newsExp = exp.addingTimeInterval(7200)
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-3600)
        _ = scheduler.set(shop, expiresAt: exp, now: start)
        _ = scheduler.set(news, expiresAt: newsExp, now: start)
        let events = scheduler.clockChanged(now: newsExp.addingTimeInterval(-30))
        #expect(events == [event(shop, .expired, exp: exp), event(news, .expiredSoon, exp: newsExp)])
        #expect(scheduler.nextDeadline == newsExp)
        #expect(scheduler.fireDue(now: newsExp.addingTimeInterval(-1)).isEmpty)
        #expect(scheduler.fireDue(now: newsExp) == [event(news, .expired, exp: newsExp)])
    }

    @Test func clockBackwardAfterExpiredSoonMakesTheTokenValidAndFireAgain() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-3600))
        #expect(scheduler.fireDue(now: exp.addingTimeInterval(-30)) == [event(shop, .expiredSoon, exp: exp)])
        #expect(scheduler.clockChanged(now: exp.addingTimeInterval(-7200)).isEmpty)
        #expect(scheduler.pendingDeadline(of: shop) == ExpiryDeadline(state: .expiredSoon, date: soon))
        #expect(scheduler.fireDue(now: exp.addingTimeInterval(-61)).isEmpty)
        #expect(scheduler.fireDue(now: soon) == [event(shop, .expiredSoon, exp: exp)])
        #expect(scheduler.fireDue(now: exp) == [event(shop, .expired, exp: exp)])
    }

    @Test func clockBackwardAfterExpiredReArmsTheToken() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(10))
        #expect(scheduler.nextDeadline == nil)
        // Back into the last minute: no event (expiredSoon is older than what was reported), expired re-armed.
        #expect(scheduler.clockChanged(now: exp.addingTimeInterval(-30)).isEmpty)
        #expect(scheduler.nextDeadline == exp)
        #expect(scheduler.fireDue(now: exp) == [event(shop, .expired, exp: exp)])
        // Back to long before exp: both changes will be reported again.
        #expect(scheduler.clockChanged(now: exp.addingTimeInterval(-3600)).isEmpty)
        #expect(scheduler.nextDeadline == soon)
    }

    @Test func clockChangeWithinTheSameStateChangesNothing() throws {
        let shop = try group("shop")
        var scheduler = ExpiryScheduler()
        _ = scheduler.set(shop, expiresAt: exp, now: exp.addingTimeInterval(-30))
        #expect(scheduler.clockChanged(now: exp.addingTimeInterval(-50)).isEmpty)
        #expect(scheduler.clockChanged(now: exp.addingTimeInterval(-10)).isEmpty)
        #expect(scheduler.nextDeadline == exp)
        #expect(scheduler.fireDue(now: exp) == [event(shop, .expired, exp: exp)])
    }

    // MARK: Scale

    @Test func reSettingOneGroupOverAndOverKeepsTheHeapSmall() throws {
        let shop = try group("shop")
        let news = try group("news")
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-86_400)
        _ = scheduler.set(news, expiresAt: exp.addingTimeInterval(7200), now: start)
        for second in 0..<10_000 {
            _ = scheduler.set(shop, expiresAt: exp.addingTimeInterval(Double(second % 100)), now: start)
            #expect(scheduler.heapCount <= 2 * 2 + 64 + 1)
        }
        #expect(scheduler.nextDeadline == exp.addingTimeInterval(99 - 60))
        scheduler.remove(shop)
        #expect(scheduler.nextDeadline == exp.addingTimeInterval(7200 - 60))
    }

    @Test func tenThousandRandomGroupsFireInDeadlineOrderOnceEachPerState() throws {
        var random = SplitMix64(seed: 0x5EED)
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-100_000)
        var expiries: [AppGroup: Date] = [:]
        for index in 0..<10_000 {
            let group = try group("group-\(index)")
            // Whole milliseconds, 61 s to ~1 day ahead, with many ties.
            let expiresAt = start.addingTimeInterval(61 + Double(random.next() % 86_400_000 / 100) / 10)
            expiries[group] = expiresAt
            #expect(scheduler.set(group, expiresAt: expiresAt, now: start).isEmpty)
        }
        // A few re-sets and removals on the way, which must leave no trace of the old deadlines.
        for index in stride(from: 0, to: 10_000, by: 97) {
            let group = try group("group-\(index)")
            if index % 2 == 0 {
                scheduler.remove(group)
                expiries[group] = nil
            } else {
                let expiresAt = start.addingTimeInterval(3600 + Double(index))
                _ = scheduler.set(group, expiresAt: expiresAt, now: start)
                expiries[group] = expiresAt
            }
        }
        var reported: [ExpiryEvent] = []
        var now = start
        while now < start.addingTimeInterval(90_000) {
            now = now.addingTimeInterval(Double(random.next() % 50_000) / 1000)  // steps under the 60 s margin
            let events = scheduler.fireDue(now: now)
            #expect(events.allSatisfy { $0.deadline <= now })
            reported += events
        }
        #expect(scheduler.nextDeadline == nil)
        #expect(zip(reported, reported.dropFirst()).allSatisfy { $0.deadline <= $1.deadline })
        var seen: [AppGroup: [JwtErrorReason]] = [:]
        for event in reported {
            #expect(event.expiresAt == expiries[event.group])
            seen[event.group, default: []].append(event.reason)
        }
        #expect(seen.count == expiries.count)
        #expect(seen.values.allSatisfy { $0 == [.expiredSoon, .expired] })
    }

    @Test func tenThousandRandomGroupsAcrossBigJumpsReportExpiredOnceAndNeverAStaleExpiredSoon() throws {
        var random = SplitMix64(seed: 42)
        var scheduler = ExpiryScheduler()
        let start = exp.addingTimeInterval(-100_000)
        for index in 0..<10_000 {
            let expiresAt = start.addingTimeInterval(61 + Double(random.next() % 86_400))
            let group = try group("group-\(index)")
            _ = scheduler.set(group, expiresAt: expiresAt, now: start)
        }
        var seen: [AppGroup: [JwtErrorReason]] = [:]
        var now = start
        while scheduler.nextDeadline != nil {
            now = now.addingTimeInterval(Double(random.next() % 600))  // jumps up to 10 minutes
            let events =
                random.next() % 4 == 0 ? scheduler.clockChanged(now: now) : scheduler.fireDue(now: now)
            for event in events { seen[event.group, default: []].append(event.reason) }
        }
        #expect(seen.count == 10_000)
        #expect(seen.values.allSatisfy { $0 == [.expiredSoon, .expired] || $0 == [.expired] })
        #expect(seen.values.contains { $0 == [.expired] })
    }
}
