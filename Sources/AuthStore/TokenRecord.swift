// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the store keeps for one app group: the current stream JWT, if any, and the customer ids (R4, R7).
///
/// A record without a token is normal: identifying a customer without a JWT clears the token but keeps the ids
/// (R7).
///
/// `description` (and the mirror `dump` uses) shows neither the token nor the customer ids, so a record is safe
/// to log.
///
/// ```swift
/// let record = TokenRecord(group: group, token: jwt, customerIds: ["registered": "u-1"],
///                          generation: 7, changedAt: .now)
/// ```
public struct TokenRecord: Sendable, Equatable, CustomStringConvertible, CustomReflectable {
    /// The app group the record belongs to.
    public var group: AppGroup
    /// The current token, or nil when none is set.
    public var token: StreamJWT?
    /// The customer ids set with the last identification (R7), which may differ from the token's `ids`.
    public var customerIds: [String: String]
    /// A counter the daemon raises on every change, stored as given.
    public var generation: UInt64
    /// When the record last changed, stored exactly as given.
    public var changedAt: Date

    /// Creates a record.
    public init(
        group: AppGroup, token: StreamJWT?, customerIds: [String: String] = [:], generation: UInt64,
        changedAt: Date
    ) {
        self.group = group
        self.token = token
        self.customerIds = customerIds
        self.generation = generation
        self.changedAt = changedAt
    }

    public var description: String {
        "TokenRecord(group: \(group), token: \(token.map { "\($0)" } ?? "none"), "
            + "customerIds: \(customerIds.count) keys, generation: \(generation), "
            + "changedAt: \(changedAt.timeIntervalSince1970))"
    }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "group": group, "token": token.map { "\($0)" } ?? "none",
                "customerIds": "\(customerIds.count) keys", "generation": generation, "changedAt": changedAt,
            ])
    }
}
