// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

@Suite("Record plaintext: the token's exp kept beside it")
struct RecordCodecTests {
    let key = try! StoreKey(material: Array(repeating: 3, count: 32))
    let group = try! AppGroup("com.example.shop")

    private func decode(plaintext: String) throws(RecordDefect) -> TokenRecord {
        try RecordCodec.decode(
            try! RecordCodec.seal(Array(plaintext.utf8), group: group, key: key), group: group, key: key)
    }

    @Test func aRecordKeepsTheTokensExpAndReadsItBack() throws {
        let record = try StoreFixture.record(group.name, generation: 3)
        let decoded = try RecordCodec.decode(try RecordCodec.encode(record, key: key), group: group, key: key)
        #expect(decoded == record)
        #expect(decoded.token?.expiresAt == record.token?.expiresAt)
    }

    /// Records written before `expiresAt` was kept have their token parsed for it.
    @Test func aRecordWithoutExpiresAtParsesItsToken() throws {
        let token = TestJWT().token(exp: 1_900_000_000.25)
        let record = try decode(
            plaintext: #"{"changedAt":0,"customerIds":{},"generation":1,"group":"com.example.shop","schema":1,"#
                + #""token":"\#(token)"}"#)
        #expect(record.token?.compact == token)
        #expect(record.token?.expiresAt == Date(timeIntervalSince1970: 1_900_000_000.25))
    }

    /// With `expiresAt` the token's JSON is not parsed again, but its shape is still checked.
    @Test func aStoredTokenThatIsNoCompactJWTIsADefect() {
        for token in ["not-a-jwt", "a.b", "a.b.c.d", "a.b!.c", ".b.c"] {
            #expect(throws: RecordDefect.self, "\(token)") {
                try decode(
                    plaintext: #"{"changedAt":0,"customerIds":{},"generation":1,"group":"com.example.shop","#
                        + #""schema":1,"token":"\#(token)","expiresAt":1900000000}"#)
            }
        }
    }
}
