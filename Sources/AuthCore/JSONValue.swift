// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A JSON value (RFC 8259), parsed strictly from UTF-8 bytes in one pass.
///
/// The daemon reads small JSON documents on its hot paths: a token's header and payload (two per token, on every
/// set and for every stored record at start-up) and the store's records. Foundation's `JSONDecoder` made them most
/// of a large store's start-up; this parser reads them into one small tree with few allocations. It accepts what
/// RFC 8259 allows and nothing more: Foundation's parser also takes a trailing comma (`[1,]`), this one does
/// not (the tests compare the two).
///
/// Numbers keep their literal text, so a caller reads a `UInt64` or a `Double` without losing precision; a
/// number beyond the range of `Double` is refused, as Foundation refuses it.
/// A member name that appears twice keeps its last value. Nesting is bounded by ``maximumDepth``.
///
/// ```swift
/// let value = try JSONValue(parsing: Array(#"{"exp": 1767225600, "ids": {"registered": "a"}}"#.utf8))
/// value["exp"]?.double        // 1767225600.0
/// value["ids"]?.stringMap     // ["registered": "a"]
/// ```
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number, as its literal text (`-1.5e3`).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// The deepest nesting of arrays and objects accepted.
    package static let maximumDepth = 64

    /// Parses one JSON document; only whitespace may follow it.
    ///
    /// - Throws: ``JSONSyntaxError`` with the byte offset of the first thing that is wrong.
    ///
    /// - Parameter keepingNumbersOutOfRange: Keep a number beyond the range of `Double` (`1e400`) as its literal
    ///   instead of refusing the document, so that a caller can say which member holds it (``double`` is then
    ///   nil for it).
    package init(parsing bytes: some Collection<UInt8>, keepingNumbersOutOfRange: Bool = false)
        throws(JSONSyntaxError)
    {
        let keep = keepingNumbersOutOfRange
        let parsed = bytes.withContiguousStorageIfAvailable {
            JSONParser.parseDocument($0, keepingNumbersOutOfRange: keep)
        }
        switch parsed
            ?? Array(bytes).withUnsafeBufferPointer({ JSONParser.parseDocument($0, keepingNumbersOutOfRange: keep) })
        {
        case .success(let value): self = value
        case .failure(let error): throw error
        }
    }

    /// Parses one JSON document and hands a reader of it to `read`, which takes the value whole or, for an
    /// object, member by member (``JSONValueReader``): for a caller that builds its own value from a few known
    /// members (a reply the client reads), without a dictionary for each object. What `read` does not take is
    /// parsed and dropped; only whitespace may follow the document. An object's members are handed over in
    /// order, a member named twice twice, so keeping the last one gives what
    /// ``init(parsing:keepingNumbersOutOfRange:)`` gives.
    ///
    /// - Throws: ``JSONSyntaxError`` as ``init(parsing:keepingNumbersOutOfRange:)`` throws it.
    package static func read(
        _ bytes: UnsafeBufferPointer<UInt8>, keepingNumbersOutOfRange: Bool = false,
        _ read: (inout JSONValueReader) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        try JSONParser.parseWhole(bytes, keepingNumbersOutOfRange: keepingNumbersOutOfRange) {
            parser throws(JSONSyntaxError) in
            try JSONValueReader.reading(&parser, depth: 0, read)
        }.get()
    }

    /// Parses one JSON document that is an object and hands each of its members in order to `member`, as
    /// ``read(_:keepingNumbersOutOfRange:_:)`` and ``JSONValueReader/members(_:)`` do: the top level of a call, a
    /// reply or a stored record.
    ///
    /// - Returns: False when the bytes are no JSON document, or one that is not an object.
    package static func readObject(
        _ bytes: UnsafeBufferPointer<UInt8>, keepingNumbersOutOfRange: Bool = false,
        _ member: (JSONMemberName, inout JSONValueReader) throws(JSONSyntaxError) -> Void
    ) -> Bool {
        var isObject = true
        let parsed =
            (try? read(bytes, keepingNumbersOutOfRange: keepingNumbersOutOfRange) { document throws(JSONSyntaxError) in
                guard document.isObject else {
                    isObject = false
                    return
                }
                try document.members(member)
            }) != nil
        return parsed && isObject
    }

    /// The member `name` of an object; nil for a missing member or a value that is not an object.
    package subscript(name: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members[name]
    }

    /// A number as a `Double` (the nearest one); nil for a number beyond its range, and for anything else.
    package var double: Double? {
        guard case .number(let literal) = self else { return nil }
        // A non-negative integer of up to 15 digits (a time in seconds) is exact as an Int64, converted without
        // strtod, which is most of a GetToken reply's reading otherwise.
        if literal.utf8.count <= 15, literal.utf8.first != UInt8(ascii: "-"), let integer = Int64(literal) {
            return Double(integer)
        }
        guard let number = Double(literal), number.isFinite else { return nil }
        return number
    }

    /// A number written as a non-negative integer that fits a `UInt64`; nil for anything else.
    package var uint64: UInt64? {
        guard case .number(let literal) = self else { return nil }
        return UInt64(literal)
    }

    /// A number written as an integer that fits an `Int`; nil for anything else.
    package var int: Int? {
        guard case .number(let literal) = self else { return nil }
        return Int(literal)
    }

    /// A string's value; nil for anything else.
    package var string: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// An object whose members are all strings; nil for anything else.
    package var stringMap: [String: String]? {
        guard case .object(let members) = self else { return nil }
        var map: [String: String] = [:]
        map.reserveCapacity(members.count)
        for (name, value) in members {
            guard case .string(let string) = value else { return nil }
            map[name] = string
        }
        return map
    }
}

