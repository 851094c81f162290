// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A group's token reached a change of state that its JWT error handler must hear about (R13, R14).
public struct ExpiryEvent: Hashable, Sendable, CustomStringConvertible {
    /// The group whose token changed state.
    public var group: AppGroup
    /// ``JwtErrorReason/expiredSoon`` (at `exp - 60 s`) or ``JwtErrorReason/expired`` (at `exp`).
    public var reason: JwtErrorReason
    /// The instant the state changed: `exp - 60 s` for `expiredSoon`, `exp` for `expired`.
    public var deadline: Date
    /// The token's `exp`.
    public var expiresAt: Date

    public init(group: AppGroup, reason: JwtErrorReason, deadline: Date, expiresAt: Date) {
        self.group = group
        self.reason = reason
        self.deadline = deadline
        self.expiresAt = expiresAt
    }

    public var description: String {
        "\(group): \(reason) at \(deadline.timeIntervalSince1970) (exp \(expiresAt.timeIntervalSince1970))"
    }
}
