// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Foundation
import Testing

@Suite("App group names")
struct AppGroupTests {
    @Test(arguments: ["a", "com.example.shop", "Shop_2-eu", "x..y", String(repeating: "g", count: 128), "a."])
    func acceptsSafeNames(_ name: String) throws {
        #expect(try AppGroup(name).name == name)
    }

    @Test(arguments: [
        ("", AppGroupNameError.empty),
        (".", .leadingDot),
        ("..", .leadingDot),
        ("../x", .leadingDot),
        (".hidden", .leadingDot),
        ("a/b", .invalidByte(UInt8(ascii: "/"), offset: 1)),
        ("x/../../etc", .invalidByte(UInt8(ascii: "/"), offset: 1)),
        ("a\u{0}b", .invalidByte(0, offset: 1)),
        ("a b", .invalidByte(UInt8(ascii: " "), offset: 1)),
        ("a\\b", .invalidByte(UInt8(ascii: "\\"), offset: 1)),
        ("grüße", .invalidByte(0xC3, offset: 2)),
        ("new\nline", .invalidByte(0x0A, offset: 3)),
        (String(repeating: "g", count: 129), .tooLong(length: 129)),
        (String(repeating: "g", count: 200), .tooLong(length: 200)),
    ])
    func refusesUnsafeNames(_ name: String, error: AppGroupNameError) {
        #expect(throws: error) { try AppGroup(name) }
    }

    @Test func errorMessagesShowTheOffendingByte() {
        #expect(AppGroupNameError.invalidByte(UInt8(ascii: "/"), offset: 1).description.contains("'/' at offset 1"))
        #expect(AppGroupNameError.invalidByte(0, offset: 1).description.contains("byte 0x0 at offset 1"))
    }

    @Test func codableValidates() throws {
        let decoded = try JSONDecoder().decode([AppGroup].self, from: Data(#"["shop"]"#.utf8))
        #expect(decoded == [try AppGroup("shop")])
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([AppGroup].self, from: Data(#"["../x"]"#.utf8)) }
    }
}
