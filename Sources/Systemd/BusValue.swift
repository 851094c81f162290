// SPDX-License-Identifier: Apache-2.0
/// A basic D-Bus value, as a signal argument.
public enum BusValue: Hashable, Sendable {
    case string(String)
    case objectPath(String)
    case bool(Bool)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)

    /// The D-Bus type code (`s`, `o`, `b`, `i`, `u`, `x`, `t`, `d`).
    public var typeCode: Character {
        switch self {
        case .string: "s"
        case .objectPath: "o"
        case .bool: "b"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        }
    }
}

/// A signal an exported interface declares, so that introspection lists it.
public struct BusSignal: Hashable, Sendable {
    /// The member name, such as `TokenRefreshed`.
    public var member: String
    /// The D-Bus signature of its arguments, such as `st`.
    public var signature: String
    /// The arguments' names, one per type in ``signature``.
    public var parameterNames: [String]

    public init(member: String, signature: String, parameterNames: [String]) {
        self.member = member
        self.signature = signature
        self.parameterNames = parameterNames
    }
}
