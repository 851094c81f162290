// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Stream JWTs shaped like real ones (HS512 header with `kid`, `exp`, `ids`), about 400 bytes. The daemon
/// never checks the signature (it cannot: the secret stays with the backend), so it is fixed filler.
enum BenchToken {
    /// A token for `customer` expiring at `exp` (Unix seconds).
    static func make(exp: Int, customer: Int) -> String { make(exp: Double(exp), customer: customer) }

    /// A token for `customer` expiring at `exp`, which may have a fraction of a second (RFC 7519 NumericDate).
    static func make(exp: Double, customer: Int) -> String {
        let numericDate = exp == exp.rounded() ? String(Int(exp)) : String(format: "%.6f", exp)
        let header = #"{"alg":"HS512","typ":"JWT","kid":"bench-key-2026-11"}"#
        let payload =
            #"{"exp":\#(numericDate),"iat":\#(Int(exp) - 3600),"ids":{"registered":"customer-\#(customer)@bench.example","#
            + #""cookie":"\#(UUID().uuidString.lowercased())"}}"#
        let signature = String(repeating: "s1gNaTuRe-", count: 9).prefix(86)
        return base64URL(header) + "." + base64URL(payload) + "." + signature
    }

    private static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Requests as the wire carries them, encoded once.
enum Requests {
    static func getToken(_ group: String) -> [UInt8] {
        Array(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"\#(group)"}}"#.utf8) + [0]
    }

    static func setToken(_ group: String, _ token: String) -> [UInt8] {
        Array(#"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"\#(group)","token":"\#(token)"}}"#.utf8)
            + [0]
    }

    static func subscribe(_ group: String) -> [UInt8] {
        Array(#"{"method":"com.exponea.Auth.Subscribe","parameters":{"group":"\#(group)"},"more":true}"#.utf8) + [0]
    }

    static let listGroups = Array(#"{"method":"com.exponea.Auth.ListGroups"}"#.utf8) + [0]
}
