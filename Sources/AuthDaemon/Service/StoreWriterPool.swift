// SPDX-License-Identifier: Apache-2.0
import AuthStore

/// The threads that run the service's blocking store operations (an fsync takes milliseconds on a real disk), so
/// that its actor answers other calls meanwhile. Injected into ``AuthService``: the daemon's owner decides which
/// threads they are (the daemon: ``StoreWriters``), and tests may run the writes inline.
public protocol StoreWriterPool: Sendable {
    /// Runs `work` off the caller's executor and returns when it is done, with its error. The caller resumes on
    /// its own isolation (the service's actor, on the loop): the completion comes back by that one path.
    func run(
        isolation: isolated (any Actor)?, _ work: @escaping @Sendable () throws(TokenStoreError) -> Void
    ) async throws(TokenStoreError)
}
