// SPDX-License-Identifier: Apache-2.0
/// Strict base64url without padding (RFC 4648 section 5, as JWS compact serialisation uses it).
public enum Base64URL {
    /// Decodes `text`, or returns nil when it has a byte outside `A-Z a-z 0-9 - _`, padding, or an
    /// impossible length.
    static func decode(_ text: Substring.UTF8View) -> [UInt8]? {
        text.withContiguousStorageIfAvailable { decode($0) } ?? Array(text).withUnsafeBufferPointer { decode($0) }
    }

    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        Array(text).withUnsafeBufferPointer { decode($0) }
    }

    /// Decodes contiguous bytes into an array of the decoded length, four characters to three bytes through a
    /// table of the alphabet: a byte at a time into a growing array cost most of a SetToken's reading of its token.
    static func decode(_ text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let count = text.count
        guard count % 4 != 1 else { return nil }
        return sextets.withUnsafeBufferPointer { table -> [UInt8]? in
            // Every sextet read is or-ed in: one with the invalid bit makes the text no base64url.
            var seen: UInt8 = 0
            let output = [UInt8](unsafeUninitializedCapacity: count * 3 / 4) { output, written in
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
                written = write
            }
            return seen & invalid == 0 ? output : nil
        }
    }

    /// Whether `text` would decode: the same check as ``decode(_:)`` without making the bytes.
    static func isValid(_ text: Substring.UTF8View) -> Bool {
        // Over the bytes when they are contiguous (they are, in a native string): a view's indices, one at a time,
        // cost more than the test of the byte. Start-up checks every stored token's text with it.
        guard text.count % 4 != 1 else { return false }
        return text.withContiguousStorageIfAvailable { isValid($0) }
            ?? Array(text).withUnsafeBufferPointer { isValid($0) }
    }

    private static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        sextets.withUnsafeBufferPointer { sextets in
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
