// SPDX-License-Identifier: Apache-2.0
/// Why a string is not a usable stream JWT (R1, R2).
///
/// Each case names what is wrong and never repeats the token. ``code`` is a stable spelling for the wire.
public enum StreamJWTError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The three dot-separated parts of a compact JWT.
    public enum Part: Int, Sendable, CustomStringConvertible {
        case header = 1
        case payload = 2
        case signature = 3

        public var description: String {
            switch self {
            case .header: "part 1 (header)"
            case .payload: "part 2 (payload)"
            case .signature: "part 3 (signature)"
            }
        }
    }

    /// The token is empty.
    case empty
    /// The token is longer than ``StreamJWT/maximumLength`` bytes.
    case tooLong(length: Int)
    /// The token starts with `Bearer `; the scheme is added when a request is sent.
    case bearerPrefix
    /// The token does not have exactly three dot-separated parts.
    case notThreeParts(found: Int)
    /// A part is not base64url without padding (or, for header and payload, is empty).
    case invalidBase64URL(Part)
    /// The header is not a JSON object.
    case headerNotJSONObject
    /// The header has no `alg` string.
    case algorithmMissing
    /// The header's `kid` is present but not a string.
    case keyIDNotString
    /// The payload is not a JSON object.
    case payloadNotJSONObject
    /// The payload has no `exp` claim.
    case expirationMissing
    /// The payload's `exp` is not a number.
    case expirationNotNumber
    /// The payload's `exp` is not a Unix time between 1970 and 9999.
    case expirationOutOfRange
    /// The payload has no `ids` claim.
    case customerIdsMissing
    /// The payload's `ids` is not an object whose values are all strings.
    case customerIdsNotStringMap

    /// A stable, machine-readable name for the case, such as `notThreeParts`.
    public var code: String {
        switch self {
        case .empty: "empty"
        case .tooLong: "tooLong"
        case .bearerPrefix: "bearerPrefix"
        case .notThreeParts: "notThreeParts"
        case .invalidBase64URL: "invalidBase64URL"
        case .headerNotJSONObject: "headerNotJSONObject"
        case .algorithmMissing: "algorithmMissing"
        case .keyIDNotString: "keyIDNotString"
        case .payloadNotJSONObject: "payloadNotJSONObject"
        case .expirationMissing: "expirationMissing"
        case .expirationNotNumber: "expirationNotNumber"
        case .expirationOutOfRange: "expirationOutOfRange"
        case .customerIdsMissing: "customerIdsMissing"
        case .customerIdsNotStringMap: "customerIdsNotStringMap"
        }
    }

    public var description: String {
        switch self {
        case .empty:
            "the token is empty"
        case .tooLong(let length):
            "the token is \(length) bytes long; at most \(StreamJWT.maximumLength) are accepted"
        case .bearerPrefix:
            "the token starts with 'Bearer '; pass the bare JWT, the scheme is added when a request is sent"
        case .notThreeParts(let found):
            "a JWT has three parts separated by '.', this has \(found)"
        case .invalidBase64URL(let part):
            "\(part) is not base64url without padding"
        case .headerNotJSONObject:
            "the header is not a JSON object"
        case .algorithmMissing:
            "the header has no 'alg' string"
        case .keyIDNotString:
            "the header's 'kid' is not a string"
        case .payloadNotJSONObject:
            "the payload is not a JSON object"
        case .expirationMissing:
            "the payload has no 'exp' claim"
        case .expirationNotNumber:
            "the payload's 'exp' claim is not a number"
        case .expirationOutOfRange:
            "the payload's 'exp' claim is not a Unix time between 1970 and 9999"
        case .customerIdsMissing:
            "the payload has no 'ids' claim"
        case .customerIdsNotStringMap:
            "the payload's 'ids' claim is not an object of string values"
        }
    }
}
