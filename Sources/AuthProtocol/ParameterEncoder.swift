// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// Encodes an `Encodable` value as JSON through ``JSONWriter``: how the daemon writes its replies and the library
/// its calls, as ``ParameterDecoder`` is how they read them.
///
/// It writes what Foundation's `JSONEncoder` writes with `.sortedKeys` and `.withoutEscapingSlashes` (the tests
/// compare the two), straight into bytes: members are written as they are encoded, and an object whose members
/// came out of order is put in order when it closes. A container closes when the value that opened it is done,
/// or when its parent writes again (a nested container).
///
/// - Throws: `EncodingError.invalidValue` for a double that is not finite, as `JSONEncoder` does; whatever a
///   type's own `encode(to:)` throws.
package enum ParameterEncoder {
    /// Appends `value` to `json`.
    package static func encode<Value: Encodable>(_ value: Value, into json: inout JSONWriter) throws {
        var taken = JSONWriter()
        swap(&taken, &json)
        let state = EncodingState(json: consume taken)
        defer { swap(&state.json, &json) }
        try state.encode(value, depth: 0, codingPath: [])
        state.close(downTo: 0)
        if state.json.bytes.count == state.valueStart { state.json.raw("{}") }
    }

    /// `value` as JSON bytes.
    package static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        var json = JSONWriter()
        try encode(value, into: &json)
        return json.bytes
    }
}

/// The bytes written and the containers still open, shared by the encoders and containers of one value.
private final class EncodingState {
    /// An open object or array.
    struct Frame {
        var isObject: Bool
        /// Members or elements written.
        var count = 0
        /// Where the last member's or element's value starts: one that wrote nothing (an unused `superEncoder`)
        /// gets `{}`, as `JSONEncoder` writes for a value that encodes nothing.
        var valueStart: Int
        /// The members' names and where each starts (at its name), to sort them when the object closes.
        var members: [(name: String, start: Int)] = []
        var inOrder = true
    }

    var json: JSONWriter
    var frames: [Frame] = []
    /// Where the top-level value starts.
    let valueStart: Int

    init(json: consuming JSONWriter) {
        self.json = json
        valueStart = self.json.bytes.count
    }

    /// Writes `value`: a primitive as itself, anything else through its `encode(to:)` with containers at `depth`.
    func encode<T: Encodable>(_ value: T, depth: Int, codingPath: [any CodingKey]) throws {
        switch value {
        case let string as String: json.string(string)
        case let truth as Bool: json.bool(truth)
        case let number as Int: json.integer(Int64(number))
        case let number as UInt64: json.integer(number)
        case let number as Double: try write(number, codingPath)
        default:
            try value.encode(to: ValueEncoder(state: self, depth: depth, codingPath: codingPath))
            close(downTo: depth)
        }
    }

    func write(_ value: Double, _ codingPath: [any CodingKey]) throws {
        guard json.number(value) else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: codingPath, debugDescription: "JSON cannot hold \(value)"))
        }
    }

    func write(_ value: Float, _ codingPath: [any CodingKey]) throws {
        guard json.number(value) else {
            throw EncodingError.invalidValue(
                value, .init(codingPath: codingPath, debugDescription: "JSON cannot hold \(value)"))
        }
    }

    func open(object: Bool) {
        frames.append(Frame(isObject: object, valueStart: json.bytes.count))
        json.bytes.append(object ? UInt8(ascii: "{") : UInt8(ascii: "["))
    }

    /// Closes the containers deeper than `count`.
    func close(downTo count: Int) {
        while frames.count > count {
            let frame = frames.removeLast()
            if frame.count > 0 && json.bytes.count == frame.valueStart { json.raw("{}") }
            if frame.isObject {
                if !frame.inOrder { sort(frame.members) }
                json.bytes.append(UInt8(ascii: "}"))
            } else {
                json.bytes.append(UInt8(ascii: "]"))
            }
        }
    }

    /// Starts member `name` of the object at `depth`.
    func member(_ name: String, of depth: Int) {
        close(downTo: depth + 1)
        separate(depth)
        if let last = frames[depth].members.last, name < last.name { frames[depth].inOrder = false }
        frames[depth].members.append((name, json.bytes.count))
        json.string(name)
        json.bytes.append(UInt8(ascii: ":"))
        frames[depth].valueStart = json.bytes.count
    }

    /// Starts the next element of the array at `depth`.
    func element(of depth: Int) {
        close(downTo: depth + 1)
        separate(depth)
        frames[depth].valueStart = json.bytes.count
    }

    private func separate(_ depth: Int) {
        if frames[depth].count > 0 {
            if json.bytes.count == frames[depth].valueStart { json.raw("{}") }
            json.bytes.append(UInt8(ascii: ","))
        }
        frames[depth].count += 1
    }

    /// Puts the members written since the first of `members` in order of their names.
    private func sort(_ members: [(name: String, start: Int)]) {
        let end = json.bytes.count
        let ranges = members.indices.map { index in
            // Each member but the last ends at the comma before the next.
            members[index].start..<(index + 1 < members.count ? members[index + 1].start - 1 : end)
        }
        var sorted: [UInt8] = []
        sorted.reserveCapacity(end - members[0].start)
        for index in members.indices.sorted(by: { members[$0].name < members[$1].name }) {
            if !sorted.isEmpty { sorted.append(UInt8(ascii: ",")) }
            sorted.append(contentsOf: json.bytes[ranges[index]])
        }
        json.bytes.replaceSubrange(members[0].start..<end, with: sorted)
    }
}

