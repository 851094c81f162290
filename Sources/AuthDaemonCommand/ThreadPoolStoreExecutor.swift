// SPDX-License-Identifier: Apache-2.0
import AuthDaemon
import AuthStore
import NIOPosix
import Synchronization

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
    private let started = Mutex(false)

    /// A pool of `threads` threads, started at the first ``run(_:)``.
    public init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: threads)
    }

    public func run(_ work: @escaping @Sendable () throws(TokenStoreError) -> Void) async throws(TokenStoreError) {
        // The threads start the first time, before any work is given to the pool: work given while its threads
        // were still starting was never picked up (KillDuringWritesTests: no SetToken acknowledged in 4 s).
        started.withLock { started in
            if !started {
                pool.start()
                started = true
            }
        }
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
