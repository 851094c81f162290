// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif
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
        (try? Self.reading(compact) { bytes, parts throws(StreamJWTError) in
            try Self.decoded(bytes[parts.header], .header) { json throws(StreamJWTError) in try Self.decodeHeader(json)
            }
        }) ?? Header(algorithm: "", keyID: nil)
    }

    /// The parsed claims (decoded again from ``compact`` on each use, as ``header`` is).
    public var claims: Claims {
        (try? Self.reading(compact) { bytes, parts throws(StreamJWTError) in
            try Self.decoded(bytes[parts.payload], .payload) { json throws(StreamJWTError) in
                try Self.decodeClaims(json)
            }
        }) ?? Claims(expiresAt: expiresAt, customerIds: [:])
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
        // Both parts decoded, then the signature's text checked, then the JSON read: the checks' order, and so
        // which problem a token with several is told, is the rules' (R2).
        let (header, claims) = try reading(token) { bytes, parts throws(StreamJWTError) in
            try decoded(bytes[parts.header], .header) { headerJSON throws(StreamJWTError) in
                try decoded(bytes[parts.payload], .payload) { payloadJSON throws(StreamJWTError) in
                    guard isValidBase64URL(bytes[parts.signature]) else { throw .invalidBase64URL(.signature) }
                    return (try decodeHeader(headerJSON), try decodeClaims(payloadJSON))
                }
            }
        }
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
        try Self.reading(token) { bytes, parts throws(StreamJWTError) in
            guard !parts.header.isEmpty, Self.isValidBase64URL(bytes[parts.header]) else {
                throw .invalidBase64URL(.header)
            }
            guard !parts.payload.isEmpty, Self.isValidBase64URL(bytes[parts.payload]) else {
                throw .invalidBase64URL(.payload)
            }
            guard Self.isValidBase64URL(bytes[parts.signature]) else { throw .invalidBase64URL(.signature) }
        }
        self.compact = token
        self.expiresAt = expiresAt
    }

    /// Where a token's three parts lie in its bytes.
    private struct Parts {
        var header: Range<Int>
        var payload: Range<Int>
        var signature: Range<Int>
    }

    /// Runs `body` on the token's bytes and where its parts lie: checked for length, a `Bearer ` prefix and
    /// exactly two dots.
    private static func reading<T>(
        _ token: String, _ body: (UnsafeBufferPointer<UInt8>, Parts) throws(StreamJWTError) -> T
    ) throws(StreamJWTError) -> T {
        var token = token
        let outcome = token.withUTF8 { bytes -> Result<T, StreamJWTError> in
            do throws(StreamJWTError) {
                return .success(try body(bytes, try parts(of: bytes)))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// The three parts of the token's bytes, split at the byte `.` as JWS does (RFC 7515 section 7.1), after the
    /// checks of the whole text.
    private static func parts(of bytes: UnsafeBufferPointer<UInt8>) throws(StreamJWTError) -> Parts {
        let length = bytes.count
        guard length > 0 else { throw .empty }
        guard length <= Self.maximumLength else { throw .tooLong(length: length) }
        guard !bytes.starts(with: "Bearer ".utf8) else { throw .bearerPrefix }
        // memchr(3) finds the dots: a loop over the bytes in Swift cost more than the rest of the check.
        let base = bytes.baseAddress!
        guard let first = memchr(base, Int32(UInt8(ascii: ".")), length) else { throw .notThreeParts(found: 1) }
        let firstDot = UnsafeRawPointer(first) - UnsafeRawPointer(base)
        guard let second = memchr(first + 1, Int32(UInt8(ascii: ".")), length - firstDot - 1) else {
            throw .notThreeParts(found: 2)
        }
        let secondDot = UnsafeRawPointer(second) - UnsafeRawPointer(base)
        if let more = memchr(second + 1, Int32(UInt8(ascii: ".")), length - secondDot - 1) {
            var dots = 3
            var next = UnsafeRawPointer(more) - UnsafeRawPointer(base) + 1
            while next < length, let another = memchr(base + next, Int32(UInt8(ascii: ".")), length - next) {
                dots += 1
                next = UnsafeRawPointer(another) - UnsafeRawPointer(base) + 1
            }
            throw .notThreeParts(found: dots + 1)
        }
        return Parts(header: 0..<firstDot, payload: firstDot + 1..<secondDot, signature: secondDot + 1..<length)
    }

    /// Runs `read` on the JSON that the base64url `text` encodes, decoded into a buffer on the stack.
    private static func decoded<T>(
        _ text: Slice<UnsafeBufferPointer<UInt8>>, _ part: StreamJWTError.Part,
        _ read: (UnsafeBufferPointer<UInt8>) throws(StreamJWTError) -> T
    ) throws(StreamJWTError) -> T {
        guard !text.isEmpty else { throw .invalidBase64URL(part) }
        let outcome = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.count * 3 / 4 + 1) {
            buffer -> Result<T, StreamJWTError> in
            guard let count = Base64URL.decode(UnsafeBufferPointer(rebasing: text), into: buffer) else {
                return .failure(.invalidBase64URL(part))
            }
            do throws(StreamJWTError) {
                return .success(try read(UnsafeBufferPointer(rebasing: buffer[..<count])))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    private static func isValidBase64URL(_ text: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        Base64URL.isValid(UnsafeBufferPointer(rebasing: text))
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

    private static func decodeHeader(_ bytes: UnsafeBufferPointer<UInt8>) throws(StreamJWTError) -> Header {
        var algorithm: JSONValue?
        var keyID: JSONValue?
        let isObject = JSONValue.readObject(bytes) { name, value throws(JSONSyntaxError) in
            switch name {
            case "alg": algorithm = try value.value()
            case "kid": keyID = try value.value()
            default: _ = try value.skip()
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

    private static func decodeClaims(_ bytes: UnsafeBufferPointer<UInt8>) throws(StreamJWTError) -> Claims {
        var exp: JSONValue?
        var ids: [String: String]??
        let isObject = JSONValue.readObject(bytes) { name, value throws(JSONSyntaxError) in
            switch name {
            case "exp": exp = try value.value()
            case "ids": ids = .some(try value.stringMap())
            default: _ = try value.skip()
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
