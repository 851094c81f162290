// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import AuthTestKit
import Foundation
import Testing

@testable import AuthDaemon

/// The service's plain values on their own: the R-rules of ``GroupTable`` at fixed times, the flush handshake,
/// the write queue and the GetToken snapshot, with no actor, no store, no clock and no task.
@Suite("The service core's values")
struct ServiceCoreTests {
    static let t0 = Date(timeIntervalSince1970: 1_900_000_000)
    let shop = try! AppGroup("shop")
    let signer = TestJWT()

    func jwt(expiringIn seconds: TimeInterval, ids: [String: String] = ["registered": "alice"]) -> StreamJWT {
        try! StreamJWT(parsing: signer.token(expiringIn: seconds, from: Self.t0, ids: ids))
    }

    func makeTable(with token: StreamJWT? = nil) -> GroupTable {
        var table = GroupTable(records: [], jwtErrorWindow: 2)
        if let token { _ = table.commit(table.record(shop, token: token, customerIds: nil, now: Self.t0)) }
        return table
    }

    // MARK: GroupTable

    /// R15-R17 and the window: one jwtError per (reason, generation) per window, the expired token still sent.
    @Test func preflightSendsOneJwtErrorPerWindow() {
        var table = makeTable()
        let (none, first) = table.preflight(shop, now: Self.t0)
        #expect(none.state == .notProvided && first?.reason == .notProvided)
        #expect(table.preflight(shop, now: Self.t0.addingTimeInterval(1.9)).1 == nil)
        #expect(table.preflight(shop, now: Self.t0.addingTimeInterval(2)).1?.reason == .notProvided)

        _ = table.commit(table.record(shop, token: jwt(expiringIn: 30), customerIds: nil, now: Self.t0))
        let (expired, event) = table.preflight(shop, now: Self.t0.addingTimeInterval(31))
        #expect(expired.state == .expired && expired.token != nil)  // R16
        #expect(event?.reason == .expired && event?.customerIds == ["registered": "alice"] && event?.generation == 1)
    }

