// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A method call as a client sends it: `{"method": "iface.Method", "parameters": {…}, "more": true}`.
///
/// The parameters stay undecoded until the method is known: ``parameters(_:)`` decodes them into the
/// method's own type.
public struct VarlinkCall: Sendable {
    /// The fully qualified method, such as `com.exponea.Auth.GetToken`.
    public var method: String
    /// The client wants no reply.
    public var oneway: Bool
    /// The client accepts several replies (`continues: true` on all but the last).
    public var more: Bool
    /// The client asks to leave Varlink after the reply (not supported by this daemon).
    public var upgrade: Bool
    /// The `parameters` member, nil when the call has none.
    private let parameterValue: JSONValue?

    /// Reads a call from one message (without its NUL).
    ///
    /// - Throws: ``VarlinkCallError`` when the message is not a JSON object with a `method` string, or a flag
    ///   is not a boolean.
    public init(decoding message: [UInt8]) throws(VarlinkCallError) {
        // JSONValue, not JSONDecoder: this runs for every call, and GetToken needs nothing more (see
        // ``stringParameter(_:)``). The members are read as they are parsed, without a dictionary of them: a
        // GetToken answered at once on the event loop spends most of its own time here.
        // A number beyond the range of a double is kept, so that the parameter holding it is named (see
        // ``parameters(_:)``) rather than the whole message refused.
        var method: JSONValue?
        var oneway: JSONValue?
        var more: JSONValue?
        var upgrade: JSONValue?
        var parameters: JSONValue?
        // A member named twice keeps its last value.
        let parsed = message.withUnsafeBufferPointer { bytes in
            JSONValue.readObject(bytes, keepingNumbersOutOfRange: true) { name, value throws(JSONSyntaxError) in
                switch name {
                case "method": method = try value.value()
                case "parameters": parameters = try value.value()
                case "oneway": oneway = try value.value()
                case "more": more = try value.value()
                case "upgrade": upgrade = try value.value()
                default: break
                }
            }
        }
        guard parsed, case .string(let name)? = method else { throw .notACall }
        func flag(_ value: JSONValue?) throws(VarlinkCallError) -> Bool {
            switch value {
            case nil, .null?: false
            case .bool(let value)?: value
            default: throw .notACall
            }
        }
        self.method = name
        self.oneway = try flag(oneway)
        self.more = try flag(more)
        self.upgrade = try flag(upgrade)
        self.parameterValue = parameters.flatMap { $0 == .null ? nil : $0 }
    }

    /// The string parameter `name` of a method that takes nothing else, read without decoding the call again:
    /// the fast path for the calls that take a group name only.
    ///
    /// - Throws: ``VarlinkError/invalidParameter(_:)`` naming `name` when it is missing or not a string, another
    ///   parameter when there is one (as ``parameters(_:)`` does), or `parameters` when the parameters are not
    ///   an object.
    public func stringParameter(_ name: String) throws(VarlinkError) -> String {
        switch parameterValue {
        case nil:
            throw .invalidParameter(name)
        case .object(let members)?:
            guard case .string(let value)? = members[name] else { throw .invalidParameter(name) }
            if members.count > 1, let unknown = members.keys.filter({ $0 != name }).min() {
                throw .invalidParameter(unknown)
            }
            return value
        default:
            throw .invalidParameter("parameters")
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
        let members: [String: JSONValue]
        switch parameterValue {
        case nil: members = [:]
        case .object(let object)?: members = object
        default: throw .invalidParameter("parameters")
        }
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

/// Why a message is not a Varlink call.
public enum VarlinkCallError: Error, Hashable, Sendable {
    /// Not a JSON object with a `method` string.
    case notACall
}

/// Encodes replies: one JSON object and its NUL.
public enum VarlinkReplyEncoder {
    private struct Reply<Parameters: Encodable>: Encodable {
        var parameters: Parameters
        var continues: Bool?
    }

    private struct ErrorReply: Encodable {
        var error: String
        var parameters: [String: String]
    }

    /// A reply with `parameters`; `continues` marks one of several replies to a `more` call.
    public static func reply<Parameters: Encodable>(_ parameters: Parameters, continues: Bool = false) throws
        -> [UInt8]
    {
        try frame(Reply(parameters: parameters, continues: continues ? true : nil))
    }

    /// An error reply: `{"error": "<interface>.<Name>", "parameters": {…}}`.
    public static func error(_ error: VarlinkError) -> [UInt8] {
        // [String: String] always encodes.
        (try? frame(ErrorReply(error: error.name, parameters: error.parameters))) ?? [0]
    }

    private static func frame(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(value)) + [0]
    }
}

extension VarlinkCall: CustomStringConvertible, CustomReflectable {
    /// The method and flags only: the parameters may hold a token.
    public var description: String {
        "VarlinkCall(\(method)\(more ? ", more" : "")\(oneway ? ", oneway" : ""))"
    }

    public var customMirror: Mirror { Mirror(self, children: ["method": method], displayStyle: .struct) }
}
