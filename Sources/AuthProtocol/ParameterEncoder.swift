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
        try state.encode(value, depth: 0)
        if state.json.bytes.count == state.valueStart { state.json.raw("{}") }
    }

    /// `value` as JSON bytes.
    package static func encode<Value: Encodable>(_ value: Value) throws -> [UInt8] {
        var json = JSONWriter()
        try encode(value, into: &json)
        return json.bytes
    }
}

/// The bytes written and the containers still open, shared by the encoders and containers of one value. Used by
/// one encoding on one thread: its properties need no runtime exclusivity checks.
private final class EncodingState {
    /// An open object or array.
    struct Frame {
        var isObject: Bool
        /// Members or elements written.
        var count = 0
        /// Where the last member's or element's value starts: one that wrote nothing (an unused `superEncoder`)
        /// gets `{}`, as `JSONEncoder` writes for a value that encodes nothing.
        var valueStart: Int
        /// Where this object's members start in ``EncodingState/members``.
        var firstMember: Int
        var inOrder = true
    }

    /// A member written: its name, and where it starts (at its name).
    struct Member {
        var name: String
        var start: Int
    }

    @exclusivity(unchecked) var json: JSONWriter
    @exclusivity(unchecked) var frames: [Frame] = []
    /// The members of the open objects, outermost first, to sort them when their object closes.
    @exclusivity(unchecked) var members: [Member] = []
    /// Where the top-level value starts.
    let valueStart: Int

    init(json: consuming JSONWriter) {
        self.json = json
        valueStart = self.json.bytes.count
    }

    /// Writes `value` through its `encode(to:)`, its container at `depth`. A primitive writes itself through a
    /// single value container: asking its type first (`as? String`) costs a dynamic cast for every value.
    func encode<T: Encodable>(_ value: T, depth: Int) throws {
        // A string map (customer ids) goes straight to the writer, sorted as it writes: through `Dictionary`'s
        // own `encode(to:)` each key would become a coding key and each member a container's, put in order after.
        // The type is compared, not cast: a cast would cost every value.
        if T.self == [String: String].self {
            json.stringMap(unsafeBitCast(value, to: [String: String].self))
            close(downTo: depth)
            return
        }
        try value.encode(to: ValueEncoder(state: self, depth: depth))
        close(downTo: depth)
    }

    func write(_ value: Double, depth: Int) throws {
        guard json.number(value) else { throw notANumber(value, depth) }
    }

    func write(_ value: Float, depth: Int) throws {
        guard json.number(value) else { throw notANumber(value, depth) }
    }

    private func notANumber(_ value: Any, _ depth: Int) -> EncodingError {
        .invalidValue(value, .init(codingPath: codingPath(depth), debugDescription: "JSON cannot hold \(value)"))
    }

    /// The coding path of a value whose container would be at `depth`: the names and indexes written so far. Made
    /// only when asked (an error, a type's own `encode(to:)`), not for every value.
    func codingPath(_ depth: Int) -> [any CodingKey] {
        frames.indices.prefix(depth).map { level -> any CodingKey in
            guard frames[level].isObject else { return PathKey(index: frames[level].count - 1) }
            // The object's members end where the next container's start.
            let end = level + 1 < frames.count ? frames[level + 1].firstMember : members.count
            return PathKey(members[end - 1].name)
        }
    }

    func open(object: Bool) {
        frames.append(Frame(isObject: object, valueStart: json.bytes.count, firstMember: members.count))
        json.bytes.append(object ? UInt8(ascii: "{") : UInt8(ascii: "["))
    }

