// SPDX-License-Identifier: Apache-2.0
/// Strict base64url without padding (RFC 4648 section 5, as JWS compact serialisation uses it).
public enum Base64URL {
    /// Decodes `text` into `output` (room for `text.count * 3 / 4` bytes), four characters to three bytes through
    /// a table of the alphabet: the count written, or nil when `text` has a byte outside `A-Z a-z 0-9 - _`,
    /// padding, or an impossible length.
    static func decode(_ text: UnsafeBufferPointer<UInt8>, into output: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        let count = text.count
        guard count % 4 != 1, output.count >= count * 3 / 4 else { return nil }
        return sextets.withUnsafeBufferPointer { table -> Int? in
            // Every sextet read is or-ed in: one with the invalid bit makes the text no base64url.
            var seen: UInt8 = 0
            let whole = count & ~3
            var read = 0
            var write = 0
            while read < whole {
                let a = table[Int(text[read])]
                let b = table[Int(text[read + 1])]
                let c = table[Int(text[read + 2])]
                let d = table[Int(text[read + 3])]
                seen |= a | b | c | d
                let quad = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                output[write] = UInt8(truncatingIfNeeded: quad >> 16)
                output[write + 1] = UInt8(truncatingIfNeeded: quad >> 8)
                output[write + 2] = UInt8(truncatingIfNeeded: quad)
                read += 4
                write += 3
            }
            // Two characters left make one byte, three make two.
            if count - whole >= 2 {
                let a = table[Int(text[read])]
                let b = table[Int(text[read + 1])]
                let c = count - whole == 3 ? table[Int(text[read + 2])] : 0
                seen |= a | b | c
                let quad = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                output[write] = UInt8(truncatingIfNeeded: quad >> 16)
                write += 1
                if count - whole == 3 {
                    output[write] = UInt8(truncatingIfNeeded: quad >> 8)
                    write += 1
                }
            }
            return seen & invalid == 0 ? write : nil
        }
    }

    /// Whether `bytes` are base64url, as ``decode(_:into:)`` checks them.
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard bytes.count % 4 != 1 else { return false }
        return sextets.withUnsafeBufferPointer { sextets in
            var seen: UInt8 = 0
            for byte in bytes { seen |= sextets[Int(byte)] }
            return seen & invalid == 0
        }
    }

    /// What each byte is worth in the alphabet, or ``invalid``.
    private static let sextets: [UInt8] = (0...255).map { sextet(UInt8($0)) ?? invalid }
    /// Not in the alphabet: no sextet has this bit.
    private static let invalid: UInt8 = 0x80

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
