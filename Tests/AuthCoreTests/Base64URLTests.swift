// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@testable import AuthCore

/// Strict base64url against Foundation's base64 (the alphabet mapped, the padding added): every length, every
/// byte value in the text, and texts that are not base64url at all.
@Suite("Base64URL")
struct Base64URLTests {
    /// Foundation's reading of `text` as base64url, or nil where strict base64url refuses it.
    static func reference(_ text: [UInt8]) -> [UInt8]? {
        guard text.count % 4 != 1,
            text.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || $0.isAlphanumericASCII })
        else { return nil }
        var standard = String(decoding: text, as: UTF8.self)
            .replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.count % 4) % 4)
        return Data(base64Encoded: standard).map(Array.init)
    }

    /// What `Base64URL.decode(_:into:)` writes for `text`, nil when it refuses it.
    static func decoded(_ text: [UInt8]) -> [UInt8]? {
        text.withUnsafeBufferPointer { text in
            var output = [UInt8](repeating: 0, count: text.count * 3 / 4)
            guard let count = output.withUnsafeMutableBufferPointer({ Base64URL.decode(text, into: $0) }) else {
                return nil
            }
            return Array(output[..<count])
        }
    }

    @Test func decodesAndChecksAsFoundationReadsTheSameText() {
        var random = SplitMix64(seed: 11)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        for length in 0..<70 {
            for round in 0..<20 {
                var text = (0..<length).map { _ in alphabet[Int(random.next() % 64)] }
                // Some texts get one byte from anywhere, in or out of the alphabet.
                if round % 3 == 0, length > 0 { text[Int(random.next() % UInt64(length))] = UInt8(random.next() % 256) }
                let expected = Self.reference(text)
                #expect(Self.decoded(text) == expected, "\(text)")
                #expect(text.withUnsafeBufferPointer { Base64URL.isValid($0) } == (expected != nil))
            }
        }
    }

    @Test func encodingThenDecodingGivesTheBytesBack() {
        var random = SplitMix64(seed: 12)
        for length in 0..<100 {
            let bytes = (0..<length).map { _ in UInt8(random.next() % 256) }
            #expect(Self.decoded(Array(Base64URL.encode(bytes).utf8)) == bytes)
        }
    }
}

extension UInt8 {
    fileprivate var isAlphanumericASCII: Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self)
    }
}
