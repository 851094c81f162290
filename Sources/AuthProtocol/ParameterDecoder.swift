// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// Decodes a call's `parameters` object from its ``JSONValue`` into a method's `Decodable` parameters type,
/// strictly:
///
/// - a member the type does not read is an error (``ParameterDecodingError/unknown(_:)``), as systemd's
///   Varlink services answer it;
/// - a number that does not fit the type read (`-1` or `2^64` for a `UInt64`, `1.5` for an `Int`, `1e400` for
///   anything) is an error about that member, not about the whole message;
/// - every error names the top-level member it is about.
///
/// Only what the parameters types use is supported: objects, arrays, strings, booleans, numbers and null.
///
/// The client library reads the daemon's replies with it too (one JSON path per direction), leniently: a member
/// a newer daemon adds is ignored there.
package struct ParameterDecoder {
    /// Decodes `members` (the `parameters` object) as `Parameters`.
    ///
    /// - Parameter rejectingUnknownMembers: Whether a top-level member the type does not read is an error (a
    ///   call's parameters) or ignored (a reply's).
    package static func decode<Parameters: Decodable>(
        _ type: Parameters.Type, from members: [String: JSONValue], rejectingUnknownMembers: Bool = true
    ) throws(ParameterDecodingError) -> Parameters {
        let read = ReadMembers()
        let decoder = ValueDecoder(
            value: .object(members), codingPath: [], topLevel: rejectingUnknownMembers ? read : nil)
        let parameters: Parameters
        do {
            parameters = try Parameters(from: decoder)
        } catch let error as ParameterDecodingError {
            throw error
        } catch let error as DecodingError {
            throw .invalid(Self.member(of: error))
        } catch {
            // A type's own init(from:) threw something else: the parameters as a whole are wrong.
            throw .invalid(nil)
        }
        if rejectingUnknownMembers, let unknown = members.keys.filter({ !read.names.contains($0) }).min() {
            throw .unknown(unknown)
        }
        return parameters
    }

    /// A number as an integer of type `T`, as the decoder reads one: written as one (`5`), or as a number with
    /// an integral value in range (`5.0`, `5e0`); nil for anything else. (The client's hand-written reply
    /// readers read integers with it too, through ``uint64(_:)`` and ``int(_:)``.)
    package static func integer<T: FixedWidthInteger>(_ value: JSONValue, as type: T.Type) -> T? {
        guard case .number(let literal) = value else { return nil }
        if let exact = decimal(literal, as: type) { return exact }
        // Written as an integer but out of range: not rounded into range through a double.
        guard literal.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 | 0x20 == UInt8(ascii: "e") }) else {
            return nil
        }
        guard let number = Double(literal), number.isFinite, number == number.rounded(.towardZero) else { return nil }
        return T(exactly: number)
    }

    /// ``integer(_:as:)`` for `UInt64`, specialized here: a generic function called from another module runs
    /// unspecialized, with the runtime's witness lookups on a client's first call.
    package static func uint64(_ value: JSONValue) -> UInt64? { integer(value, as: UInt64.self) }

    /// ``integer(_:as:)`` for `Int`, specialized here.
    package static func int(_ value: JSONValue) -> Int? { integer(value, as: Int.self) }

    /// A literal of an optional minus and digits only, as `T`; nil for anything else or out of range. Read
    /// byte by byte: the standard library's `T(String)` makes generic metadata on its first use, which a client's
    /// first call would pay for.
    private static func decimal<T: FixedWidthInteger>(_ literal: String, as _: T.Type) -> T? {
        var value: T = 0
        var negative = false
        var digits = 0
        for byte in literal.utf8 {
            if byte == UInt8(ascii: "-"), digits == 0, !negative {
                negative = true
                continue
            }
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            let digit = T(byte - UInt8(ascii: "0"))
            let (tens, wide) = value.multipliedReportingOverflow(by: 10)
            let (next, over) =
                negative ? tens.subtractingReportingOverflow(digit) : tens.addingReportingOverflow(digit)
            guard !wide, !over else { return nil }
            value = next
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// The top-level member a decoding error is about.
    private static func member(of error: DecodingError) -> String? {
        switch error {
        case .keyNotFound(let key, let context): (context.codingPath + [key]).first?.stringValue
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            context.codingPath.first?.stringValue
        @unknown default: nil
        }
    }
}

/// Why parameters do not decode.
package enum ParameterDecodingError: Error, Equatable {
    /// A member is missing or of the wrong type or range; nil when the parameters as a whole are wrong.
    case invalid(String?)
    /// A member the method does not take.
    case unknown(String)
}

/// The names of the top-level members a type asked for.
private final class ReadMembers {
    var names: Set<String> = []
}

private struct Key: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = "\(intValue)"
        self.intValue = intValue
    }
}

