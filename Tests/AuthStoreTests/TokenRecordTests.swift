// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

@Suite struct TokenRecordTests {
    @Test func descriptionShowsNeitherTokenNorCustomerIds() throws {
        let record = try StoreFixture.record("com.example.shop", generation: 42, user: "secret-user-id")
        let token = try #require(record.token?.compact)
        for text in [record.description, String(reflecting: record), "\(record)"] {
            #expect(!text.contains(token))
            #expect(!text.contains(token.split(separator: ".")[2]))
            #expect(!text.contains("secret-user-id"))
            #expect(text.contains("com.example.shop"))
            #expect(text.contains("generation: 42"))
        }
    }

    @Test func dumpShowsNeitherTokenNorCustomerIds() throws {
        let record = try StoreFixture.record("com.example.shop", user: "secret-user-id")
        var dumped = ""
        dump(record, to: &dumped)
        #expect(!dumped.contains(try #require(record.token?.compact)))
        #expect(!dumped.contains("secret-user-id"))
    }

    @Test func recordWithoutTokenSaysSo() throws {
        let record = try StoreFixture.record("g", withToken: false)
        #expect(record.description.contains("token: none"))
        #expect(record.description.contains("customerIds: 2 keys"))
    }
}
