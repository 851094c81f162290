// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Testing

/// R19-R21, each checked over every combination it speaks of: every status from 100 to 599, every state of
/// the token sent, with and without `"token_expired": true`, replaced since or not.
@Suite("Retry after an authentication failure (R19-R21)")
struct RetryDecisionTests {
    struct Input: CustomTestStringConvertible {
        var status: Int
        var sent: TokenState
        var bodySaysExpired: Bool
        var replaced: Bool
        var decision: RetryDecision {
            RetryDecision(status: status, sentToken: sent, serverSaysExpired: bodySaysExpired, tokenReplaced: replaced)
        }
        var testDescription: String {
            "\(status), \(sent)\(bodySaysExpired ? ", token_expired" : "")\(replaced ? ", replaced" : "")"
        }
    }

    static let every: [Input] = (100...599).flatMap { status in
        TokenState.allCases.flatMap { sent in
            [false, true].flatMap { body in
                [false, true].map { Input(status: status, sent: sent, bodySaysExpired: body, replaced: $0) }
            }
        }
    }

    static func those(_ filter: (Input) -> Bool) -> [Input] { every.filter(filter) }

    @Test func onlyAuthenticationFailuresAreRetriedOrCallTheHandler() {
        for input in Self.those({ $0.status != 401 && $0.status != 403 }) {
            #expect(input.decision == RetryDecision(retry: false, reason: nil), "\(input.testDescription)")
        }
    }

    @Test func r19EveryUnauthorizedIsRetriedOnce() {
        for input in Self.those({ $0.status == 401 }) { #expect(input.decision.retry, "\(input.testDescription)") }
    }

    @Test func r19AReplacedTokenIsRetriedAtOnceWithoutTheHandler() {
        for input in Self.those({ $0.status == 401 && $0.replaced }) {
            #expect(input.decision == RetryDecision(retry: true, reason: nil), "\(input.testDescription)")
        }
    }

    @Test func r19TheHandlerHearsExpiredWhenTheBodyOrTheClockSaysSo() {
        for input in Self.those({ $0.status == 401 && !$0.replaced }) {
            let expected: JwtErrorReason =
                input.sent == .notProvided
                ? .notProvided : (input.bodySaysExpired || input.sent == .expired) ? .expired : .invalid
            #expect(input.decision == RetryDecision(retry: true, reason: expected), "\(input.testDescription)")
        }
    }

    @Test func r20AForbiddenWithoutATokenAsksForOneAndRetries() {
        for input in Self.those({ $0.status == 403 && $0.sent == .notProvided }) {
            let expected = RetryDecision(retry: true, reason: input.replaced ? nil : .notProvided)
            #expect(input.decision == expected, "\(input.testDescription)")
        }
    }

    @Test func r21AForbiddenWithAValidTokenNeverRetriesNorCallsTheHandler() {
        // Not even when the token was replaced since: the scope, not the token, is wrong.
        for input in Self.those({ $0.status == 403 && ($0.sent == .valid || $0.sent == .expiredSoon) }) {
            #expect(input.decision == RetryDecision(retry: false, reason: nil), "\(input.testDescription)")
        }
    }

    @Test func aForbiddenWithAnExpiredTokenAsksForANewOne() {
        for input in Self.those({ $0.status == 403 && $0.sent == .expired }) {
            let expected = RetryDecision(retry: true, reason: input.replaced ? nil : .expired)
            #expect(input.decision == expected, "\(input.testDescription)")
        }
    }

    @Test func theHandlerIsNeverCalledForARequestThatIsNotRetried() {
        for input in Self.every where input.decision.reason != nil { #expect(input.decision.retry) }
    }

    @Test func description() {
        #expect(RetryDecision(retry: true, reason: .expired).description == "retry (expired)")
        #expect(RetryDecision(retry: false, reason: nil).description == "fail")
    }
}
