// SPDX-License-Identifier: Apache-2.0

/// Writes JSON (RFC 8259) into bytes: the one JSON writer of the daemon, the store, the library and authctl, as
/// ``JSONValue`` is the one reader.
///
/// It writes what Foundation's `JSONEncoder` writes with `.sortedKeys` and `.withoutEscapingSlashes`: no white
/// space; in strings, `"` and `\` escaped, `\b \f \n \r \t` short, other control characters as `\u00XX`, `/` and
/// everything else as it is; a double as its shortest form, without a trailing `.0`. The caller writes the
/// structure, in order; ``value(_:)`` writes a whole ``JSONValue`` with its members sorted by name.
///
/// ```swift
/// var json = JSONWriter()
/// json.raw(#"{"group":"#)
/// json.string("shop")
/// json.raw("}")
/// json.bytes  // {"group":"shop"}
/// ```
package struct JSONWriter: Sendable {
    /// What is written so far.
    package var bytes: [UInt8] = []

    package init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// Appends `literal` as it is: punctuation, names that need no escape, `true`, `null`.
    @inlinable
    package mutating func raw(_ literal: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `value` as a JSON string. The runs that need no escape (most strings, whole) are copied at once.
    package mutating func string(_ value: String) {
        var value = value
        value.withUTF8 { string(utf8: $0) }
    }

    /// Appends the UTF-8 bytes `utf8` as a JSON string.
    package mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        var run = 0
        for index in utf8.indices {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<index]))
            run = index + 1
            escape(byte)
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends a whole number in decimal, without making a string of it.
    package mutating func integer(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        integer(value.magnitude)
    }

    /// Appends a whole number in decimal, without making a string of it.
    package mutating func integer(_ value: UInt64) {
        var rest = value
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    /// Appends a finite double in its shortest form (`1.5`, `1e+16`), an integral one without `.0`.
    ///
    /// - Returns: false, writing nothing, for infinity and NaN, which JSON cannot hold.
    @discardableResult
    package mutating func number(_ value: Double) -> Bool {
        guard value.isFinite else { return false }
        shortest(value.description)
        return true
    }

    /// ``number(_:)-(Double)`` for a float, in its own shortest form (`1.1`, not `1.100000023841858`).
    @discardableResult
    package mutating func number(_ value: Float) -> Bool {
        guard value.isFinite else { return false }
        shortest(value.description)
        return true
    }

    private mutating func shortest(_ description: String) {
        var text = description
        text.withUTF8 { digits in
            let integral = digits.count > 2 && digits[digits.count - 2] == UInt8(ascii: ".") && digits.last == 0x30
            bytes.append(contentsOf: integral ? UnsafeBufferPointer(rebasing: digits.dropLast(2)) : digits)
        }
    }

    /// Appends `true` or `false`.
    package mutating func bool(_ value: Bool) {
        value ? raw("true") : raw("false")
    }

    /// Appends `members` as an object of strings, sorted by name.
    package mutating func stringMap(_ members: [String: String]) {
        object(members) { $0.string($1) }
    }

    /// Appends `value`, objects with their members sorted by name; a number as its literal.
    package mutating func value(_ value: JSONValue) {
        switch value {
        case .null: raw("null")
        case .bool(let truth): bool(truth)
        case .number(let literal): bytes.append(contentsOf: literal.utf8)
        case .string(let text): string(text)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                self.value(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            object(members) { $0.value($1) }
        }
    }

    /// Appends `members` as an object, sorted by name, each value written by `write`.
    private mutating func object<Member>(_ members: [String: Member], _ write: (inout JSONWriter, Member) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        for (index, (name, member)) in members.sorted(by: { $0.key < $1.key }).enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            string(name)
            bytes.append(UInt8(ascii: ":"))
            write(&self, member)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func escape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "n"))
        case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "r"))
        case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "t"))
        case ..<0x20:
            raw("u00")
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0xF))
        default: bytes.append(byte)
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
