// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

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

// The daemon's wire types, for callers of ``AuthDaemonClient``.

/// Something that happened to an app group: `tokenRefreshed`, `jwtError`, `flushRequested`, `cleared`, or
/// `state` (where the group stands, first on every subscription).
public typealias AuthEvent = AuthProtocol.AuthEvent
/// One app group as `ListGroups` shows it.
public typealias GroupSummary = AuthProtocol.GroupSummary
/// How many app groups `CountGroups` counts, and how many of them have a token.
public typealias CountGroupsResult = AuthProtocol.CountGroupsResult
/// How the daemon sees the caller (`WhoAmI`).
public typealias WhoAmIResult = AuthProtocol.WhoAmIResult
/// An app group the caller may use, with the rules that allow it.
public typealias GroupAccess = AuthProtocol.GroupAccess
/// A token's claims as the daemon read them.
public typealias ClaimsPayload = AuthProtocol.ClaimsPayload
/// A token on the wire; its description never shows the token.
public typealias CompactToken = AuthProtocol.CompactToken
/// `SetToken`'s result: the new generation and the token's claims.
public typealias SetTokenResult = AuthProtocol.SetTokenResult
/// `GetToken`'s result.
public typealias GetTokenResult = AuthProtocol.GetTokenResult
/// `Preflight`'s result: the token to send, its state, and the handler's reason if any.
public typealias PreflightResult = AuthProtocol.PreflightResult
/// `ReportAuthFailure`'s result: whether to retry, and the handler's reason if any.
public typealias ReportAuthFailureResult = AuthProtocol.ReportAuthFailureResult
/// `WaitForToken`'s result.
public typealias WaitForTokenResult = AuthProtocol.WaitForTokenResult
/// `Anonymize`'s and `StopIntegration`'s result: the apps asked to flush, and those that did not confirm.
public typealias ClearResult = AuthProtocol.ClearResult
/// An app that did not confirm its flush before the group was cleared, and why.
public typealias UnconfirmedFlush = AuthProtocol.UnconfirmedFlush
/// What `org.varlink.service.GetInfo` says about the daemon.
public typealias DaemonInfo = AuthProtocol.VarlinkService.Info
/// systemd's `io.systemd.Metrics` interface, which the daemon serves: its figures and families.
public typealias MetricsInterface = AuthProtocol.MetricsInterface
