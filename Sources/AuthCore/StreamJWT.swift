// SPDX-License-Identifier: Apache-2.0
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

    /// The parsed header (decoded again from ``compact`` on each use: only the expiry is kept, so that a
    /// daemon holding 100,000 tokens holds little more than their text).
    public var header: Header {
        // The text passed these checks when the token was made; a stored token whose JSON no longer reads is
        // shown with an empty algorithm rather than trapping.
        guard let parts = try? Self.parts(of: compact), let bytes = Base64URL.decode(parts.header),
            let header = try? Self.decodeHeader(bytes)
        else { return Header(algorithm: "", keyID: nil) }
        return header
    }

    /// The parsed claims (decoded again from ``compact`` on each use, as ``header`` is).
    public var claims: Claims {
        guard let parts = try? Self.parts(of: compact), let bytes = Base64URL.decode(parts.payload),
            let claims = try? Self.decodeClaims(bytes)
        else { return Claims(expiresAt: expiresAt, customerIds: [:]) }
        return claims
    }

    /// Parses a compact JWT (`header.payload.signature`).
    ///
    /// - Throws: ``StreamJWTError`` naming the first thing that is wrong.
    public init(parsing token: String) throws(StreamJWTError) {
        self = try Self.decode(token).token
    }

    /// A token with the header and claims its parsing decoded, for a caller that shows them at once: ``header``
    /// and ``claims`` would decode them again.
    public struct Decoded: Sendable {
        public let token: StreamJWT
        public let header: Header
        public let claims: Claims
    }

    /// Parses a compact JWT (`header.payload.signature`) as ``init(parsing:)`` does, keeping its header and claims.
    ///
    /// - Throws: ``StreamJWTError`` naming the first thing that is wrong.
    public static func decode(_ token: String) throws(StreamJWTError) -> Decoded {
        let parts = try Self.parts(of: token)
        guard !parts.header.isEmpty, let headerBytes = Base64URL.decode(parts.header) else {
            throw .invalidBase64URL(.header)
        }
        guard !parts.payload.isEmpty, let payloadBytes = Base64URL.decode(parts.payload) else {
            throw .invalidBase64URL(.payload)
        }
        guard Base64URL.isValid(parts.signature) else { throw .invalidBase64URL(.signature) }
        let header = try Self.decodeHeader(headerBytes)
        let claims = try Self.decodeClaims(payloadBytes)
        return Decoded(token: StreamJWT(compact: token, expiresAt: claims.expiresAt), header: header, claims: claims)
    }

    private init(compact: String, expiresAt: Date) {
        self.compact = compact
        self.expiresAt = expiresAt
    }

    /// A token read back from the daemon's own store, which parsed it when it was set, with the `exp` stored
    /// beside it: checks the shape (length, three base64url parts) but does not decode the JSON again, which
    /// was most of the start of a daemon holding 100,000 tokens.
    ///
    /// - Throws: ``StreamJWTError`` when the text is no compact JWT.
    package init(stored token: String, expiresAt: Date) throws(StreamJWTError) {
        let parts = try Self.parts(of: token)
        guard !parts.header.isEmpty, Base64URL.isValid(parts.header) else { throw .invalidBase64URL(.header) }
        guard !parts.payload.isEmpty, Base64URL.isValid(parts.payload) else { throw .invalidBase64URL(.payload) }
        guard Base64URL.isValid(parts.signature) else { throw .invalidBase64URL(.signature) }
        self.compact = token
        self.expiresAt = expiresAt
    }

    /// The three parts of `token`, split at the byte `.` as JWS does (RFC 7515 section 7.1), after the checks
    /// of the whole text.
    private static func parts(of token: String) throws(StreamJWTError) -> (
        header: Substring.UTF8View, payload: Substring.UTF8View, signature: Substring.UTF8View
    ) {
        var token = token
        let length = token.utf8.count
        guard length > 0 else { throw .empty }
        guard length <= Self.maximumLength else { throw .tooLong(length: length) }
        guard !token.hasPrefix("Bearer ") else { throw .bearerPrefix }
        // The dots' offsets, over the bytes: the indices of the UTF-8 view, one at a time, cost every token read
        // at start.
        let dots = token.withUTF8 { bytes in
            var dots = (first: 0, second: 0, count: 0)
            for offset in bytes.indices where bytes[offset] == UInt8(ascii: ".") {
                switch dots.count {
                case 0: dots.first = offset
                case 1: dots.second = offset
                default: break
                }
                dots.count += 1
            }
            return dots
        }
        guard dots.count == 2 else { throw .notThreeParts(found: dots.count + 1) }
        let utf8 = token.utf8
        let first = utf8.index(utf8.startIndex, offsetBy: dots.first)
        let second = utf8.index(utf8.startIndex, offsetBy: dots.second)
        return (utf8[..<first], utf8[utf8.index(after: first)..<second], utf8[utf8.index(after: second)...])
    }

    /// The token's state at `now` (R17).
    public func state(at now: Date) -> TokenState {
        TokenState(expiresAt: expiresAt, at: now)
    }

    public var description: String {
        let header = self.header
        let keyID = header.keyID.map { ", kid: \($0)" } ?? ""
        let exp = Int64(expiresAt.timeIntervalSince1970.rounded(.down))
        return "StreamJWT(alg: \(header.algorithm)\(keyID), exp: \(exp), ids: \(claims.customerIds.count) keys)"
    }

    // MARK: Decoding

    // The header and the claims are read member by member (the last of a name counts, as in a dictionary), the
    // members the daemon does not read skipped: no tree of the whole object is made.

    private static func decodeHeader(_ bytes: [UInt8]) throws(StreamJWTError) -> Header {
        var algorithm: JSONValue?
        var keyID: JSONValue?
        let isObject = bytes.withUnsafeBufferPointer { buffer in
            JSONValue.readObject(buffer) { name, value throws(JSONSyntaxError) in
                switch name {
                case "alg": algorithm = try value.value()
                case "kid": keyID = try value.value()
                default: _ = try value.skip()
                }
            }
        }
        guard isObject else { throw .headerNotJSONObject }
        guard case .string(let algorithm)? = algorithm else { throw .algorithmMissing }
        switch keyID {
        case nil, .null?: return Header(algorithm: algorithm, keyID: nil)
        case .string(let keyID)?: return Header(algorithm: algorithm, keyID: keyID)
        default: throw .keyIDNotString
        }
    }

    private static func decodeClaims(_ bytes: [UInt8]) throws(StreamJWTError) -> Claims {
        var exp: JSONValue?
        var ids: [String: String]??
        let isObject = bytes.withUnsafeBufferPointer { buffer in
            JSONValue.readObject(buffer) { name, value throws(JSONSyntaxError) in
                switch name {
                case "exp": exp = try value.value()
                case "ids": ids = .some(try value.stringMap())
                default: _ = try value.skip()
                }
            }
        }
        guard isObject else { throw .payloadNotJSONObject }
        guard let exp else { throw .expirationMissing }
        guard let seconds = exp.double else { throw .expirationNotNumber }
        guard seconds.isFinite, (0...Self.latestExpiration).contains(seconds) else {
            throw .expirationOutOfRange
        }
        guard let ids else { throw .customerIdsMissing }
        guard let customerIds = ids else { throw .customerIdsNotStringMap }
        return Claims(expiresAt: Date(timeIntervalSince1970: seconds), customerIds: customerIds)
    }

    /// 9999-12-31T23:59:59Z.
    private static let latestExpiration: Double = 253_402_300_799
}
