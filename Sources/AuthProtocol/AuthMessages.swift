// SPDX-License-Identifier: Apache-2.0
import AuthCore

// The parameters and results of com.exponea.Auth's methods, as com.exponea.Auth.varlink declares them.
// Group names travel as strings: the daemon validates them, so a bad one gets InvalidGroupName rather than
// a decoding error. Generations are unsigned 64-bit counters.
// The members of a reply type are declared in the order of their names: they are encoded in that order, which is
// the wire's (sorted, as JSONEncoder's .sortedKeys), so ParameterEncoder need not put them in order.

/// A token's claims on the wire.
public struct ClaimsPayload: Codable, Hashable, Sendable {
    /// The header's `alg`.
    public var algorithm: String
    /// `ids`.
    public var customerIds: [String: String]
    /// `exp`, in Unix seconds.
    public var expiresAt: Double
    /// The header's `kid`.
    public var keyId: String?

    public init(expiresAt: Double, customerIds: [String: String], algorithm: String, keyId: String?) {
        self.expiresAt = expiresAt
        self.customerIds = customerIds
        self.algorithm = algorithm
        self.keyId = keyId
    }

    public init(_ jwt: StreamJWT) {
        // Each of header and claims decodes its part of the token anew: read each once.
        self.init(header: jwt.header, claims: jwt.claims)
    }

    /// The claims of a token just decoded (``StreamJWT/decode(_:)``), with no decoding again.
    public init(header: StreamJWT.Header, claims: StreamJWT.Claims) {
        expiresAt = claims.expiresAt.timeIntervalSince1970
        customerIds = claims.customerIds
        algorithm = header.algorithm
        keyId = header.keyID
    }
}

/// Parameters that name only a group (GetToken, Preflight, Anonymize, StopIntegration,
/// ClearLocalCustomerData, Subscribe).
public struct GroupParameters: Codable, Hashable, Sendable {
    public var group: String
    public init(group: String) { self.group = group }
}

/// SetToken's parameters.
public struct SetTokenParameters: Codable, Hashable, Sendable {
    public var group: String
    public var token: CompactToken
    public init(group: String, token: CompactToken) {
        self.group = group
        self.token = token
    }
}

/// SetToken's result.
public struct SetTokenResult: Codable, Hashable, Sendable {
    public var claims: ClaimsPayload
    public var generation: UInt64
    public init(generation: UInt64, claims: ClaimsPayload) {
        self.generation = generation
        self.claims = claims
    }
}

/// GetToken's result.
public struct GetTokenResult: Codable, Hashable, Sendable {
    public var claims: ClaimsPayload?
    public var generation: UInt64
    public var token: CompactToken?
    public init(token: CompactToken?, claims: ClaimsPayload?, generation: UInt64) {
        self.token = token
        self.claims = claims
        self.generation = generation
    }
}

/// Preflight's result.
public struct PreflightResult: Codable, Hashable, Sendable {
    public var token: CompactToken?
    public var state: TokenState
    public var reason: JwtErrorReason?
    public var generation: UInt64
    public init(token: CompactToken?, state: TokenState, reason: JwtErrorReason?, generation: UInt64) {
        self.token = token
        self.state = state
        self.reason = reason
        self.generation = generation
    }
}

/// ReportAuthFailure's parameters.
public struct ReportAuthFailureParameters: Codable, Hashable, Sendable {
    public var group: String
    /// The HTTP status.
    public var status: Int
    /// The generation of the token the request carried; nil when it carried none.
    public var generation: UInt64?
    /// The 401 body's `token_expired` flag.
    public var tokenExpired: Bool?
    public init(group: String, status: Int, generation: UInt64?, tokenExpired: Bool?) {
        self.group = group
        self.status = status
        self.generation = generation
        self.tokenExpired = tokenExpired
    }
}

