// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(Glibc)
    import Glibc
#endif

/// A method call as a client sends it: `{"method": "iface.Method", "parameters": {…}, "more": true}`.
///
/// The call keeps the message it was read from. Its parameters are checked as JSON when it is read but decoded
/// only once the method is known: ``parameters(_:)`` decodes them into the method's own type, and
/// ``stringParameter(_:)`` reads the one string a GetToken takes straight from the bytes.
public struct VarlinkCall: Sendable {
    /// The client wants no reply.
    public var oneway: Bool
    /// The client accepts several replies (`continues: true` on all but the last).
    public var more: Bool
    /// The client asks to leave Varlink after the reply (not supported by this daemon).
    public var upgrade: Bool
    /// The message, without its NUL.
    @usableFromInline let message: [UInt8]
    /// The method's name: where it lies in the message, or the name itself when it was written with escapes.
    @usableFromInline let methodName: MethodName
    /// Where the `parameters` value lies in the message; nil when the call has none, or null.
    let parameterBytes: Range<Int>?
    /// The parameters' members, when there are one or two and each name and value is a string with no escape
    /// (GetToken's group; SetToken's group and token): where they lie in the message. ``stringParameter(_:)`` and
    /// ``stringParameters(_:_:)`` read them without parsing the parameters again.
    let plainStrings: PlainStrings?

    typealias PlainMember = (name: Range<Int>, value: Range<Int>)
    struct PlainStrings {
        var first: PlainMember
        var second: PlainMember?
    }

    @usableFromInline enum MethodName: Sendable, Equatable {
        case bytes(Range<Int>)
        case string(String)
    }

    /// Reads a call from one message (without its NUL).
    ///
    /// - Throws: ``VarlinkCallError`` when the message is not a JSON object with a `method` string, or a flag
    ///   is not a boolean.
    public init(decoding message: [UInt8]) throws(VarlinkCallError) {
        if let plain = message.withUnsafeBufferPointer(PlainCall.init) {
            self.init(
                message, .bytes(plain.method), oneway: false, more: false, upgrade: false,
                parameters: plain.parameters, plainStrings: plain.lone)
        } else {
            try self.init(decodingAnyShape: message)
        }
    }

    private init(
        _ message: [UInt8], _ method: MethodName, oneway: Bool, more: Bool, upgrade: Bool, parameters: Range<Int>?,
        plainStrings: PlainStrings?
    ) {
        self.message = message
        self.methodName = method
        self.oneway = oneway
        self.more = more
        self.upgrade = upgrade
        self.parameterBytes = parameters
        self.plainStrings = plainStrings
    }

    /// Reads a call of any shape, as ``init(decoding:)`` does for one that is not a ``PlainCall``.
    init(decodingAnyShape message: [UInt8]) throws(VarlinkCallError) {
        // Read member by member, making no value of the method's name or the parameters: a GetToken answered at
        // once on the loop spent most of its own time making them, and taking them apart again.
        // A number beyond the range of a double is kept, so that the parameter holding it is named (see
        // ``parameters(_:)``) rather than the whole message refused.
        var method: MethodName?
        var oneway: JSONValue?
        var more: JSONValue?
        var upgrade: JSONValue?
        var parameters: Range<Int>?
        var lone: PlainStrings?
        // A member named twice keeps its last value.
        let parsed = message.withUnsafeBufferPointer { bytes in
            JSONValue.readObject(bytes, keepingNumbersOutOfRange: true) { name, value throws(JSONSyntaxError) in
                switch name {
                case "method":
                    if let name = value.plainString() {
                        method = .bytes(name)
                    } else if case .string(let name) = try value.value() {
                        method = .string(name)
                    } else {
                        method = nil
                    }
                case "parameters": (parameters, lone) = try Self.place(ofParameters: &value, in: bytes)
                case "oneway": oneway = try value.value()
                case "more": more = try value.value()
                case "upgrade": upgrade = try value.value()
                default: break
                }
            }
        }
        guard parsed, let method else { throw .notACall }
        func flag(_ value: JSONValue?) throws(VarlinkCallError) -> Bool {
            switch value {
            case nil, .null?: false
            case .bool(let value)?: value
            default: throw .notACall
            }
        }
        self.init(
            message, method, oneway: try flag(oneway), more: try flag(more), upgrade: try flag(upgrade),
            parameters: parameters, plainStrings: lone)
    }

