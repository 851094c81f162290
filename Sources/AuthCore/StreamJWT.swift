#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A stream JWT, parsed for lifecycle management only (R1, R2).
///
/// The daemon never checks the signature (the key lives with the integrator's backend); it reads `alg`, `kid`,
/// `exp` and `ids` so that it can run the expiry timers and tell apps who the token is for.
///
/// `description` never shows the token or the customer ids, so a `StreamJWT` is safe to log.
///
/// ```swift
/// let jwt = try StreamJWT(parsing: token)
/// jwt.claims.expiresAt      // Date
/// jwt.state(at: .now)       // .valid, .expiredSoon or .expired
/// ```
public struct StreamJWT: Hashable, Sendable, CustomStringConvertible {
    /// The longest token accepted, in bytes.
    public static let maximumLength = 16 * 1024

    /// The JOSE header fields the daemon reads.
    public struct Header: Hashable, Sendable {
        /// The signing algorithm, such as `HS512` (not checked).
        public var algorithm: String
        /// The key id, when the header has one.
        public var keyID: String?
    }

    /// The claims the daemon reads.
    public struct Claims: Hashable, Sendable {
        /// When the token expires (`exp`, Unix time; a fraction of a second is kept).
        public var expiresAt: Date
        /// The customer identity the token was issued for (`ids`).
        public var customerIds: [String: String]
    }

    /// The compact token exactly as given: what a request sends after `Bearer `.
    public let compact: String
    /// The parsed header.
    public let header: Header
    /// The parsed claims.
    public let claims: Claims

    /// Parses a compact JWT (`header.payload.signature`).
    ///
    /// - Throws: ``StreamJWTError`` naming the first thing that is wrong.
    public init(parsing token: String) throws(StreamJWTError) {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw .empty }
        guard utf8.count <= Self.maximumLength else { throw .tooLong(length: utf8.count) }
        guard !token.hasPrefix("Bearer ") else { throw .bearerPrefix }

        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .notThreeParts(found: parts.count) }
        guard !parts[0].isEmpty, let headerBytes = Base64URL.decode(parts[0].utf8) else {
            throw .invalidBase64URL(.header)
        }
        guard !parts[1].isEmpty, let payloadBytes = Base64URL.decode(parts[1].utf8) else {
            throw .invalidBase64URL(.payload)
        }
        guard Base64URL.decode(parts[2].utf8) != nil else { throw .invalidBase64URL(.signature) }

        self.compact = token
        self.header = try Self.decodeHeader(headerBytes)
        self.claims = try Self.decodeClaims(payloadBytes)
    }

    /// The token's state at `now` (R17).
    public func state(at now: Date) -> TokenState {
        TokenState(expiresAt: claims.expiresAt, at: now)
    }

    public var description: String {
        let keyID = header.keyID.map { ", kid: \($0)" } ?? ""
        let exp = Int64(claims.expiresAt.timeIntervalSince1970.rounded(.down))
        return "StreamJWT(alg: \(header.algorithm)\(keyID), exp: \(exp), ids: \(claims.customerIds.count) keys)"
    }

    // MARK: Decoding

    private static func decodeHeader(_ bytes: [UInt8]) throws(StreamJWTError) -> Header {
        let fields: JSONFields
        do {
            fields = try JSONDecoder().decode(JSONFields.self, from: Data(bytes))
        } catch {
            throw .headerNotJSONObject
        }
        guard case .string(let algorithm)? = fields["alg"] else { throw .algorithmMissing }
        switch fields["kid"] {
        case nil, .null?: return Header(algorithm: algorithm, keyID: nil)
        case .string(let keyID)?: return Header(algorithm: algorithm, keyID: keyID)
        default: throw .keyIDNotString
        }
    }

    private static func decodeClaims(_ bytes: [UInt8]) throws(StreamJWTError) -> Claims {
        let fields: JSONFields
        do {
            fields = try JSONDecoder().decode(JSONFields.self, from: Data(bytes))
        } catch {
            throw .payloadNotJSONObject
        }
        let seconds: Double
        switch fields["exp"] {
        case nil: throw .expirationMissing
        case .number(let value)?: seconds = value
        default: throw .expirationNotNumber
        }
        guard seconds.isFinite, (0...Self.latestExpiration).contains(seconds) else {
            throw .expirationOutOfRange
        }
        let customerIds: [String: String]
        switch fields["ids"] {
        case nil: throw .customerIdsMissing
        case .stringMap(let map)?: customerIds = map
        default: throw .customerIdsNotStringMap
        }
        return Claims(expiresAt: Date(timeIntervalSince1970: seconds), customerIds: customerIds)
    }

    /// 9999-12-31T23:59:59Z.
    private static let latestExpiration: Double = 253_402_300_799
}

/// The top-level members of a JSON object, each kept only as far as the token rules need it: the decoder
/// never builds nested values the daemon does not read.
private struct JSONFields: Decodable {
    enum Value {
        case null
        case number(Double)
        case string(String)
        case stringMap([String: String])
        case other
    }

    private var values: [String: Value] = [:]

    subscript(key: String) -> Value? { values[key] }

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        for key in container.allKeys where ["alg", "kid", "exp", "ids"].contains(key.stringValue) {
            values[key.stringValue] = Self.decodeValue(container, key)
        }
    }

    private static func decodeValue(_ container: KeyedDecodingContainer<Key>, _ key: Key) -> Value {
        if (try? container.decodeNil(forKey: key)) == true { return .null }
        if (try? container.decode(Bool.self, forKey: key)) != nil { return .other }
        if let number = try? container.decode(Double.self, forKey: key) { return .number(number) }
        if let string = try? container.decode(String.self, forKey: key) { return .string(string) }
        if let map = try? container.decode([String: String].self, forKey: key) { return .stringMap(map) }
        return .other
    }
}
