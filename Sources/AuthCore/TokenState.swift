// SPDX-License-Identifier: Apache-2.0
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where a group's token stands at a given instant (R13, R15-R17).
public enum TokenState: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// No token is set.
    case notProvided
    /// `exp` has passed: `exp <= now`.
    case expired
    /// The token expires within the margin: `now < exp <= now + 60 s`.
    case expiredSoon
    /// The token is good for more than the margin.
    case valid

    /// How long before `exp` a token counts as ``expiredSoon`` and the `expiredSoon` timer fires.
    public static let expirySoonMargin: TimeInterval = 60

    /// The state of a token that expires at `expiresAt`, at `now`.
    public init(expiresAt: Date, at now: Date) {
        if expiresAt <= now {
            self = .expired
        } else if expiresAt <= now.addingTimeInterval(Self.expirySoonMargin) {
            self = .expiredSoon
        } else {
            self = .valid
        }
    }

    /// The state of `token` at `now`; ``notProvided`` when there is none.
    public init(_ token: StreamJWT?, at now: Date) {
        guard let token else {
            self = .notProvided
            return
        }
        self = token.state(at: now)
    }

    /// The reason the JWT error handler is called with in this state, or nil for ``valid``.
    public var errorReason: JwtErrorReason? {
        switch self {
        case .notProvided: .notProvided
        case .expired: .expired
        case .expiredSoon: .expiredSoon
        case .valid: nil
        }
    }

    public var description: String { rawValue }
}

/// The next instant at which a token's state changes, and what it changes to: when an expiry timer fires.
public struct ExpiryDeadline: Hashable, Sendable {
    /// The state the token enters at ``date``: ``TokenState/expiredSoon`` or ``TokenState/expired``.
    public var state: TokenState
    /// The wall-clock instant of the change.
    public var date: Date

    public init(state: TokenState, date: Date) {
        self.state = state
        self.date = date
    }

    /// The reason the timer reports.
    public var reason: JwtErrorReason { state == .expired ? .expired : .expiredSoon }

    /// The first change of state strictly after `now` for a token that expires at `expiresAt`, or nil when the
    /// token has already expired (R13, R14).
    ///
    /// A token that is still valid next turns ``TokenState/expiredSoon`` at `exp - 60 s`; one inside the margin
    /// next turns ``TokenState/expired`` at `exp`.
    public static func next(expiresAt: Date, after now: Date) -> ExpiryDeadline? {
        let soon = expiresAt.addingTimeInterval(-TokenState.expirySoonMargin)
        if now < soon { return ExpiryDeadline(state: .expiredSoon, date: soon) }
        if now < expiresAt { return ExpiryDeadline(state: .expired, date: expiresAt) }
        return nil
    }
}