    /// Where the parameters lie in `message` (nil for null), and their lone member when it and its value are
    /// strings with no escape; checked as JSON, decoded not at all.
    private static func place(ofParameters value: inout JSONValueReader, in message: UnsafeBufferPointer<UInt8>)
        throws(JSONSyntaxError) -> (parameters: Range<Int>?, lone: PlainStrings?)
    {
        let start = value.position
        var plain: PlainStrings?
        if value.isObject {
            var count = 0
            var allPlain = true
            try value.members { name, member throws(JSONSyntaxError) in
                count += 1
                guard count <= 2, allPlain, let string = member.plainString() else {
                    allPlain = false
                    _ = try member.skip()
                    return
                }
                guard let place = name.place(in: message) else {
                    allPlain = false
                    return
                }
                let found = (name: place, value: string)
                if count == 1 { plain = PlainStrings(first: found) } else { plain?.second = found }
            }
            if !allPlain { plain = nil }
        } else {
            _ = try value.skip()
        }
        return (message[start] == UInt8(ascii: "n") ? nil : start..<value.position, plain)
    }

    /// The fully qualified method, such as `com.exponea.Auth.GetToken`.
    public var method: String {
        switch methodName {
        case .bytes(let range): String(decoding: message[range], as: UTF8.self)
        case .string(let name): name
        }
    }

    /// Calls `body` with the method's name as UTF-8, without making a string of it.
    @inlinable public func withMethod<Result>(_ body: (UnsafeBufferPointer<UInt8>) throws -> Result) rethrows -> Result
    {
        switch methodName {
        case .bytes(let range):
            try message.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[range])) }
        case .string(var name):
            try name.withUTF8 { try body($0) }
        }
    }

    /// Whether the method is `name`, compared over the bytes.
    @inlinable public func hasMethod(_ name: [UInt8]) -> Bool {
        withMethod { method in
            method.count == name.count
                && name.withUnsafeBufferPointer { memcmp($0.baseAddress!, method.baseAddress!, name.count) == 0 }
        }
    }

    /// The string parameter `name` of a method that takes nothing else, read from the message's bytes without
    /// decoding the parameters: the fast path for the calls that take a group name only.
    ///
    /// - Throws: ``VarlinkError/invalidParameter(_:)`` naming `name` when it is missing or not a string, another
    ///   parameter when there is one (as ``parameters(_:)`` does), or `parameters` when the parameters are not
    ///   an object.
    public func stringParameter(_ name: StaticString) throws(VarlinkError) -> String {
        if let plainStrings, plainStrings.second == nil, isNamed(plainStrings.first, name) {
            return String(decoding: message[plainStrings.first.value], as: UTF8.self)
        }
        // Escapes, or other members: as the parameters decode.
        return try decodedStrings([name.description])[0]
    }

    /// The string parameters `first` and `second` of a method that takes nothing else (SetToken's group and
    /// token), read from the message's bytes as ``stringParameter(_:)`` reads one.
    ///
    /// - Throws: ``VarlinkError/invalidParameter(_:)`` naming the first of them that is missing or not a string,
    ///   another parameter when there is one, or `parameters` when the parameters are not an object.
    public func stringParameters(_ first: StaticString, _ second: StaticString) throws(VarlinkError) -> (
        String, String
    ) {
        if let plainStrings, let other = plainStrings.second {
            let string = { (member: PlainMember) in String(decoding: message[member.value], as: UTF8.self) }
            if isNamed(plainStrings.first, first), isNamed(other, second) {
                return (string(plainStrings.first), string(other))
            }
            if isNamed(plainStrings.first, second), isNamed(other, first) {
                return (string(other), string(plainStrings.first))
            }
        }
        // Escapes, other members, or a name twice: as the parameters decode.
        let values = try decodedStrings([first.description, second.description])
        return (values[0], values[1])
    }

    /// The string parameters `names`, in order, of a method that takes nothing else, as the parameters decode:
    /// the way of ``stringParameter(_:)`` and ``stringParameters(_:_:)`` when the bytes alone do not tell.
    private func decodedStrings(_ names: [String]) throws(VarlinkError) -> [String] {
        let members = try parameterMembers()
        var values: [String] = []
        for name in names {
            guard case .string(let value)? = members[name] else { throw .invalidParameter(name) }
            values.append(value)
        }
        if let unknown = members.keys.filter({ !names.contains($0) }).min() { throw .invalidParameter(unknown) }
        return values
    }

    /// Whether `member`'s name, in the message, is `name`.
    private func isNamed(_ member: PlainMember, _ name: StaticString) -> Bool {
        member.name.count == name.utf8CodeUnitCount
            && message.withUnsafeBufferPointer {
                member.name.isEmpty
                    || memcmp($0.baseAddress! + member.name.lowerBound, name.utf8Start, member.name.count) == 0
            }
    }

    /// The interface part of ``method`` (`com.exponea.Auth`), or nil when the name has no dot.
    public var interface: String? {
        guard let dot = method.lastIndex(of: ".") else { return nil }
        return String(method[..<dot])
    }

    /// The method's parameters, decoded as `type`. A call without parameters decodes as `{}`.
    ///
    /// Strict, as systemd's Varlink services are: a parameter the method does not take is refused, and a number
    /// out of the range of its type (`-1` or `2^64` for a generation, `1e400` for anything) is refused naming
    /// that parameter.
    ///
    /// - Throws: ``VarlinkError/invalidParameter(_:)`` naming the first parameter that is missing, of the wrong
    ///   type or range, or unknown; `parameters` when the parameters are not an object.
    public func parameters<Parameters: Decodable>(_ type: Parameters.Type) throws(VarlinkError) -> Parameters {
        let members = try parameterMembers()
        do {
            return try ParameterDecoder.decode(type, from: members)
        } catch {
            switch error {
            case .invalid(let name): throw .invalidParameter(name ?? "parameters")
            case .unknown(let name): throw .invalidParameter(name)
            }
        }
    }
}

