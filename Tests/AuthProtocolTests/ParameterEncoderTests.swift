import Foundation
import Testing

// SPDX-License-Identifier: Apache-2.0
@testable import AuthCore
@testable import AuthProtocol

/// The one writer against Foundation's: every message type, and the corners of `Encoder`, come out as
/// `JSONEncoder` with `.sortedKeys` and `.withoutEscapingSlashes` writes them, byte for byte.
@Suite("Parameter encoder", .offPool)
struct ParameterEncoderTests {
    static func foundation(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func ours(_ value: some Encodable) throws -> String {
        String(decoding: try ParameterEncoder.encode(value), as: UTF8.self)
    }

    static let oddStrings = [
        "", "shop", "a\"b\\c/d", "\u{0}\u{1}\u{8}\u{9}\u{A}\u{C}\u{D}\u{1F}\u{7F}", "é\u{2028}😀", "x\u{301}",
    ]

    static let claims = ClaimsPayload(
        expiresAt: 1_767_225_600, customerIds: ["registered": "a", "cookie": "b\n", "Z": "\u{1}"], algorithm: "HS512",
        keyId: "k/1")

    static let messages: [any Encodable & Sendable] = [
        GroupParameters(group: "shop"),
        SetTokenParameters(group: "shop", token: CompactToken("a.b.c")),
        SetTokenResult(generation: 7, claims: claims),
        GetTokenResult(token: nil, claims: nil, generation: 0),
        GetTokenResult(token: CompactToken("a.b.c"), claims: claims, generation: .max),
        PreflightResult(token: nil, state: .expiredSoon, reason: .unknown("later"), generation: 3),
        ReportAuthFailureParameters(group: "g", status: -401, generation: nil, tokenExpired: true),
        GenerationResult(generation: 1),
        ClaimRefreshResult(granted: true, leaseMs: 30_000),
        ClaimRefreshResult(granted: false),
        ClearResult(asked: 2, unconfirmed: [.init(pid: 12, reason: .timedOut), .init(pid: -1, reason: .dropped)]),
        ListGroupsResult(groups: []),
        ListGroupsResult(groups: [
            GroupSummary(
                name: "a", hasToken: true, state: .valid, expiresAt: 1.5, generation: 2, subscribers: 0),
            GroupSummary(
                name: "b", hasToken: false, state: .notProvided, expiresAt: nil, generation: 0, subscribers: 9),
        ]),
        CountGroupsResult(groups: 10_000, withToken: 9_999),
        EmptyPayload(),
        SubscribeResult(
            event: AuthEvent(
                kind: .jwtError, group: "shop", generation: 4, reason: .expired, customerIds: [:], flushId: "f",
                cause: nil, tokenState: .expired, refreshClaimed: false)),
        SubscribeResult(event: AuthEvent(kind: .unknown("future"), group: "g", generation: 0)),
        VarlinkService.Info(
            vendor: "Bloomreach", product: "exponea-authd", version: "1.2.0", url: "https://x/y",
            interfaces: ["com.exponea.Auth", "org.varlink.service"]),
    ]

    @Test func everyMessageTypeWritesAsFoundationWritesIt() throws {
        for message in Self.messages {
            #expect(try Self.ours(message) == Self.foundation(message), "\(type(of: message))")
        }
    }

    /// The replies that write themselves (`JSONWritable`) write what their `Encodable` form does, and the reply
    /// around them is the same.
    @Test func theSelfWritingRepliesWriteWhatTheirEncodableFormsDo() throws {
        let odd = ClaimsPayload(
            expiresAt: 1.5e-7, customerIds: Dictionary(uniqueKeysWithValues: Self.oddStrings.map { ($0, $0) }),
            algorithm: "a\"b/c", keyId: nil)
        let writable: [any JSONWritable] = [
            Self.claims, odd, SetTokenResult(generation: 7, claims: Self.claims),
            SetTokenResult(generation: .max, claims: odd), GetTokenResult(token: nil, claims: nil, generation: 0),
            GetTokenResult(token: CompactToken("a.b.c"), claims: Self.claims, generation: .max),
            GetTokenResult(token: CompactToken("t"), claims: nil, generation: 1),
        ]
        for message in writable {
            var json = JSONWriter()
            try message.write(into: &json)
            #expect(String(decoding: json.bytes, as: UTF8.self) == (try Self.foundation(message)), "\(message)")
        }
        let result = SetTokenResult(generation: 3, claims: odd)
        let parameters = try Self.ours(result)
        #expect(try VarlinkReplyEncoder.reply(result) == Array(#"{"parameters":\#(parameters)}"#.utf8) + [0])
        #expect(
            try VarlinkReplyEncoder.reply(result, continues: true)
                == Array(#"{"continues":true,"parameters":\#(parameters)}"#.utf8) + [0])
        #expect(throws: EncodingError.self) {
            var json = JSONWriter()
            try ClaimsPayload(expiresAt: .nan, customerIds: [:], algorithm: "", keyId: nil).write(into: &json)
        }
    }

    @Test(arguments: oddStrings)
    func stringsAndMemberNamesAreEscapedAsFoundationEscapesThem(_ text: String) throws {
        #expect(try Self.ours(text) == Self.foundation(text))
        #expect(try Self.ours([text: text]) == Self.foundation([text: text]))
        #expect(try Self.ours([text]) == Self.foundation([text]))
    }

    @Test(arguments: [
        0, -0.0, 1, -1.5, 0.1, 1e16, 1e-7, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 1_767_225_600,
        1.2345678901234568e20,
    ])
    func doublesAreWrittenInTheirShortestForm(_ number: Double) throws {
        #expect(try Self.ours(number) == Self.foundation(number))
        if Float(number).isFinite {
            #expect(try Self.ours(["n": Float(number)]) == Self.foundation(["n": Float(number)]))
        }
    }

    @Test func integersOfEveryWidthAndTheirBounds() throws {
        struct Widths: Encodable {
            var a = Int.min, b = Int8.min, c = Int16.min, d = Int32.min, e = Int64.max
            var f = UInt.max, g = UInt8.max, h = UInt16.max, i = UInt32.max, j = UInt64.max, k = 0
        }
        #expect(try Self.ours(Widths()) == Self.foundation(Widths()))
        #expect(try Self.ours([Int64.min, 0, 9]) == Self.foundation([Int64.min, 0, 9]))
    }

    @Test func aNumberJSONCannotHoldIsAnErrorNamingWhereItIs() throws {
        for bad in [Double.nan, .infinity, -.infinity] {
            #expect {
                try ParameterEncoder.encode([
                    "claims": ClaimsPayload(
                        expiresAt: bad, customerIds: [:], algorithm: "HS512", keyId: nil)
                ])
            } throws: { error in
                guard case EncodingError.invalidValue(_, let context) = error else { return false }
                return context.codingPath.map(\.stringValue) == ["claims", "expiresAt"]
            }
        }
        #expect {
            try ParameterEncoder.encode(["a": [["b": 1.0], ["c": 2, "d": .nan]]])
        } throws: { error in
            guard case EncodingError.invalidValue(_, let context) = error else { return false }
            return context.codingPath.map(\.stringValue) == ["a", "Index 1", "d"]
                && context.codingPath.map(\.intValue) == [nil, 1, nil]
        }
    }

    /// Containers opened by hand: nested ones closed when their parent writes again, two asks for the same
    /// container sharing it, unkeyed inside keyed and the reverse, a super encoder, and values that write nothing.
    @Test func containersNestAndCloseAsFoundationsDo() throws {
        struct Nested: Encodable {
            enum Keys: String, CodingKey { case zeta, alpha, list, inner, empty, sup, after }
            func encode(to encoder: any Encoder) throws {
                var outer = encoder.container(keyedBy: Keys.self)
                try outer.encode(1, forKey: .zeta)
                var inner = outer.nestedContainer(keyedBy: Keys.self, forKey: .inner)
                try inner.encode("x", forKey: .zeta)
                try inner.encodeNil(forKey: .alpha)
                var list = outer.nestedUnkeyedContainer(forKey: .list)
                try list.encode(true)
                var row = list.nestedContainer(keyedBy: Keys.self)
                try row.encode(2.5, forKey: .alpha)
                var deeper = list.nestedUnkeyedContainer()
                try deeper.encode("y")
                try list.encodeNil()
                try outer.encode(Nothing(), forKey: .empty)
                _ = outer.superEncoder(forKey: .sup)
                var again = encoder.container(keyedBy: Keys.self)
                try again.encode([String: Int](), forKey: .alpha)
                try again.encode([[Int]](), forKey: .after)
            }
        }
        struct Nothing: Encodable {
            func encode(to encoder: any Encoder) throws {}
        }
        #expect(try Self.ours(Nested()) == Self.foundation(Nested()))
        #expect(try Self.ours([Nothing(), Nothing()]) == Self.foundation([Nothing(), Nothing()]))
        #expect(try Self.ours(Optional<Int>.none) == "null")
        #expect(try Self.ours([Optional(1), nil]) == Self.foundation([Optional(1), nil]))
    }

    @Test func writesAfterWhatIsAlreadyWritten() throws {
        var json = JSONWriter()
        json.raw(#"{"parameters":"#)
        try ParameterEncoder.encode(GenerationResult(generation: 5), into: &json)
        json.raw("}")
        #expect(String(decoding: json.bytes, as: UTF8.self) == #"{"parameters":{"generation":5}}"#)
    }

    @Test func repliesAndErrorsAreFramedWithTheirMembersInOrder() throws {
        let reply = try VarlinkReplyEncoder.reply(GenerationResult(generation: 5), continues: true)
        #expect(reply.last == 0)
        #expect(
            String(decoding: reply.dropLast(), as: UTF8.self) == #"{"continues":true,"parameters":{"generation":5}}"#)
        let error = VarlinkReplyEncoder.error(.permissionDenied(group: "a\"b"))
        #expect(error.last == 0)
        #expect(
            String(decoding: error.dropLast(), as: UTF8.self)
                == #"{"error":"com.exponea.Auth.PermissionDenied","parameters":{"group":"a\"b"}}"#)
    }

    /// A whole JSON value, as authctl writes its output: members sorted, numbers as their literal.
    @Test func aParsedValueIsWrittenBackAsItReads() throws {
        let text = #"{"b":[1,-2.5e3,true,false,null,"\u0001é"],"a":{"z":{},"y":[]}}"#
        var json = JSONWriter()
        json.value(try JSONValue(parsing: Array(text.utf8)))
        #expect(
            String(decoding: json.bytes, as: UTF8.self)
                == #"{"a":{"y":[],"z":{}},"b":[1,-2.5e3,true,false,null,"\u0001é"]}"#)
    }
}
