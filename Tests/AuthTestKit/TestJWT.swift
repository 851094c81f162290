// SPDX-License-Identifier: Apache-2.0
import Crypto
import Foundation
import Synchronization
import Testing

/// Builds real HS512-signed stream JWTs for tests, the way an integrator's backend does.
public struct TestJWT: Sendable {
    /// The HMAC secret the tokens are signed with.
    public var secret: Data
    private var key: SymmetricKey { SymmetricKey(data: secret) }
    /// The `kid` header, or nil for none.
    public var keyID: String?

    public init(
        secret: String = "test-secret-key-of-at-least-64-bytes-for-hs512-0123456789abcdef", keyID: String? = "k1"
    ) {
        self.secret = Data(secret.utf8)
        self.keyID = keyID
    }

    /// A signed token with the given `exp` (Unix seconds) and `ids`.
    public func token(exp: Double, ids: [String: String] = ["registered": "user-1"]) -> String {
        var header: [String: Any] = ["alg": "HS512", "typ": "JWT"]
        if let keyID { header["kid"] = keyID }
        let payload: [String: Any] = ["exp": exp, "ids": ids, "iat": exp - 3600]
        return token(headerJSON: Self.json(header), payloadJSON: Self.json(payload))
    }

    /// A token that expires `seconds` after `now`.
    public func token(
        expiringIn seconds: TimeInterval, from now: Date = Date(), ids: [String: String] = ["registered": "user-1"]
    )
        -> String
    {
        token(exp: (now.timeIntervalSince1970 + seconds).rounded(.down), ids: ids)
    }

    /// A token with the given raw header and payload JSON text, signed with HS512.
    public func token(headerJSON: String, payloadJSON: String) -> String {
        let signingInput = Self.base64URL(Data(headerJSON.utf8)) + "." + Self.base64URL(Data(payloadJSON.utf8))
        let mac = HMAC<SHA512>.authenticationCode(for: Data(signingInput.utf8), using: key)
        let signature = Self.base64URL(Data(mac))
        Self.minted.withLock { _ = $0.insert(signature) }
        return signingInput + "." + signature
    }

    /// Whether `token`'s signature is right for this key.
    public func verifies(_ token: String) -> Bool {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Self.decodeBase64URL(String(parts[2])) else { return false }
        let input = Data("\(parts[0]).\(parts[1])".utf8)
        return HMAC<SHA512>.isValidAuthenticationCode(signature, authenticating: input, using: key)
    }

    public static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decodeBase64URL(_ text: String) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }

    private static func json(_ object: [String: Any]) -> String {
        let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}

// MARK: Finding tokens where they must not be

extension TestJWT {
    /// The signature part of every token minted in this process: a token, or what identifies it, that shows up
    /// in a log or an error message is found by its signature.
    private static let minted = Mutex<Set<String>>([])

    /// The length of an HS512 signature in base64url.
    private static let signatureLength = 86

    /// The signatures of tokens minted in this process that `text` contains: whole tokens, or their signature
    /// parts on their own. Linear in `text`, whatever the number of tokens minted.
    public static func mintedSignatures(in text: String) -> Set<String> {
        let bytes = Array(text.utf8)
        let minted = Self.minted.withLock { $0 }
        var found: Set<String> = []
        var runStart = 0
        for index in 0...bytes.count {
            if index < bytes.count && isBase64URL(bytes[index]) { continue }
            // A maximal run of base64url characters ends here; a signature is a window of it.
            if index - runStart >= signatureLength {
                for start in runStart...(index - signatureLength) {
                    let window = String(decoding: bytes[start..<(start + signatureLength)], as: UTF8.self)
                    if minted.contains(window) { found.insert(window) }
                }
            }
            runStart = index + 1
        }
        return found
    }

    /// Records a test issue for each token minted in this process that `text`, written by `source`, contains.
    public static func expectNoMintedToken(in text: String, from source: String) {
        for signature in mintedSignatures(in: text).sorted() {
            Issue.record("\(source) wrote a test token (signature \(signature.prefix(12))…) in its output")
        }
    }

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