extension VarlinkCall {
    /// The parameters' members, parsed from the message (checked when the call was read); none without parameters.
    ///
    /// - Throws: ``VarlinkError/invalidParameter(_:)`` naming `parameters` when they are not an object.
    private func parameterMembers() throws(VarlinkError) -> [String: JSONValue] {
        guard let parameterBytes else { return [:] }
        guard
            case .object(let members)? = try? JSONValue(
                parsing: message[parameterBytes], keepingNumbersOutOfRange: true)
        else { throw .invalidParameter("parameters") }
        return members
    }
}

/// Why a message is not a Varlink call.
public enum VarlinkCallError: Error, Hashable, Sendable {
    /// Not a JSON object with a `method` string.
    case notACall
}

/// Encodes replies: one JSON object and its NUL, members in order of their names.
public enum VarlinkReplyEncoder {
    /// A reply with `parameters`; `continues` marks one of several replies to a `more` call.
    public static func reply<Parameters: Encodable>(_ parameters: Parameters, continues: Bool = false) throws
        -> [UInt8]
    {
        var json = JSONWriter(capacity: 128)
        json.raw(continues ? #"{"continues":true,"parameters":"# : #"{"parameters":"#)
        try ParameterEncoder.encode(parameters, into: &json)
        json.raw("}\0")
        return json.bytes
    }

    /// A reply whose parameters write themselves (``JSONWritable``): the same bytes, without `Codable`.
    package static func reply<Parameters: JSONWritable>(_ parameters: Parameters, continues: Bool = false) throws
        -> [UInt8]
    {
        var json = JSONWriter(capacity: 128)
        json.raw(continues ? #"{"continues":true,"parameters":"# : #"{"parameters":"#)
        try parameters.write(into: &json)
        json.raw("}\0")
        return json.bytes
    }

    /// An error reply: `{"error": "<interface>.<Name>", "parameters": {…}}`.
    public static func error(_ error: VarlinkError) -> [UInt8] {
        var json = JSONWriter(capacity: 128)
        json.raw(#"{"error":"#)
        json.string(error.name)
        json.raw(#","parameters":"#)
        json.stringMap(error.parameters)
        json.raw("}\0")
        return json.bytes
    }
}

extension VarlinkCall: CustomStringConvertible, CustomReflectable {
    /// The method and flags only: the parameters may hold a token.
    public var description: String {
        "VarlinkCall(\(method)\(more ? ", more" : "")\(oneway ? ", oneway" : ""))"
    }

    public var customMirror: Mirror { Mirror(self, children: ["method": method], displayStyle: .struct) }
}
