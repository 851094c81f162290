import Crypto
import Foundation

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
        return signingInput + "." + Self.base64URL(Data(mac))
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