/// Why bytes are not a JSON document: what was wrong, and where.
package struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The byte offset where parsing stopped.
    package var offset: Int
    /// What was expected or found there.
    package var problem: String

    package var description: String { "not valid JSON at byte \(offset): \(problem)" }
}

/// A member's name as the parser hands it over: compared with a literal (`case "method":`) without making a
/// `String` of it, which is most of what reading a known member of a small object costs.
///
/// It may point into the bytes being parsed, so it is valid only inside the closure it is handed to; keep
/// ``string`` instead.
package struct JSONMemberName {
    /// The name's bytes when it is ASCII and has no escape (most names); otherwise nil and `unescaped` holds it.
    private let bytes: UnsafeBufferPointer<UInt8>?
    private let unescaped: String

    fileprivate init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
        self.unescaped = ""
    }

    fileprivate init(string: String) {
        self.bytes = nil
        self.unescaped = string
    }

    /// Where the name's characters lie in `document`, the buffer being parsed, when it is ASCII with no escape;
    /// nil otherwise.
    package func place(in document: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard let bytes, let start = bytes.baseAddress, let base = document.baseAddress else { return nil }
        let offset = start - base
        return offset..<offset + bytes.count
    }

    /// The name as a string.
    package var string: String {
        guard let bytes else { return unescaped }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether the name is `literal`.
    package static func ~= (literal: StaticString, name: JSONMemberName) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard let bytes = name.bytes else {
            return name.unescaped.utf8.elementsEqual(UnsafeBufferPointer(start: literal.utf8Start, count: count))
        }
        guard bytes.count == count else { return false }
        return count == 0 || memcmp(bytes.baseAddress!, literal.utf8Start, count) == 0
    }
}