private struct ValueEncoder: Encoder {
    let state: EncodingState
    /// Where the container of this value goes in ``EncodingState/frames``.
    let depth: Int
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // Asked twice (a class and its superclass), the object already open is shared.
        if state.frames.count <= depth {
            state.close(downTo: depth)
            state.open(object: true)
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(state: state, depth: depth, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if state.frames.count <= depth {
            state.close(downTo: depth)
            state.open(object: false)
        }
        return UnkeyedContainer(state: state, depth: depth, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(state: state, depth: depth, codingPath: codingPath)
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: EncodingState
    let depth: Int
    let codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        state.json.raw("null")
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        state.json.bool(value)
    }

    mutating func encode(_ value: String, forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        state.json.string(value)
    }

    mutating func encode(_ value: Double, forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        try state.write(value, codingPath + [key])
    }

    mutating func encode(_ value: Float, forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        try state.write(value, codingPath + [key])
    }

    mutating func encode(_ value: Int, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { try integer(Int64(value), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { try integer(value, key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { try integer(UInt64(value), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { try integer(UInt64(value), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { try integer(UInt64(value), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { try integer(UInt64(value), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { try integer(value, key) }

    private func integer(_ value: Int64, _ key: Key) throws {
        state.member(key.stringValue, of: depth)
        state.json.integer(value)
    }

    private func integer(_ value: UInt64, _ key: Key) throws {
        state.member(key.stringValue, of: depth)
        state.json.integer(value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        try state.encode(value, depth: depth + 1, codingPath: codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        state.member(key.stringValue, of: depth)
        state.open(object: true)
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(state: state, depth: depth + 1, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        state.member(key.stringValue, of: depth)
        state.open(object: false)
        return UnkeyedContainer(state: state, depth: depth + 1, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder {
        state.member("super", of: depth)
        return ValueEncoder(state: state, depth: depth + 1, codingPath: codingPath)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        state.member(key.stringValue, of: depth)
        return ValueEncoder(state: state, depth: depth + 1, codingPath: codingPath + [key])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let state: EncodingState
    let depth: Int
    let codingPath: [any CodingKey]
    var count: Int { state.frames.count > depth ? state.frames[depth].count : 0 }

    mutating func encodeNil() throws {
        state.element(of: depth)
        state.json.raw("null")
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        state.element(of: depth)
        try state.encode(value, depth: depth + 1, codingPath: codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        state.element(of: depth)
        state.open(object: true)
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(state: state, depth: depth + 1, codingPath: codingPath))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        state.element(of: depth)
        state.open(object: false)
        return UnkeyedContainer(state: state, depth: depth + 1, codingPath: codingPath)
    }

    mutating func superEncoder() -> any Encoder {
        state.element(of: depth)
        return ValueEncoder(state: state, depth: depth + 1, codingPath: codingPath)
    }
}

private struct SingleValueContainer: SingleValueEncodingContainer {
    let state: EncodingState
    let depth: Int
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { state.json.raw("null") }
    mutating func encode(_ value: Bool) throws { state.json.bool(value) }
    mutating func encode(_ value: String) throws { state.json.string(value) }
    mutating func encode(_ value: Double) throws { try state.write(value, codingPath) }
    mutating func encode(_ value: Float) throws { try state.write(value, codingPath) }
    mutating func encode(_ value: Int) throws { state.json.integer(Int64(value)) }
    mutating func encode(_ value: Int8) throws { state.json.integer(Int64(value)) }
    mutating func encode(_ value: Int16) throws { state.json.integer(Int64(value)) }
    mutating func encode(_ value: Int32) throws { state.json.integer(Int64(value)) }
    mutating func encode(_ value: Int64) throws { state.json.integer(value) }
    mutating func encode(_ value: UInt) throws { state.json.integer(UInt64(value)) }
    mutating func encode(_ value: UInt8) throws { state.json.integer(UInt64(value)) }
    mutating func encode(_ value: UInt16) throws { state.json.integer(UInt64(value)) }
    mutating func encode(_ value: UInt32) throws { state.json.integer(UInt64(value)) }
    mutating func encode(_ value: UInt64) throws { state.json.integer(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try state.encode(value, depth: depth, codingPath: codingPath)
    }
}
