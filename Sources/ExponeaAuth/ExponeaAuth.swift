import AuthCore

// The vocabulary an app shares with the daemon, under the names the Exponea SDK uses.

/// A stream JWT parsed for lifecycle management: header `alg`/`kid`, claims `exp` and `ids` (R1, R2).
public typealias StreamJWT = AuthCore.StreamJWT

/// Why a string is not a usable stream JWT.
public typealias StreamJWTError = AuthCore.StreamJWTError

/// Why the JWT error handler is called: `notProvided`, `invalid`, `expired`, `expiredSoon`, `insufficient`.
public typealias JwtErrorReason = AuthCore.JwtErrorReason

/// Where a token stands at an instant: `notProvided`, `expired`, `expiredSoon` or `valid`.
public typealias TokenState = AuthCore.TokenState

/// The name of an app group: the apps that share one customer identity and one stream JWT.
public typealias AppGroup = AuthCore.AppGroup

/// What the JWT error handler receives (R10): why it is called and who the token is for.
public struct JwtErrorContext: Hashable, Sendable {
    /// Why the handler is called.
    public var reason: JwtErrorReason
    /// The customer ids of the current identity, so the handler can ask the backend for the right token.
    public var customerIds: [String: String]

    public init(reason: JwtErrorReason, customerIds: [String: String]) {
        self.reason = reason
        self.customerIds = customerIds
    }
}
