// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@Suite("StreamJWT parsing (R1, R2)")
struct StreamJWTTests {
    let signer = TestJWT()

    @Test func parsesARealHS512Token() throws {
        let token = signer.token(exp: 1_900_000_000, ids: ["registered": "alice", "cookie": "c-1"])
        #expect(signer.verifies(token))

        let jwt = try StreamJWT(parsing: token)

        #expect(jwt.compact == token)
        #expect(jwt.header.algorithm == "HS512")
        #expect(jwt.header.keyID == "k1")
        #expect(jwt.claims.expiresAt == Date(timeIntervalSince1970: 1_900_000_000))
        #expect(jwt.claims.customerIds == ["registered": "alice", "cookie": "c-1"])
    }

    /// JWS splits at the byte '.', also where a combining mark follows it (String.split would not: the period
    /// and the mark are one Character). Found by fuzz-jwt.
    @Test func splitsAtEveryPeriodByte() {
        #expect(throws: StreamJWTError.invalidBase64URL(.payload)) { try StreamJWT(parsing: "eyJ9.\u{301}eyJ9.c2ln") }
        #expect(throws: StreamJWTError.notThreeParts(found: 2)) { try StreamJWT(parsing: "eyJ9.\u{301}eyJ9") }
    }

    @Test func keyIDIsOptional() throws {
        let token = TestJWT(keyID: nil).token(exp: 1_900_000_000)
        #expect(try StreamJWT(parsing: token).header.keyID == nil)
    }