/// One value of a document being parsed (``JSONValue/read(_:_:)``): taken whole with ``value()``, or, when it is an
/// object, member by member with ``members(_:)``, each member's value a reader in turn. Only one of the two may
/// be called, once.
package struct JSONValueReader {
    fileprivate var parser: JSONParser
    fileprivate let depth: Int
    fileprivate var taken = false

    /// Whether the value is an object.
    package var isObject: Bool { parser.current == UInt8(ascii: "{") }

    /// The parser's place in the document: the value's first byte before it is read, the byte after it once read.
    package var position: Int { parser.index }

    /// The value, parsed whole.
    package mutating func value() throws(JSONSyntaxError) -> JSONValue {
        precondition(!taken, "a JSON value is read once")
        taken = true
        return try parser.parseValue(depth: depth)
    }

    /// The object's members in order, each name (a ``JSONMemberName``, valid inside `member`) handed to `member`
    /// with a reader of its value (a value `member` does not read is parsed and dropped). A member named twice is
    /// handed over twice.
    ///
    /// - Throws: ``JSONSyntaxError``, also when the value is not an object.
    package mutating func members(
        _ member: (JSONMemberName, inout JSONValueReader) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        precondition(!taken, "a JSON value is read once")
        taken = true
        guard isObject else { throw parser.error("expected an object") }
        try parser.parseMembers(depth: depth + 1) { name, parser throws(JSONSyntaxError) in
            try Self.reading(&parser, depth: depth + 1) { value throws(JSONSyntaxError) in try member(name, &value) }
        }
    }

    /// Where the value lies in the document, checked as ``value()`` checks it but made into nothing: for a value
    /// read later, if at all (a call's parameters, once its method is known).
    package mutating func skip() throws(JSONSyntaxError) -> Range<Int> {
        precondition(!taken, "a JSON value is read once")
        taken = true
        let start = parser.index
        try parser.skipValue(depth: depth)
        return start..<parser.index
    }

    /// Where a string's characters lie in the document, when it is ASCII with no escape (a method's name): its
    /// value is those bytes. Nil, with nothing read, for any other string or value.
    package mutating func plainString() -> Range<Int>? {
        precondition(!taken, "a JSON value is read once")
        guard parser.current == UInt8(ascii: "\"") else { return nil }
        var probe = parser
        probe.index += 1
        let start = probe.index
        guard probe.scanRun(), probe.current == UInt8(ascii: "\"") else { return nil }
        taken = true
        parser.index = probe.index + 1
        return start..<probe.index
    }

    /// An object whose members are all strings, read member by member straight into the dictionary (the last of
    /// a name counts); nil, once the value is parsed, for anything else, and for an object with a member that is
    /// not a string.
    package mutating func stringMap() throws(JSONSyntaxError) -> [String: String]? {
        guard isObject else {
            _ = try value()
            return nil
        }
        var map: [String: String] = [:]
        var valid = true
        try members { name, value throws(JSONSyntaxError) in
            guard case .string(let string) = try value.value() else {
                valid = false
                return
            }
            if valid { map[name.string] = string }
        }
        return valid ? map : nil
    }

    /// Runs `read` on a reader of the value at the parser, then parses what it left.
    fileprivate static func reading(
        _ parser: inout JSONParser, depth: Int, _ read: (inout JSONValueReader) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        var reader = JSONValueReader(parser: parser, depth: depth)
        try read(&reader)
        if !reader.taken { _ = try reader.parser.parseValue(depth: depth) }
        parser = reader.parser
    }
}

/// The recursive-descent parser behind ``JSONValue``, over a buffer the caller keeps alive.
/// A string's text, read where a hand-written reader of one message's shape needs it (`PlainCall`).
package enum JSONPlainString {
    /// The index of the closing quote of the string whose text starts at `start` (past its opening quote), when the
    /// text is ASCII with no escape and no control character: as the JSON reader scans it, eight bytes at a time.
    package static func end(in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var parser = JSONParser(bytes: bytes, keepingNumbersOutOfRange: false, index: start)
        guard parser.scanRun(), parser.current == UInt8(ascii: "\"") else { return nil }
        return parser.index
    }
}

