// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Testing

@Suite("Retry after an authentication failure (R19-R21)")
struct RetryDecisionTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var status: Int
        var sent: TokenState
        var bodySaysExpired = false
        var replaced = false
        var retry: Bool
        var reason: JwtErrorReason?
        var testDescription: String {
            "\(status) with \(sent)\(bodySaysExpired ? ", token_expired" : "")\(replaced ? ", replaced" : "")"
        }
    }

    static let table: [Case] = [
        // R19: 401
        Case(status: 401, sent: .valid, retry: true, reason: .invalid),
        Case(status: 401, sent: .expiredSoon, retry: true, reason: .invalid),
        Case(status: 401, sent: .expired, retry: true, reason: .expired),
        Case(status: 401, sent: .valid, bodySaysExpired: true, retry: true, reason: .expired),
        Case(status: 401, sent: .notProvided, retry: true, reason: .notProvided),
        // R19: the token was replaced while the request was in flight: retry at once, no handler.
        Case(status: 401, sent: .valid, replaced: true, retry: true, reason: nil),
        Case(status: 401, sent: .expired, bodySaysExpired: true, replaced: true, retry: true, reason: nil),
        Case(status: 403, sent: .notProvided, replaced: true, retry: true, reason: nil),
        // R20: 403 without a token
        Case(status: 403, sent: .notProvided, retry: true, reason: .notProvided),
        // R21: 403 with a valid token: no retry, no handler
        Case(status: 403, sent: .valid, retry: false, reason: nil),
        Case(status: 403, sent: .expiredSoon, retry: false, reason: nil),
        // 403 with an expired token
        Case(status: 403, sent: .expired, retry: true, reason: .expired),
        // Anything else is not an authentication failure.
        Case(status: 200, sent: .valid, retry: false, reason: nil),
        Case(status: 400, sent: .notProvided, retry: false, reason: nil),
        Case(status: 404, sent: .expired, retry: false, reason: nil),
        Case(status: 429, sent: .valid, replaced: true, retry: false, reason: nil),
        Case(status: 500, sent: .expired, bodySaysExpired: true, retry: false, reason: nil),
    ]

    @Test(arguments: table)
    func decision(_ example: Case) {
        let decision = RetryDecision(
            status: example.status,
            sentToken: example.sent,
            serverSaysExpired: example.bodySaysExpired,
            tokenReplaced: example.replaced
        )
        #expect(decision == RetryDecision(retry: example.retry, reason: example.reason))
    }

    @Test func everyStatusAndStateIsCovered() {
        // Whatever the input, a decision never asks for the handler without a retry.
        for status in 100...599 {
            for state in TokenState.allCases {
                for flags in [(false, false), (true, false), (false, true), (true, true)] {
                    let decision = RetryDecision(
                        status: status,
                        sentToken: state,
                        serverSaysExpired: flags.0,
                        tokenReplaced: flags.1
                    )
                    if decision.reason != nil { #expect(decision.retry) }
                    if status != 401 && status != 403 { #expect(decision == RetryDecision(retry: false, reason: nil)) }
                }
            }
        }
    }

    @Test func description() {
        #expect(RetryDecision(retry: true, reason: .expired).description == "retry (expired)")
        #expect(RetryDecision(retry: false, reason: nil).description == "fail")
    }
}