    @Test func keepsAFractionalExpiration() throws {
        let token = signer.token(headerJSON: #"{"alg":"HS512"}"#, payloadJSON: #"{"exp":1900000000.5,"ids":{}}"#)
        #expect(try StreamJWT(parsing: token).claims.expiresAt.timeIntervalSince1970 == 1_900_000_000.5)
    }

    @Test func acceptsAnEmptyIdsMapAndUnknownClaims() throws {
        let token = signer.token(
            headerJSON: #"{"alg":"HS256","typ":"JWT","x":[1,{"y":null}]}"#,
            payloadJSON: #"{"exp":1,"ids":{},"iat":0,"nested":{"a":[true,false]}}"#
        )
        let jwt = try StreamJWT(parsing: token)
        #expect(jwt.header.algorithm == "HS256")
        #expect(jwt.claims.customerIds.isEmpty)
    }

    @Test func descriptionNeverShowsTheTokenOrTheIds() throws {
        let token = signer.token(exp: 1_900_000_000, ids: ["registered": "secret-customer"])
        let jwt = try StreamJWT(parsing: token)
        let signature = String(token.split(separator: ".")[2])

        for text in [jwt.description, "\(jwt)", String(reflecting: jwt.claims.expiresAt)] {
            #expect(!text.contains(signature))
            #expect(!text.contains("secret-customer"))
        }
        #expect(jwt.description == "StreamJWT(alg: HS512, kid: k1, exp: 1900000000, ids: 1 keys)")
    }

    @Test func acceptsATokenOfExactlyTheMaximumLength() throws {
        let base = signer.token(headerJSON: #"{"alg":"HS512"}"#, payloadJSON: #"{"exp":1,"ids":{}}"#)
        let parts = base.split(separator: ".")
        // Grow the signature (never checked) with base64url characters up to the limit.
        let padding = String(repeating: "A", count: StreamJWT.maximumLength - base.utf8.count)
        let token = "\(parts[0]).\(parts[1]).\(parts[2])\(padding)"
        #expect(token.utf8.count == StreamJWT.maximumLength)
        #expect(throws: Never.self) { try StreamJWT(parsing: token) }
    }

    struct Malformed: CustomTestStringConvertible, Sendable {
        var name: String
        var token: String
        var error: StreamJWTError
        var testDescription: String { name }
    }

    static let header = TestJWT.base64URL(Data(#"{"alg":"HS512","kid":"k1"}"#.utf8))
    static func b64(_ json: String) -> String { TestJWT.base64URL(Data(json.utf8)) }
    static func jwt(header: String = header, payload: String) -> String { "\(header).\(b64(payload)).c2ln" }

    static let malformed: [Malformed] = [
        Malformed(name: "empty", token: "", error: .empty),
        Malformed(
            name: "over 16 KiB",
            token: String(repeating: "a", count: StreamJWT.maximumLength + 1),
            error: .tooLong(length: StreamJWT.maximumLength + 1)
        ),
        Malformed(name: "Bearer prefix", token: "Bearer " + jwt(payload: #"{"exp":1,"ids":{}}"#), error: .bearerPrefix),
        Malformed(name: "one part", token: "abc", error: .notThreeParts(found: 1)),
        Malformed(name: "two parts", token: "abc.def", error: .notThreeParts(found: 2)),
        Malformed(name: "four parts", token: "a.b.c.d", error: .notThreeParts(found: 4)),
        Malformed(name: "JWE (five parts)", token: "a.b.c.d.e", error: .notThreeParts(found: 5)),
        Malformed(name: "empty header", token: ".\(b64("{}")).sig", error: .invalidBase64URL(.header)),
        Malformed(name: "empty payload", token: "\(header)..sig", error: .invalidBase64URL(.payload)),
        Malformed(name: "header with '+'", token: "ab+c.\(b64("{}")).sig", error: .invalidBase64URL(.header)),
        Malformed(name: "header with padding", token: "YQ==.\(b64("{}")).sig", error: .invalidBase64URL(.header)),
        Malformed(name: "payload with a space", token: "\(header).ab cd.sig", error: .invalidBase64URL(.payload)),
        Malformed(
            name: "payload of impossible length", token: "\(header).abcde.sig", error: .invalidBase64URL(.payload)),
        Malformed(
            name: "signature with '/'", token: "\(header).\(b64("{}")).si/g", error: .invalidBase64URL(.signature)),
        Malformed(
            name: "trailing newline", token: "\(header).\(b64("{}")).sig\n", error: .invalidBase64URL(.signature)),
        Malformed(name: "header not JSON", token: "\(b64("not json")).\(b64("{}")).sig", error: .headerNotJSONObject),
        Malformed(name: "header a JSON array", token: "\(b64("[1]")).\(b64("{}")).sig", error: .headerNotJSONObject),
        Malformed(name: "header without alg", token: jwt(header: b64("{}"), payload: "{}"), error: .algorithmMissing),
        Malformed(
            name: "alg not a string", token: jwt(header: b64(#"{"alg":5}"#), payload: "{}"), error: .algorithmMissing),
        Malformed(
            name: "kid not a string",
            token: jwt(header: b64(#"{"alg":"HS512","kid":7}"#), payload: "{}"),
            error: .keyIDNotString
        ),
        Malformed(name: "payload not JSON", token: jwt(payload: "exp=1"), error: .payloadNotJSONObject),
        Malformed(name: "payload a JSON string", token: jwt(payload: #""exp""#), error: .payloadNotJSONObject),
        Malformed(
            name: "payload truncated JSON", token: jwt(payload: #"{"exp":1,"ids":{"#), error: .payloadNotJSONObject),
        Malformed(name: "exp missing", token: jwt(payload: #"{"ids":{}}"#), error: .expirationMissing),
        Malformed(
            name: "exp a string", token: jwt(payload: #"{"exp":"1900000000","ids":{}}"#), error: .expirationNotNumber),
        Malformed(name: "exp null", token: jwt(payload: #"{"exp":null,"ids":{}}"#), error: .expirationNotNumber),
        Malformed(name: "exp a boolean", token: jwt(payload: #"{"exp":true,"ids":{}}"#), error: .expirationNotNumber),
        Malformed(
            name: "exp an object", token: jwt(payload: #"{"exp":{"v":1},"ids":{}}"#), error: .expirationNotNumber),
        Malformed(name: "exp negative", token: jwt(payload: #"{"exp":-1,"ids":{}}"#), error: .expirationOutOfRange),
        Malformed(name: "exp past 9999", token: jwt(payload: #"{"exp":1e300,"ids":{}}"#), error: .expirationOutOfRange),
        Malformed(name: "ids missing", token: jwt(payload: #"{"exp":1}"#), error: .customerIdsMissing),
        Malformed(
            name: "ids a string", token: jwt(payload: #"{"exp":1,"ids":"alice"}"#), error: .customerIdsNotStringMap),
        Malformed(
            name: "ids with a number value",
            token: jwt(payload: #"{"exp":1,"ids":{"registered":42}}"#),
            error: .customerIdsNotStringMap
        ),
        Malformed(
            name: "ids with a nested object",
            token: jwt(payload: #"{"exp":1,"ids":{"registered":{"a":"b"}}}"#),
            error: .customerIdsNotStringMap
        ),
        Malformed(name: "ids null", token: jwt(payload: #"{"exp":1,"ids":null}"#), error: .customerIdsNotStringMap),
    ]

    @Test(arguments: malformed)
    func rejectsMalformedTokensWithANamedError(_ example: Malformed) {
        #expect(throws: example.error) { try StreamJWT(parsing: example.token) }
    }

    @Test func deeplyNestedJSONIsRejectedWithoutCrashing() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        let token = Self.jwt(payload: #"{"exp":1,"ids":{},"x":"# + deep + "}")
        #expect(throws: StreamJWTError.self) { try StreamJWT(parsing: token) }
    }

    @Test func errorMessagesSayWhatIsWrongAndNeverRepeatTheToken() {
        for example in Self.malformed {
            let message = example.error.description
            #expect(!message.isEmpty)
            if example.token.count > 8 { #expect(!message.contains(example.token)) }
        }
        #expect(
            StreamJWTError.notThreeParts(found: 2).description == "a JWT has three parts separated by '.', this has 2")
        #expect(
            StreamJWTError.invalidBase64URL(.payload).description == "part 2 (payload) is not base64url without padding"
        )
        #expect(StreamJWTError.invalidBase64URL(.payload).code == "invalidBase64URL")
    }
}
