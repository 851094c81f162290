// SPDX-License-Identifier: Apache-2.0
import AuthStore
import NIOPosix

/// Where the service runs its blocking store operations (an fsync takes milliseconds on a real disk), so that
/// its actor answers other calls meanwhile. Injected into ``AuthService``: the daemon's owner decides which
/// threads do it, and tests may run the writes inline.
public protocol StoreExecutor: Sendable {
    /// Runs `work` off the caller's executor and returns when it is done, with its error.
    func run(_ work: @escaping @Sendable () throws(TokenStoreError) -> Void) async throws(TokenStoreError)
}

/// A fixed set of threads for store operations: writes of different groups overlap their fsyncs (the file
/// system commits overlapping ones together) without a thread per waiting client.
public final class ThreadPoolStoreExecutor: StoreExecutor {
    /// The process's pool of 8 threads, started on first use.
    public static let shared = ThreadPoolStoreExecutor(threads: 8)

    private let pool: NIOThreadPool

    /// A pool of `threads` threads, started at once.
    public init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
    }

    /// Stops the threads once the operations already given have run; later ones fail.
    public func shutdown() async throws {
        try await pool.shutdownGracefully()
    }

    public func run(_ work: @escaping @Sendable () throws(TokenStoreError) -> Void) async throws(TokenStoreError) {
        let failure: TokenStoreError?
        do {
            failure = try await pool.runIfActive { () -> TokenStoreError? in
                do throws(TokenStoreError) {
                    try work()
                    return nil
                } catch {
                    return error
                }
            }
        } catch {
            failure = TokenStoreError(code: .encodingFailed, message: "the store's threads are gone: \(error)")
        }
        if let failure { throw failure }
    }
}
