// SPDX-License-Identifier: Apache-2.0
import AuthDaemon
import AuthStore
import NIOPosix

/// A fixed set of threads for store operations: writes of different groups overlap their fsyncs (the file
/// system commits overlapping ones together) without a thread per waiting client. The threads start at the
/// first write; a daemon that is only read never starts them.
public final class ThreadPoolStoreExecutor: StoreExecutor {
    /// The daemon's pool (``defaultThreadCount`` threads), started at the first write and kept for the
    /// process's life.
    public static let shared = ThreadPoolStoreExecutor(threads: defaultThreadCount)

    /// How many writes of different groups may fsync at once: measured in docs/architecture.md ("The store's
    /// threads"; `authd-bench --only durability`).
    public static let defaultThreadCount = 8

    private let pool: NIOThreadPool

    /// A pool of `threads` threads, started at the first ``run(_:)``.
    public init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: threads)
    }

    public func run(_ work: @escaping @Sendable () throws(TokenStoreError) -> Void) async throws(TokenStoreError) {
        // The first write starts the threads; later calls find them running (`start()` checks under the pool's
        // lock).
        pool.start()
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