/// ReportAuthFailure's result.
public struct ReportAuthFailureResult: Codable, Hashable, Sendable {
    public var retry: Bool
    public var reason: JwtErrorReason?
    public init(_ decision: RetryDecision) {
        retry = decision.retry
        reason = decision.reason
    }
}

/// WaitForToken's parameters.
public struct WaitForTokenParameters: Codable, Hashable, Sendable {
    /// The longest wait a call may ask for.
    public static let maximumTimeoutMs = 5_000

    public var group: String
    /// Return once the group's generation is newer than this.
    public var after: UInt64
    /// How long to wait at most, 0 to ``maximumTimeoutMs``.
    public var timeoutMs: Int
    public init(group: String, after: UInt64, timeoutMs: Int) {
        self.group = group
        self.after = after
        self.timeoutMs = timeoutMs
    }
}

/// WaitForToken's result.
public struct WaitForTokenResult: Codable, Hashable, Sendable {
    public var token: CompactToken?
    public var generation: UInt64
    public init(token: CompactToken?, generation: UInt64) {
        self.token = token
        self.generation = generation
    }
}

/// IdentifyCustomer's parameters.
public struct IdentifyCustomerParameters: Codable, Hashable, Sendable {
    public var group: String
    public var customerIds: [String: String]
    /// The token for this identity; without one the stored token is cleared (R7).
    public var token: CompactToken?
    public init(group: String, customerIds: [String: String], token: CompactToken?) {
        self.group = group
        self.customerIds = customerIds
        self.token = token
    }
}

/// Results that carry only a generation (IdentifyCustomer).
public struct GenerationResult: Codable, Hashable, Sendable {
    public var generation: UInt64
    public init(generation: UInt64) { self.generation = generation }
}

/// AcknowledgeFlush's parameters.
public struct AcknowledgeFlushParameters: Codable, Hashable, Sendable {
    public var group: String
    public var flushId: String
    public init(group: String, flushId: String) {
        self.group = group
        self.flushId = flushId
    }
}

/// ClaimRefresh's parameters.
public struct ClaimRefreshParameters: Codable, Hashable, Sendable {
    public var group: String
    public var generation: UInt64
    /// Extends the lease of a claim this connection already holds, for a fetch that takes long; without it,
    /// a claim already held, even by this connection, is refused.
    public var renew: Bool?
    public init(group: String, generation: UInt64, renew: Bool? = nil) {
        self.group = group
        self.generation = generation
        self.renew = renew
    }
}

/// ClaimRefresh's result.
public struct ClaimRefreshResult: Codable, Hashable, Sendable {
    public var granted: Bool
    /// When granted: how long the claim holds, in milliseconds, unless renewed, released, or ended by a new
    /// token or the holder's connection closing.
    public var leaseMs: Int?
    public init(granted: Bool, leaseMs: Int? = nil) {
        self.granted = granted
        self.leaseMs = leaseMs
    }
}

/// ReleaseRefresh's parameters.
public struct ReleaseRefreshParameters: Codable, Hashable, Sendable {
    public var group: String
    public var generation: UInt64
    public init(group: String, generation: UInt64) {
        self.group = group
        self.generation = generation
    }
}

/// ReleaseRefresh's result.
public struct ReleaseRefreshResult: Codable, Hashable, Sendable {
    /// Whether this connection held the claim and gave it up; false when it held none (a token was set
    /// meanwhile, the lease ended, or another app holds it).
    public var released: Bool
    public init(released: Bool) { self.released = released }
}

/// An app that did not confirm its flush before Anonymize or StopIntegration cleared the group.
public struct UnconfirmedFlush: Codable, Hashable, Sendable {
    /// Why the flush was not confirmed.
    public enum Reason: String, Codable, Hashable, Sendable {
        /// The app did not acknowledge within the daemon's flush timeout.
        case timedOut
        /// The app's subscription ended before it acknowledged (it exited, crashed, or fell behind).
        case dropped
    }

