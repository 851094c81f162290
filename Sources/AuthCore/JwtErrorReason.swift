// SPDX-License-Identifier: Apache-2.0
/// Why the integrator's JWT error handler is called (R11).
///
/// The spellings are the SDK's. Values that a newer daemon or SDK may add decode as ``unknown(_:)`` instead of
/// failing, so old clients keep working.
public enum JwtErrorReason: Hashable, Sendable, CustomStringConvertible {
    /// A request needs a JWT and none is set (pre-flight, or 403 without a token).
    case notProvided
    /// The server rejected the token as malformed or wrongly signed (401).
    case invalid
    /// The token's `exp` has passed (pre-flight, expiry timer, or 401 with an expired token).
    case expired
    /// The token expires within the next 60 seconds (expiry timer or pre-flight).
    case expiredSoon
    /// Reserved by the SDK: the token does not grant enough.
    case insufficient
    /// A reason this version does not know, kept as spelled.
    case unknown(String)

    public var description: String { rawValue }
}

extension JwtErrorReason: RawRepresentable {
    public init(rawValue: String) {
        switch rawValue {
        case "notProvided": self = .notProvided
        case "invalid": self = .invalid
        case "expired": self = .expired
        case "expiredSoon": self = .expiredSoon
        case "insufficient": self = .insufficient
        default: self = .unknown(rawValue)
        }
    }

    public var rawValue: String {
        switch self {
        case .notProvided: "notProvided"
        case .invalid: "invalid"
        case .expired: "expired"
        case .expiredSoon: "expiredSoon"
        case .insufficient: "insufficient"
        case .unknown(let value): value
        }
    }
}

extension JwtErrorReason: Codable {
    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}