    /// Closes the containers deeper than `count`.
    func close(downTo count: Int) {
        while frames.count > count {
            let frame = frames.removeLast()
            if frame.count > 0 && json.bytes.count == frame.valueStart { json.raw("{}") }
            if frame.isObject {
                if !frame.inOrder { sortMembers(from: frame.firstMember) }
                members.removeSubrange(frame.firstMember...)
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
        if members.count > frames[depth].firstMember, name < members[members.count - 1].name {
            frames[depth].inOrder = false
        }
        members.append(Member(name: name, start: json.bytes.count))
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

    /// Puts the members written since `first` in order of their names, in place: the same bytes, moved.
    private func sortMembers(from first: Int) {
        let end = json.bytes.count
        let start = members[first].start
        let region = Array(json.bytes[start..<end])
        let order = members.indices[first...].sorted { members[$0].name < members[$1].name }
        json.bytes.withUnsafeMutableBufferPointer { bytes in
            region.withUnsafeBufferPointer { source in
                var position = start
                for index in order {
                    // Each member but the last ends at the comma before the next.
                    let memberEnd = index + 1 < members.count ? members[index + 1].start - 1 : end
                    if position > start {
                        bytes[position] = UInt8(ascii: ",")
                        position += 1
                    }
                    let length = memberEnd - members[index].start
                    (bytes.baseAddress! + position).update(
                        from: source.baseAddress! + (members[index].start - start), count: length)
                    position += length
                }
            }
        }
    }
}

/// A name or an index in a coding path made for an error.
private struct PathKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    init(index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }
    init?(intValue: Int) { self.init(index: intValue) }
}

private struct ValueEncoder: Encoder {
    let state: EncodingState
    /// Where the container of this value goes in ``EncodingState/frames``.
    let depth: Int
    var codingPath: [any CodingKey] { state.codingPath(depth) }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        // Asked twice (a class and its superclass), the object already open is shared.
        if state.frames.count <= depth {
            state.close(downTo: depth)
            state.open(object: true)
        }
        return KeyedEncodingContainer(KeyedContainer<Key>(state: state, depth: depth))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if state.frames.count <= depth {
            state.close(downTo: depth)
            state.open(object: false)
        }
        return UnkeyedContainer(state: state, depth: depth)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        SingleValueContainer(state: state, depth: depth)
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: EncodingState
    let depth: Int
    var codingPath: [any CodingKey] { state.codingPath(depth) }

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
        try state.write(value, depth: depth + 1)
    }

    mutating func encode(_ value: Float, forKey key: Key) throws {
        state.member(key.stringValue, of: depth)
        try state.write(value, depth: depth + 1)
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
        try state.encode(value, depth: depth + 1)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        state.member(key.stringValue, of: depth)
        state.open(object: true)
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(state: state, depth: depth + 1))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        state.member(key.stringValue, of: depth)
        state.open(object: false)
        return UnkeyedContainer(state: state, depth: depth + 1)
    }

    mutating func superEncoder() -> any Encoder {
        state.member("super", of: depth)
        return ValueEncoder(state: state, depth: depth + 1)
    }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        state.member(key.stringValue, of: depth)
        return ValueEncoder(state: state, depth: depth + 1)
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let state: EncodingState
    let depth: Int
    var codingPath: [any CodingKey] { state.codingPath(depth) }
    var count: Int { state.frames.count > depth ? state.frames[depth].count : 0 }

    mutating func encodeNil() throws {
        state.element(of: depth)
        state.json.raw("null")
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        state.element(of: depth)
        try state.encode(value, depth: depth + 1)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        state.element(of: depth)
        state.open(object: true)
        return KeyedEncodingContainer(
            KeyedContainer<NestedKey>(state: state, depth: depth + 1))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        state.element(of: depth)
        state.open(object: false)
        return UnkeyedContainer(state: state, depth: depth + 1)
    }

    mutating func superEncoder() -> any Encoder {
        state.element(of: depth)
        return ValueEncoder(state: state, depth: depth + 1)
    }
}

private struct SingleValueContainer: SingleValueEncodingContainer {
    let state: EncodingState
    let depth: Int
    var codingPath: [any CodingKey] { state.codingPath(depth) }

    mutating func encodeNil() throws { state.json.raw("null") }
    mutating func encode(_ value: Bool) throws { state.json.bool(value) }
    mutating func encode(_ value: String) throws { state.json.string(value) }
    mutating func encode(_ value: Double) throws { try state.write(value, depth: depth) }
    mutating func encode(_ value: Float) throws { try state.write(value, depth: depth) }
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
        try state.encode(value, depth: depth)
    }
}
