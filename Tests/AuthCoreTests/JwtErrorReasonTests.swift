// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Foundation
import Testing

@Suite("JWT error reasons (R11)")
struct JwtErrorReasonTests {
    @Test(arguments: [
        ("notProvided", JwtErrorReason.notProvided),
        ("invalid", .invalid),
        ("expired", .expired),
        ("expiredSoon", .expiredSoon),
        ("insufficient", .insufficient),
    ])
    func knownReasonsUseTheSDKSpelling(raw: String, reason: JwtErrorReason) throws {
        #expect(JwtErrorReason(rawValue: raw) == reason)
        #expect(reason.rawValue == raw)
        let decoded = try JSONDecoder().decode([JwtErrorReason].self, from: Data(#"["\#(raw)"]"#.utf8))
        #expect(decoded == [reason])
        #expect(String(decoding: try JSONEncoder().encode([reason]), as: UTF8.self) == #"["\#(raw)"]"#)
    }

    @Test func unknownFutureReasonsDecodeAndRoundTrip() throws {
        let decoded = try JSONDecoder().decode([JwtErrorReason].self, from: Data(#"["revoked","expired"]"#.utf8))
        #expect(decoded == [.unknown("revoked"), .expired])
        #expect(String(decoding: try JSONEncoder().encode(decoded), as: UTF8.self) == #"["revoked","expired"]"#)
    }

    @Test func aNonStringIsStillADecodingError() {
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([JwtErrorReason].self, from: Data("[1]".utf8)) }
    }
}