private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let keepingNumbersOutOfRange: Bool
    var index = 0

    static func parseDocument(_ bytes: UnsafeBufferPointer<UInt8>, keepingNumbersOutOfRange: Bool)
        -> Result<JSONValue, JSONSyntaxError>
    {
        var value = JSONValue.null
        return parseWhole(bytes, keepingNumbersOutOfRange: keepingNumbersOutOfRange) { parser throws(JSONSyntaxError) in
            value = try parser.parseValue(depth: 0)
        }.map { value }
    }

    /// Parses one document with `body`, which reads its value; only whitespace may surround it.
    static func parseWhole(
        _ bytes: UnsafeBufferPointer<UInt8>, keepingNumbersOutOfRange: Bool,
        _ body: (inout JSONParser) throws(JSONSyntaxError) -> Void
    ) -> Result<Void, JSONSyntaxError> {
        var parser = JSONParser(bytes: bytes, keepingNumbersOutOfRange: keepingNumbersOutOfRange)
        do throws(JSONSyntaxError) {
            parser.skipWhitespace()
            try body(&parser)
            parser.skipWhitespace()
            guard parser.index == bytes.count else { throw parser.error("unexpected data after the value") }
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    func error(_ problem: String) -> JSONSyntaxError { JSONSyntaxError(offset: index, problem: problem) }

    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipWhitespace() {
        while let byte = current, byte == .space || byte == .tab || byte == .newline || byte == .carriageReturn {
            index += 1
        }
    }

    mutating func expect(_ literal: StaticString, _ value: JSONValue) throws(JSONSyntaxError) -> JSONValue {
        let count = literal.utf8CodeUnitCount
        guard bytes.count - index >= count,
            UnsafeBufferPointer(rebasing: bytes[index..<index + count]).elementsEqual(
                UnsafeBufferPointer(start: literal.utf8Start, count: count))
        else { throw error("expected \(literal)") }
        index += count
        return value
    }

    mutating func parseValue(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard let byte = current else { throw error("expected a value, found the end") }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("expected a value")
        }
    }

    mutating func parseObject(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        var members: [String: JSONValue] = [:]
        try parseMembers(depth: depth) { name, parser throws(JSONSyntaxError) in
            let value = try parser.parseValue(depth: depth)
            // Room for six at the first member: grown one member at a time, the dictionary was allocated again and
            // every member hashed again at the second, third and fourth (a GetToken reply's objects have one to
            // four, on every call of a client). An empty object allocates nothing.
            if members.isEmpty { members = Dictionary(minimumCapacity: 6) }
            members[name.string] = value
        }
        return .object(members)
    }

    /// An object from its opening brace, each member's name handed to `member` in order with the parser at its
    /// value, which `member` must parse (at `depth`).
    mutating func parseMembers(
        depth: Int, _ member: (JSONMemberName, inout JSONParser) throws(JSONSyntaxError) -> Void
    ) throws(JSONSyntaxError) {
        guard depth <= JSONValue.maximumDepth else { throw error("nested deeper than \(JSONValue.maximumDepth)") }
        index += 1  // {
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            index += 1
            return
        }
        while true {
            guard current == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let name = try parseName()
            skipWhitespace()
            guard current == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            try member(name, &self)
            skipWhitespace()
            switch current {
            case UInt8(ascii: ",")?:
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}")?:
                index += 1
                return
            default:
                throw error("expected ',' or '}'")
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        var elements: [JSONValue] = []
        try parseElements(depth: depth) { parser throws(JSONSyntaxError) in
            elements.append(try parser.parseValue(depth: depth))
        }
        return .array(elements)
    }

    /// An array from its opening bracket, `element` called with the parser at each element, which it must parse
    /// (at `depth`).
    mutating func parseElements(depth: Int, _ element: (inout JSONParser) throws(JSONSyntaxError) -> Void)
        throws(JSONSyntaxError)
    {
        guard depth <= JSONValue.maximumDepth else { throw error("nested deeper than \(JSONValue.maximumDepth)") }
        index += 1  // [
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            index += 1
            return
        }
        while true {
            try element(&self)
            skipWhitespace()
            switch current {
            case UInt8(ascii: ",")?:
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]")?:
                index += 1
                return
            default:
                throw error("expected ',' or ']'")
            }
        }
    }

    /// Moves past one value, checked as ``parseValue(depth:)`` checks it, making nothing of it but what a string
    /// with escapes or a long number needs.
    mutating func skipValue(depth: Int) throws(JSONSyntaxError) {
        switch current {
        case UInt8(ascii: "{")?:
            try parseMembers(depth: depth + 1) { _, parser throws(JSONSyntaxError) in
                try parser.skipValue(depth: depth + 1)
            }
        case UInt8(ascii: "[")?:
            try parseElements(depth: depth + 1) { parser throws(JSONSyntaxError) in
                try parser.skipValue(depth: depth + 1)
            }
        case UInt8(ascii: "\"")?:
            let quote = index
            index += 1
            if scanRun(), current == UInt8(ascii: "\"") {
                index += 1
                return
            }
            index = quote
            _ = try parseString()
        default:
            _ = try parseValue(depth: depth)
        }
    }

    /// A member's name from its opening quote: its bytes in the buffer when it is ASCII without escapes (no
    /// String is made for a name that is only compared), else its string.
    mutating func parseName() throws(JSONSyntaxError) -> JSONMemberName {
        let quote = index
        index += 1
        let start = index
        if scanRun(), current == UInt8(ascii: "\"") {
            index += 1
            return JSONMemberName(bytes: UnsafeBufferPointer(rebasing: bytes[start..<index - 1]))
        }
        index = quote
        return JSONMemberName(string: try parseString())
    }

    /// A string from its opening quote; the fast path copies a run without escapes in one go.
    mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1  // "
        let start = index
        let ascii = scanRun()
        guard let stop = current else { throw error("unterminated string") }
        guard stop >= 0x20 else { throw error("control character in a string") }
        if stop == UInt8(ascii: "\"") {
            let run = UnsafeBufferPointer(rebasing: bytes[start..<index])
            let string = ascii ? String(decoding: run, as: UTF8.self) : try Self.string(run, at: start)
            index += 1
            return string
        }
        var unescaped = Array(bytes[start..<index])
        while true {
            guard let byte = current else { throw error("unterminated string") }
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try unescaped.withUnsafeBufferPointer { run throws(JSONSyntaxError) in
                    try Self.string(run, at: start)
                }
            case UInt8(ascii: "\\"):
                index += 1
                try parseEscape(into: &unescaped)
            case ..<0x20:
                throw error("control character in a string")
            default:
                unescaped.append(byte)
                index += 1
            }
        }
    }

    /// Moves past the run up to a quote, a backslash or a control character (a token is most of a reply's bytes):
    /// eight bytes at a time, the first one that stops the run found within its word, then, near the end of the
    /// buffer, a byte at a time. Returns whether the run is ASCII.
    fileprivate mutating func scanRun() -> Bool {
        var highBits: UInt64 = 0
        if let base = bytes.baseAddress {
            while index &+ 8 <= bytes.count {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                let stops = Self.stops(word)
                if stops != 0 {
                    let before = stops.trailingZeroBitCount / 8
                    highBits |= word & ((1 &<< UInt64(before &* 8)) &- 1)
                    index &+= before
                    return highBits & Self.highBits == 0
                }
                highBits |= word
                index &+= 8
            }
        }
        var high: UInt8 = highBits & Self.highBits == 0 ? 0 : 0x80
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
            high |= byte
            index += 1
        }
        return high < 0x80
    }

    private static let highBits: UInt64 = 0x8080_8080_8080_8080
    private static let ones: UInt64 = 0x0101_0101_0101_0101

    /// The high bit of each byte of `word` (its first byte the lowest) that is a quote, a backslash or a control
    /// character (below 0x20), by the bit trick for "a byte of w is 0" (or "below n"), `(w - n·0x01…) & ~w &
    /// 0x80…`. A byte after one that is flagged may be flagged wrongly, as the subtraction's borrow runs upward,
    /// but none before it: the lowest bit set marks the first such byte exactly, and no bit set means none.
    @inline(__always)
    private static func stops(_ word: UInt64) -> UInt64 {
        let quote = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslash = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        let found =
            ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
        return found & highBits
    }

    /// The string of `run`, which must be valid UTF-8. (Decoding, then comparing, is faster here than the
    /// standard library's generic `String(validating:as:)`.)
    static func string(_ run: UnsafeBufferPointer<UInt8>, at offset: Int) throws(JSONSyntaxError) -> String {
        let string = String(decoding: run, as: UTF8.self)
        // Decoding replaces each invalid sequence with U+FFFD, so valid input is exactly what comes back.
        guard string.utf8.count == run.count, string.utf8.elementsEqual(run) else {
            throw JSONSyntaxError(offset: offset, problem: "invalid UTF-8 in a string")
        }
        return string
    }

    mutating func parseEscape(into output: inout [UInt8]) throws(JSONSyntaxError) {
        guard let byte = current else { throw error("unterminated escape") }
        index += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output.append(byte)
        case UInt8(ascii: "b"): output.append(0x08)
        case UInt8(ascii: "f"): output.append(0x0C)
        case UInt8(ascii: "n"): output.append(.newline)
        case UInt8(ascii: "r"): output.append(.carriageReturn)
        case UInt8(ascii: "t"): output.append(.tab)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try parseHex4())
            if (0xD800...0xDBFF).contains(scalar) {
                guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
                else { throw error("lone high surrogate") }
                index += 2
                let low = UInt32(try parseHex4())
                guard (0xDC00...0xDFFF).contains(low) else { throw error("high surrogate without a low one") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw error("lone low surrogate")
            }
            // Not a surrogate, or a valid pair: always a Unicode scalar.
            output.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
        default:
            index -= 1
            throw error("invalid escape")
        }
    }

    mutating func parseHex4() throws(JSONSyntaxError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw error("short \\u escape") }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("invalid \\u escape")
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, kept as text.
    mutating func parseNumber() throws(JSONSyntaxError) -> JSONValue {
        let start = index
        if current == UInt8(ascii: "-") { index += 1 }
        switch current {
        case UInt8(ascii: "0")?:
            index += 1
        case (UInt8(ascii: "1")...UInt8(ascii: "9"))?:
            skipDigits()
        default:
            throw error("expected a digit")
        }
        var integer = true
        if current == UInt8(ascii: ".") {
            integer = false
            index += 1
            guard isDigit(current) else { throw error("expected a digit after '.'") }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            integer = false
            index += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
            guard isDigit(current) else { throw error("expected a digit in the exponent") }
            skipDigits()
        }
        let literal = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        // As Foundation's parser does, refuse a number no Double can hold (1e400); a tiny one reads as zero. An
        // integer of fewer than 300 digits always fits (and is not given to strtod to find out).
        guard keepingNumbersOutOfRange || (integer && index - start < 300) || Double(literal)?.isFinite == true else {
            index = start
            throw error("number out of range")
        }
        return .number(literal)
    }

    func isDigit(_ byte: UInt8?) -> Bool {
        guard let byte else { return false }
        return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    mutating func skipDigits() {
        while isDigit(current) { index += 1 }
    }
}

extension UInt8 {
    fileprivate static let space = UInt8(ascii: " ")
    fileprivate static let tab = UInt8(ascii: "\t")
    fileprivate static let newline = UInt8(ascii: "\n")
    fileprivate static let carriageReturn = UInt8(ascii: "\r")
}
