// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// Something that happened to an app group, streamed to its apps by Subscribe.
public struct AuthEvent: Codable, Hashable, Sendable {
    /// What happened. Kinds a later daemon adds decode as ``unknown(_:)``.
    public enum Kind: Hashable, Sendable, RawRepresentable, Codable {
        /// A token was set (R6), even an expired one.
        case tokenRefreshed
        /// The group's apps should refresh the token: see ``AuthEvent/reason``.
        case jwtError
        /// Apps should flush pending events and acknowledge with ``AuthEvent/flushId``.
        case flushRequested
        /// The group's token and identity are gone: see ``AuthEvent/cause``.
        case cleared
        /// Where the group stands, sent first on every subscription: ``AuthEvent/tokenState`` and
        /// ``AuthEvent/refreshClaimed``. A jwtError the group still waits on follows it.
        case state
        /// A kind this version does not know.
        case unknown(String)

        public init(rawValue: String) {
            switch rawValue {
            case "tokenRefreshed": self = .tokenRefreshed
            case "jwtError": self = .jwtError
            case "flushRequested": self = .flushRequested
            case "cleared": self = .cleared
            case "state": self = .state
            default: self = .unknown(rawValue)
            }
        }

        public var rawValue: String {
            switch self {
            case .tokenRefreshed: "tokenRefreshed"
            case .jwtError: "jwtError"
            case .flushRequested: "flushRequested"
            case .cleared: "cleared"
            case .state: "state"
            case .unknown(let value): value
            }
        }

        public init(from decoder: any Decoder) throws {
            self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
    }

    public var kind: Kind
    public var group: String
    /// The group's token generation when the event happened.
    public var generation: UInt64
    /// jwtError: why the handler should run.
    public var reason: JwtErrorReason?
    /// jwtError: who the token is for.
    public var customerIds: [String: String]?
    /// flushRequested: the id to acknowledge.
    public var flushId: String?
    /// cleared: `anonymize`, `stopIntegration` or `clearLocalCustomerData`.
    public var cause: String?
    /// state: where the group's token stands (`notProvided` when it has none).
    public var tokenState: TokenState?
    /// state: whether an app holds the claim to refresh the current token.
    public var refreshClaimed: Bool?

    public init(
        kind: Kind,
        group: String,
        generation: UInt64,
        reason: JwtErrorReason? = nil,
        customerIds: [String: String]? = nil,
        flushId: String? = nil,
        cause: String? = nil,
        tokenState: TokenState? = nil,
        refreshClaimed: Bool? = nil
    ) {
        self.kind = kind
        self.group = group
        self.generation = generation
        self.reason = reason
        self.customerIds = customerIds
        self.flushId = flushId
        self.cause = cause
        self.tokenState = tokenState
        self.refreshClaimed = refreshClaimed
    }
}

/// Subscribe's streamed result.
public struct SubscribeResult: Codable, Hashable, Sendable {
    public var event: AuthEvent
    public init(event: AuthEvent) { self.event = event }
}
