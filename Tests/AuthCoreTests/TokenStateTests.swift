// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@Suite("Token state and expiry deadlines (R13, R14, R17)")
struct TokenStateTests {
    let exp = Date(timeIntervalSince1970: 1_900_000_000)

    @Test(arguments: [
        (-3600.0, TokenState.valid),
        (-60.001, .valid),
        (-60.0, .expiredSoon),  // exp <= now + 60
        (-30.0, .expiredSoon),
        (-0.001, .expiredSoon),
        (0.0, .expired),  // exp <= now
        (1.0, .expired),
        (86_400.0, .expired),
    ])
    func stateFollowsTheSDKBoundaries(offsetFromExp: Double, expected: TokenState) {
        let now = exp.addingTimeInterval(offsetFromExp)
        #expect(TokenState(expiresAt: exp, at: now) == expected)
    }

    @Test func noTokenIsNotProvided() {
        #expect(TokenState(nil, at: exp) == .notProvided)
    }

    @Test func aParsedTokenHasItsState() throws {
        let jwt = try StreamJWT(parsing: TestJWT().token(exp: exp.timeIntervalSince1970))
        #expect(TokenState(jwt, at: exp.addingTimeInterval(-61)) == .valid)
        #expect(jwt.state(at: exp.addingTimeInterval(-59)) == .expiredSoon)
        #expect(jwt.state(at: exp) == .expired)
    }

    @Test func errorReasons() {
        #expect(TokenState.notProvided.errorReason == .notProvided)
        #expect(TokenState.expired.errorReason == .expired)
        #expect(TokenState.expiredSoon.errorReason == .expiredSoon)
        #expect(TokenState.valid.errorReason == nil)
    }

    @Test func aValidTokenNextTurnsExpiredSoonAtExpMinus60() {
        let deadline = ExpiryDeadline.next(expiresAt: exp, after: exp.addingTimeInterval(-3600))
        #expect(deadline == ExpiryDeadline(state: .expiredSoon, date: exp.addingTimeInterval(-60)))
        #expect(deadline?.reason == .expiredSoon)
    }

    @Test func aTokenInsideTheMarginNextTurnsExpiredAtExp() {
        for offset in [-60.0, -59.0, -0.5] {
            let deadline = ExpiryDeadline.next(expiresAt: exp, after: exp.addingTimeInterval(offset))
            #expect(deadline == ExpiryDeadline(state: .expired, date: exp))
            #expect(deadline?.reason == .expired)
        }
    }

    @Test func anExpiredTokenHasNoFurtherDeadline() {
        #expect(ExpiryDeadline.next(expiresAt: exp, after: exp) == nil)
        #expect(ExpiryDeadline.next(expiresAt: exp, after: exp.addingTimeInterval(10)) == nil)
    }

    @Test func walkingTheDeadlinesVisitsBothStatesInOrder() {
        var now = exp.addingTimeInterval(-90 * 86_400)  // a 90-day token (R3)
        var visited: [TokenState] = []
        while let deadline = ExpiryDeadline.next(expiresAt: exp, after: now) {
            #expect(deadline.date > now)
            now = deadline.date
            visited.append(deadline.state)
            #expect(TokenState(expiresAt: exp, at: now) == deadline.state)
        }
        #expect(visited == [.expiredSoon, .expired])
    }
}
