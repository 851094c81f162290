// SPDX-License-Identifier: Apache-2.0
/// Who the app's user is, with the stream JWT issued for them (R7).
public struct CustomerIdentity: Hashable, Sendable {
    /// The customer's ids, such as `["registered": "jane@example.com"]`.
    public var customerIds: [String: String]
    /// The stream JWT for this customer; without one, the group's stored token is cleared.
    public var jwtToken: String?

    public init(customerIds: [String: String], jwtToken: String? = nil) {
        self.customerIds = customerIds
        self.jwtToken = jwtToken
    }
}

/// A token set for the group, as the token-refreshed notification reports it. The token may already have
/// expired (R6): look at the state before relying on it.
public struct TokenRefresh: Hashable, Sendable {
    /// The app group.
    public var group: String
    /// The generation of the new token.
    public var generation: UInt64

    public init(group: String, generation: UInt64) {
        self.group = group
        self.generation = generation
    }
}