    /// R19: the same token stored again is no replacement; another token is.
    @Test func aRetryIsImmediateOnlyWhenAnotherTokenCameSince() {
        let token = jwt(expiringIn: 3600)
        var table = makeTable(with: token)
        let again = table.commit(table.record(shop, token: token, customerIds: nil, now: Self.t0))
        #expect(!again.replaced && again.event?.kind == .tokenRefreshed)  // R6: still announced
        let (same, event) = table.reportAuthFailure(
            shop, status: 401, sentGeneration: 1, serverSaysExpired: false, now: Self.t0)
        #expect(same == RetryDecision(retry: true, reason: .invalid) && event?.reason == .invalid)

        let other = table.commit(table.record(shop, token: jwt(expiringIn: 7200), customerIds: nil, now: Self.t0))
        #expect(other.replaced)
        let (replaced, none) = table.reportAuthFailure(
            shop, status: 401, sentGeneration: 2, serverSaysExpired: false, now: Self.t0)
        #expect(replaced == RetryDecision(retry: true, reason: nil) && none == nil)
        // R21: a 403 with a valid token never retries.
        #expect(
            table.reportAuthFailure(shop, status: 403, sentGeneration: 3, serverSaysExpired: false, now: Self.t0).0
                == RetryDecision(retry: false, reason: nil))
    }

    /// R28: the first claim is granted; renewing is the holder's; a lapsed lease ends the claim and sends the
    /// pending jwtError again, even within its window; a closed connection ends its claims likewise.
    @Test func refreshClaimsAndTheirLeases() {
        var table = makeTable(with: jwt(expiringIn: 30))
        _ = table.jwtError(shop, reason: .expiredSoon, now: Self.t0)
        let granted = table.claimRefresh(shop, generation: 1, holder: 7, renew: false, lease: 5, now: Self.t0)
        guard case .granted(let id, 5) = granted else {
            Issue.record("not granted: \(granted)")
            return
        }
        #expect(table.claimRefresh(shop, generation: 1, holder: 8, renew: false, lease: 5, now: Self.t0) == .refused)
        #expect(table.claimRefresh(shop, generation: 0, holder: 8, renew: false, lease: 5, now: Self.t0) == .refused)
        let four = Self.t0.addingTimeInterval(4)
        #expect(table.claimRefresh(shop, generation: 1, holder: 8, renew: true, lease: 5, now: four) == .refused)
        #expect(table.claimRefresh(shop, generation: 1, holder: 7, renew: true, lease: 5, now: four) == .renewed)
        #expect(table.currentState(of: shop, now: four).first?.refreshClaimed == true)

        #expect(table.leaseTimerFired(shop, claim: id, now: Self.t0.addingTimeInterval(5)) == .renewed(4))
        guard case .ended(let resent) = table.leaseTimerFired(shop, claim: id, now: Self.t0.addingTimeInterval(9))
        else {
            Issue.record("the lease did not end")
            return
        }
        #expect(resent?.reason == .expiredSoon && resent?.generation == 1)
        #expect(table.leaseTimerFired(shop, claim: id, now: Self.t0.addingTimeInterval(10)) == .gone)

        let now = Self.t0.addingTimeInterval(10)
        #expect(table.claimRefresh(shop, generation: 1, holder: 8, renew: false, lease: 5, now: now) != .refused)
        let closed = table.connectionClosed(8, now: now)
        #expect(closed.map(\.0) == [shop] && closed.first?.1?.reason == .expiredSoon)
        #expect(table.connectionClosed(8, now: now).isEmpty)
        // A new token ends a claim, and a release is the holder's only.
        #expect(table.claimRefresh(shop, generation: 1, holder: 9, renew: false, lease: 5, now: now) != .refused)
        let byAnother = table.releaseRefresh(shop, generation: 1, holder: 3)
        let byHolder = table.releaseRefresh(shop, generation: 1, holder: 9)
        #expect(!byAnother && byHolder)
        #expect(table.claimRefresh(shop, generation: 1, holder: 9, renew: false, lease: 5, now: now) != .refused)
        let set = table.commit(table.record(shop, token: jwt(expiringIn: 3600), customerIds: nil, now: now))
        #expect(set.endedClaim?.holder == 9)
        #expect(table.connectionClosed(9, now: now).isEmpty)
    }

    /// What a late subscriber is told first: the state, then the expiry it must act on (R13).
    @Test func aLateSubscriberIsToldWhereTheGroupStands() {
        let table = makeTable(with: jwt(expiringIn: 30))
        let events = table.currentState(of: shop, now: Self.t0)
        #expect(events.map(\.kind) == [.state, .jwtError])
        #expect(events.first?.tokenState == .expiredSoon && events.first?.refreshClaimed == false)
        #expect(events.last?.reason == .expiredSoon && events.last?.customerIds == ["registered": "alice"])
        #expect(table.currentState(of: try! AppGroup("news"), now: Self.t0).map(\.kind) == [.state])
    }

    @Test func clearingForgetsTokenAndIdentityAndCountsFollow() {
        var table = makeTable(with: jwt(expiringIn: 3600))
        #expect(table.groupsWithToken == 1)
        let cleared = table.commitClear(shop, cause: "anonymize", now: Self.t0)
        #expect(cleared.kind == .cleared && cleared.generation == 2 && cleared.cause == "anonymize")
        #expect(table[shop]?.token == nil && table[shop]?.customerIds == [:] && table.groupsWithToken == 0)
        #expect(table.count == 1)
    }

    // MARK: FlushCoordinator, WriteQueue, WaitList

    @Test func aFlushEndsWhenEveryoneAcknowledgedOrLeftOrItsBoundPassed() {
        var flushes = FlushCoordinator<String>()
        flushes.begin(shop, id: 1, requests: ["a": (10, 100), "b": (11, 101), "c": (12, 102)], waiter: "clear-1")
        let joined = flushes.join(shop, "clear-2")
        #expect(joined)
        #expect(flushes.acknowledge(shop, flushId: "a") == nil)
        #expect(flushes.acknowledge(shop, flushId: "a") == nil)  // twice counts once
        #expect(flushes.subscriptionEnded(shop, subscription: 11) == nil)
        #expect(flushes.timedOut(shop, flush: 2) == nil)  // another flush's bound
        let done = flushes.timedOut(shop, flush: 1)
        #expect(done?.waiters == ["clear-1", "clear-2"])
        #expect(
            done?.result
                == ClearResult(
                    asked: 3,
                    unconfirmed: [
                        UnconfirmedFlush(pid: 101, reason: .dropped), UnconfirmedFlush(pid: 102, reason: .timedOut),
                    ]))
        #expect(!flushes.isPending(shop) && !flushes.join(shop, "late"))

        flushes.begin(shop, id: 3, requests: ["d": (13, 103)], waiter: "clear-3")
        #expect(flushes.acknowledge(shop, flushId: "d")?.result == ClearResult(asked: 1, unconfirmed: []))
    }

    @Test func oneGroupsWritesTakeTurnsInOrder() {
        var writes = WriteQueue<Int>()
        let news = try! AppGroup("news")
        let first = writes.enter(shop)
        let second = writes.enter(shop)
        #expect(first && !second)
        writes.wait(shop, 1)
        writes.wait(shop, 2)
        let other = writes.enter(news)
        #expect(other)  // another group meanwhile
        #expect(writes.leave(shop) == 1)
        #expect(writes.isWriting(shop))  // handed over: still taken
        #expect(writes.leave(shop) == 2)
        #expect(writes.leave(shop) == nil)
        #expect(!writes.isWriting(shop) && writes.enter(shop))

        var waiters = WaitList<String>()
        waiters.add(shop, id: 1, "first")
        waiters.add(shop, id: 2, "second")
        #expect(waiters.remove(shop, id: 1) == "first")
        #expect(waiters.remove(shop, id: 1) == nil)
        #expect(waiters.removeAll(shop) == ["second"] && waiters.count(of: shop) == 0)
    }

    // MARK: GetTokenReplies

    /// GetToken's reply is kept until its group changes, and the replies kept are bounded.
    @Test func getTokenRepliesAreKeptUntilTheGroupChangesWithinTheirBound() throws {
        var replies = GetTokenReplies(capacity: 2)
        replies.keep(Array("shop@1".utf8), for: shop)
        #expect(replies[shop] == Array("shop@1".utf8))
        replies.changed(shop)
        #expect(replies[shop] == nil)
        replies.keep(Array("shop@2".utf8), for: shop)
        let others = try (0..<3).map { try AppGroup("group-\($0)") }
        for group in others { replies.keep(Array("\(group)".utf8), for: group) }
        #expect(replies.count == 2)
        #expect(replies[others[2]] == Array("group-2".utf8))  // the last kept is there
    }
}
