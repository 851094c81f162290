// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Synchronization

/// The claim to refresh an app group's token of one generation (R28), held on a connection of its own: it
/// ends when a token is set, when it is released or closed, when the process exits or crashes (the
/// connection closes with it), or when its lease runs out unless renewed.
///
/// ```swift
/// if let claim = try await daemon.holdRefreshClaim(group: "shop", generation: event.generation) {
///     defer { claim.close() }
///     guard let token = try? await backend.fetchJwt() else { return await claim.release() }
///     _ = try await daemon.setToken(token, group: "shop")
/// }
/// ```
public final class RefreshClaim: Sendable {
    /// The app group.
    public let group: String
    /// The generation being refreshed.
    public let generation: UInt64
    /// How long the claim holds from when it was granted or last renewed.
    public let lease: Duration

    private let connection: VarlinkConnection
    private let closed = Atomic<Bool>(false)

    init(group: String, generation: UInt64, lease: Duration, connection: VarlinkConnection) {
        self.group = group
        self.generation = generation
        self.lease = lease
        self.connection = connection
    }

    deinit { connection.close() }

    /// Extends the claim by another ``lease``, for a backend that is slow by nature.
    ///
    /// - Returns: Whether the claim still held and was extended; false when it had ended (a token was set,
    ///   its lease ran out and another app holds it).
    public func renew() async throws(AuthClientError) -> Bool {
        let message = try AuthDaemonClient.encode(
            "com.exponea.Auth.ClaimRefresh",
            ClaimRefreshParameters(group: group, generation: generation, renew: true))
        let result: ClaimRefreshResult = try AuthDaemonClient.decode(try await connection.call(message))
        return result.granted
    }

    /// Gives the claim up (the fetch failed, or ended without a token), so that the next claim is granted at
    /// once, and closes its connection. Does nothing when already released or closed.
    public func release() async {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        defer { connection.close() }
        guard
            let message = try? AuthDaemonClient.encode(
                "com.exponea.Auth.ReleaseRefresh", ReleaseRefreshParameters(group: group, generation: generation))
        else { return }
        // Closing the connection ends the claim too: a failed call loses nothing.
        _ = try? await connection.call(message)
    }

    /// Closes the claim's connection: the daemon ends the claim if it still held, and tells the group's
    /// apps again that the token needs refreshing.
    public func close() {
        closed.store(true, ordering: .relaxed)
        connection.close()
    }
}