    /// The process that held the subscription.
    public var pid: Int32
    /// Why it did not confirm.
    public var reason: Reason
    public init(pid: Int32, reason: Reason) {
        self.pid = pid
        self.reason = reason
    }
}

/// Anonymize's and StopIntegration's result: the group is cleared either way (the user asked to forget the
/// customer); `unconfirmed` lists the subscriptions whose flush was not confirmed, empty when every app of the
/// group confirmed.
public struct ClearResult: Codable, Hashable, Sendable {
    /// How many subscriptions were asked to flush.
    public var asked: Int
    /// The ones that did not confirm.
    public var unconfirmed: [UnconfirmedFlush]
    public init(asked: Int, unconfirmed: [UnconfirmedFlush]) {
        self.asked = asked
        self.unconfirmed = unconfirmed
    }

    /// Whether every app asked confirmed its flush.
    public var confirmed: Bool { unconfirmed.isEmpty }
}

/// One group in ListGroups' result.
public struct GroupSummary: Codable, Hashable, Sendable {
    public var name: String
    public var hasToken: Bool
    public var state: TokenState
    public var expiresAt: Double?
    public var generation: UInt64
    public var subscribers: Int
    public init(
        name: String, hasToken: Bool, state: TokenState, expiresAt: Double?, generation: UInt64, subscribers: Int
    ) {
        self.name = name
        self.hasToken = hasToken
        self.state = state
        self.expiresAt = expiresAt
        self.generation = generation
        self.subscribers = subscribers
    }
}

/// ListGroups' result.
public struct ListGroupsResult: Codable, Hashable, Sendable {
    public var groups: [GroupSummary]
    public init(groups: [GroupSummary]) { self.groups = groups }
}

/// CountGroups' result: how many groups ListGroups would list, without listing them.
public struct CountGroupsResult: Codable, Hashable, Sendable {
    /// The groups the caller may use.
    public var groups: Int
    /// How many of them have a token (valid or not).
    public var withToken: Int
    public init(groups: Int, withToken: Int) {
        self.groups = groups
        self.withToken = withToken
    }
}

/// An app group the caller may use, in WhoAmI's result, with the rules that allow it (`Users=1001`,
/// `Groups=1002`, `Units=shop-*.service`, `root`, `owner`).
public struct GroupAccess: Codable, Hashable, Sendable {
    public var name: String
    public var rules: [String]
    public init(name: String, rules: [String]) {
        self.name = name
        self.rules = rules
    }
}

/// WhoAmI's result: how the daemon sees the caller, as it saw it when the connection was made.
public struct WhoAmIResult: Codable, Hashable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    /// The primary group.
    public var gid: UInt32
    /// The supplementary groups, ascending.
    public var gids: [UInt32]
    /// The unit the daemon names the caller by: in system mode its system unit, in user mode its unit in the
    /// user's service manager; nil when it has none the daemon can know.
    public var unit: String?
    /// The rule that lets the caller use every group (`root`; `owner` in user mode), or nil.
    public var everyGroup: String?
    /// The configured groups the caller may use, by name, each with its rules.
    public var appGroups: [GroupAccess]
    public init(
        pid: Int32, uid: UInt32, gid: UInt32, gids: [UInt32], unit: String?, everyGroup: String?,
        appGroups: [GroupAccess]
    ) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.gids = gids
        self.unit = unit
        self.everyGroup = everyGroup
        self.appGroups = appGroups
    }
}

/// The empty result of ClearLocalCustomerData and AcknowledgeFlush, and the empty
/// parameters of ListGroups, CountGroups and WhoAmI.
public struct EmptyPayload: Codable, Hashable, Sendable {
    public init() {}
}

extension AppGroup {
    /// Validates a group name from the wire.
    ///
    /// - Throws: ``VarlinkError/invalidGroupName(message:)`` saying what is wrong.
    public init(wire name: String) throws(VarlinkError) {
        do {
            try self.init(name)
        } catch {
            throw .invalidGroupName(message: error.description)
        }
    }
}
