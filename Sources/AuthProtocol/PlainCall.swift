// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(Glibc)
    import Glibc
#endif

/// A call in the shape the clients send for GetToken, SetToken and the other calls of a group:
/// `{"method":"…","parameters":{"…":"…"}}` with one or two parameters, every string ASCII with no escape, JSON
/// whitespace anywhere between the tokens. Read in one pass over the bytes, where the JSON reader takes every
/// member through a closure; it finds what that reader finds for such a message (`VarlinkCall` reads any other
/// shape with it).
struct PlainCall {
    /// Where the method's name lies, inside its quotes.
    let method: Range<Int>
    /// Where the parameters' object lies.
    let parameters: Range<Int>
    /// Where the parameters' names and values lie, inside their quotes.
    let lone: VarlinkCall.PlainStrings

    /// The call `message` holds, or nil when it has another shape (or is no JSON).
    init?(_ message: UnsafeBufferPointer<UInt8>) {
        var reader = Reader(bytes: message)
        guard reader.take(UInt8(ascii: "{")), reader.name("method"), let method = reader.string(),
            reader.take(UInt8(ascii: ",")), reader.name("parameters")
        else { return nil }
        reader.skipSpace()
        let start = reader.index
        guard reader.take(UInt8(ascii: "{")), let first = reader.member() else { return nil }
        var second: VarlinkCall.PlainMember?
        if reader.take(UInt8(ascii: ",")) {
            guard let member = reader.member() else { return nil }
            second = member
        }
        guard reader.take(UInt8(ascii: "}")) else { return nil }
        let end = reader.index
        guard reader.take(UInt8(ascii: "}")) else { return nil }
        reader.skipSpace()
        guard reader.index == message.count else { return nil }
        self.method = method
        self.parameters = start..<end
        self.lone = VarlinkCall.PlainStrings(first: first, second: second)
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        /// Past JSON's whitespace (RFC 8259: space, tab, line feed, carriage return).
        mutating func skipSpace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        /// Past `byte`, after whitespace; false when another byte comes.
        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        /// A string of ASCII with no escape and no control character: where it lies inside its quotes.
        mutating func string() -> Range<Int>? {
            guard take(UInt8(ascii: "\"")), let end = JSONPlainString.end(in: bytes, from: index) else { return nil }
            defer { index = end + 1 }
            return index..<end
        }

        /// A member's name `literal` (plain ASCII) and its colon.
        mutating func name(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard take(UInt8(ascii: "\"")), index + count < bytes.count,
                memcmp(bytes.baseAddress! + index, literal.utf8Start, count) == 0,
                bytes[index + count] == UInt8(ascii: "\"")
            else { return false }
            index += count + 1
            return take(UInt8(ascii: ":"))
        }

        /// A member whose name and value are plain strings.
        mutating func member() -> VarlinkCall.PlainMember? {
            guard let name = string(), take(UInt8(ascii: ":")), let value = string() else { return nil }
            return (name, value)
        }
    }
}
