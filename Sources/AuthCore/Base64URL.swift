// SPDX-License-Identifier: Apache-2.0
/// Strict base64url without padding (RFC 4648 section 5, as JWS compact serialisation uses it).
public enum Base64URL {
    /// Decodes `text`, or returns nil when it has a byte outside `A-Z a-z 0-9 - _`, padding, or an
    /// impossible length.
    static func decode(_ text: Substring.UTF8View) -> [UInt8]? {
        text.withContiguousStorageIfAvailable(decode) ?? decode(Array(text))
    }

    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(text.count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in text {
            guard let value = sextet(byte) else { return nil }
            accumulator = (accumulator << 6) | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
            }
        }
        return output
    }

    /// Whether `text` would decode: the same check as ``decode(_:)`` without making the bytes.
    static func isValid(_ text: Substring.UTF8View) -> Bool {
        // Over the bytes when they are contiguous (they are, in a native string): a view's indices, one at a time,
        // cost more than the test of the byte.
        text.count % 4 != 1
            && (text.withContiguousStorageIfAvailable { $0.allSatisfy { sextet($0) != nil } }
                ?? text.allSatisfy { sextet($0) != nil })
    }

    /// Encodes `bytes` without padding.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var output: [UInt8] = []
        var accumulator: UInt32 = 0
        var bits = 0
        for byte in bytes {
            accumulator = (accumulator << 8) | UInt32(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[Int((accumulator >> UInt32(bits)) & 0x3F)])
            }
        }
        if bits > 0 {
            output.append(alphabet[Int((accumulator << UInt32(6 - bits)) & 0x3F)])
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func sextet(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): byte - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
