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
/// jwt.expiresAt             // Date
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
    /// When the token expires (`exp`), kept beside the text because the expiry timers read it all the time.
    public let expiresAt: Date

    /// The parsed header (parsed again from ``compact`` on each use: only the expiry is kept, so that a
    /// daemon holding 100,000 tokens holds little more than their text).
    public var header: Header {
        // The token parsed when it was made, so it parses again.
        (try? Self.parse(compact).header) ?? Header(algorithm: "", keyID: nil)
    }

    /// The parsed claims (parsed again from ``compact`` on each use, as ``header`` is).
    public var claims: Claims {
        (try? Self.parse(compact).claims) ?? Claims(expiresAt: expiresAt, customerIds: [:])
    }

    /// Parses a compact JWT (`header.payload.signature`).
    ///
    /// - Throws: ``StreamJWTError`` naming the first thing that is wrong.
    public init(parsing token: String) throws(StreamJWTError) {
        self.compact = token
        self.expiresAt = try Self.parse(token).claims.expiresAt
    }

    /// A token read back from the daemon's own store, which parsed it when it was set, with the `exp` stored
    /// beside it: checks the shape (length, three base64url parts) but does not decode the JSON again, which
    /// was most of the start of a daemon holding 100,000 tokens.
    ///
    /// - Throws: ``StreamJWTError`` when the text is no compact JWT.
    package init(stored token: String, expiresAt: Date) throws(StreamJWTError) {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw .empty }
        guard utf8.count <= Self.maximumLength else { throw .tooLong(length: utf8.count) }
        let parts = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .notThreeParts(found: parts.count) }
        for (part, text) in zip([StreamJWTError.Part.header, .payload, .signature], parts) {
            guard part == .signature || !text.isEmpty, Base64URL.isValid(text) else { throw .invalidBase64URL(part) }
        }
        self.compact = token
        self.expiresAt = expiresAt
    }

    private static func parse(_ token: String) throws(StreamJWTError) -> (header: Header, claims: Claims) {
        let utf8 = token.utf8
        guard !utf8.isEmpty else { throw .empty }
        guard utf8.count <= Self.maximumLength else { throw .tooLong(length: utf8.count) }
        guard !token.hasPrefix("Bearer ") else { throw .bearerPrefix }

        let dots = utf8.indices.filter { utf8[$0] == UInt8(ascii: ".") }
        guard dots.count == 2 else { throw .notThreeParts(found: dots.count + 1) }
        let parts = [
            utf8[utf8.startIndex..<dots[0]], utf8[utf8.index(after: dots[0])..<dots[1]],
            utf8[utf8.index(after: dots[1])...],
        ]
        guard !parts[0].isEmpty, let headerBytes = Base64URL.decode(parts[0]) else {
            throw .invalidBase64URL(.header)
        }
        guard !parts[1].isEmpty, let payloadBytes = Base64URL.decode(parts[1]) else {
            throw .invalidBase64URL(.payload)
        }
        guard Base64URL.isValid(parts[2]) else { throw .invalidBase64URL(.signature) }
        return (try decodeHeader(headerBytes), try decodeClaims(payloadBytes))
    }

    /// The token's state at `now` (R17).
    public func state(at now: Date) -> TokenState {
        TokenState(expiresAt: expiresAt, at: now)
    }

    public var description: String {
        let parsed = try? Self.parse(compact)
        let keyID = parsed?.header.keyID.map { ", kid: \($0)" } ?? ""
        let exp = Int64(expiresAt.timeIntervalSince1970.rounded(.down))
        return "StreamJWT(alg: \(parsed?.header.algorithm ?? "?")\(keyID), exp: \(exp), "
            + "ids: \(parsed?.claims.customerIds.count ?? 0) keys)"
    }

    // MARK: Decoding

    private static func decodeHeader(_ bytes: [UInt8]) throws(StreamJWTError) -> Header {
        guard let fields = try? JSONValue(parsing: bytes), case .object = fields else {
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
        guard let fields = try? JSONValue(parsing: bytes), case .object = fields else {
            throw .payloadNotJSONObject
        }
        guard let exp = fields["exp"] else { throw .expirationMissing }
        guard let seconds = exp.double else { throw .expirationNotNumber }
        guard seconds.isFinite, (0...Self.latestExpiration).contains(seconds) else {
            throw .expirationOutOfRange
        }
        guard let ids = fields["ids"] else { throw .customerIdsMissing }
        guard let customerIds = ids.stringMap else { throw .customerIdsNotStringMap }
        return Claims(expiresAt: Date(timeIntervalSince1970: seconds), customerIds: customerIds)
    }

    /// 9999-12-31T23:59:59Z.
    private static let latestExpiration: Double = 253_402_300_799
}