private struct ValueDecoder: Decoder {
    let value: JSONValue
    let codingPath: [any CodingKey]
    /// Set for the top-level object only: records the members read.
    let topLevel: ReadMembers?
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<K: CodingKey>(keyedBy type: K.Type) throws -> KeyedDecodingContainer<K> {
        guard case .object(let members) = value else {
            throw DecodingError.typeMismatch(
                [String: Any].self, .init(codingPath: codingPath, debugDescription: "not an object"))
        }
        return KeyedDecodingContainer(
            KeyedContainer<K>(members: members, codingPath: codingPath, topLevel: topLevel))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else {
            throw DecodingError.typeMismatch(
                [Any].self, .init(codingPath: codingPath, debugDescription: "not an array"))
        }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValue(value: value, codingPath: codingPath)
    }
}

private struct KeyedContainer<K: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let codingPath: [any CodingKey]
    let topLevel: ReadMembers?

    var allKeys: [K] { members.keys.compactMap { K(stringValue: $0) } }

    func contains(_ key: K) -> Bool {
        topLevel?.names.insert(key.stringValue)
        return members[key.stringValue] != nil
    }

    private func value(_ key: K) throws -> JSONValue {
        topLevel?.names.insert(key.stringValue)
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing"))
        }
        return value
    }

    private func decoder(_ key: K) throws -> ValueDecoder {
        ValueDecoder(value: try value(key), codingPath: codingPath + [key], topLevel: nil)
    }

    func decodeNil(forKey key: K) throws -> Bool { try value(key) == .null }

    func decode<T: Decodable>(_ type: T.Type, forKey key: K) throws -> T {
        try SingleValue(value: try value(key), codingPath: codingPath + [key]).decode(type)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: K) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try decoder(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: K) throws -> any UnkeyedDecodingContainer {
        try decoder(key).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder {
        ValueDecoder(value: .object(members), codingPath: codingPath, topLevel: nil)
    }

    func superDecoder(forKey key: K) throws -> any Decoder { try decoder(key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private mutating func next() throws -> ValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                Any.self, .init(codingPath: codingPath, debugDescription: "no more elements"))
        }
        defer { currentIndex += 1 }
        return ValueDecoder(
            value: elements[currentIndex], codingPath: codingPath + [Key(intValue: currentIndex)], topLevel: nil)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let element = try next()
        return try SingleValue(value: element.value, codingPath: element.codingPath).decode(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
        -> KeyedDecodingContainer<NestedKey>
    {
        try next().container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try next().unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { try next() }
}

private struct SingleValue: SingleValueDecodingContainer {
    let value: JSONValue
    let codingPath: [any CodingKey]

    private func mismatch<T>(_ type: T.Type, _ what: String) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: what))
    }

    func decodeNil() -> Bool { value == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let bool) = value else { throw mismatch(type, "not a boolean") }
        return bool
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let string) = value else { throw mismatch(type, "not a string") }
        return string
    }

    func decode(_ type: Double.Type) throws -> Double {
        guard let number = value.double, number.isFinite else { throw mismatch(type, "not a finite number") }
        return number
    }

    func decode(_ type: Float.Type) throws -> Float {
        guard let number = value.double.map(Float.init), number.isFinite else {
            throw mismatch(type, "not a finite number")
        }
        return number
    }

    private func integer<T: FixedWidthInteger>(_ type: T.Type) throws -> T {
        guard case .number = value else { throw mismatch(type, "not a number") }
        guard let converted = ParameterDecoder.integer(value, as: type) else {
            throw mismatch(type, "not an integer in \(T.min)...\(T.max)")
        }
        return converted
    }

    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        // The standard types' init(from:) come back to the methods above through singleValueContainer().
        try T(from: ValueDecoder(value: value, codingPath: codingPath, topLevel: nil))
    }
}
