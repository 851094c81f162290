// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Makes the store directory's changes (records renamed into place or removed) durable, one `fsync(2)` for all
/// the writers whose changes are done when it starts: writes to one directory share its fsync (group commit).
///
/// A writer counts its change once the change is made, then waits until an fsync that started after that has
/// finished. If none is running it starts one itself; if one is running, that one may have started before the
/// change, so the writer waits for it and then starts the next, for every change made meanwhile.
///
/// A failed fsync fails every writer whose change it was to cover: the kernel reports a write-back error once per
/// open file, so a later fsync of the same descriptor could succeed although the change was lost.
final class DirectorySync: @unchecked Sendable {  // its state only under its mutex
    private struct State {
        /// Changes counted so far.
        var changes: UInt64 = 0
        /// The changes the last successful fsync covered.
        var synced: UInt64 = 0
        /// The changes a failed fsync was to cover, and its error.
        var failed: (through: UInt64, error: SystemCallError)?
        /// Whether an fsync is running.
        var running = false
    }

    private let descriptor: CInt
    private let flush: @Sendable (CInt) throws(SystemCallError) -> Void
    private let state: UnsafeMutablePointer<State>
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let finished = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    /// Flushes `descriptor`, an open directory that outlives this object, with `flush` (`fsync(2)`; a test's
    /// own, to hold an fsync or fail it).
    init(
        _ descriptor: CInt, flush: @escaping @Sendable (CInt) throws(SystemCallError) -> Void = SystemCalls.fsync
    ) {
        self.descriptor = descriptor
        self.flush = flush
        state = .allocate(capacity: 1)
        state.initialize(to: State())
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(finished, nil)
    }

    deinit {
        pthread_cond_destroy(finished)
        pthread_mutex_destroy(mutex)
        finished.deallocate()
        mutex.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// Returns once a change the caller has just made to the directory is durable.
    ///
    /// - Throws: ``SystemCallError`` from the fsync that was to cover the change.
    func changed() throws(SystemCallError) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        state.pointee.changes += 1
        let change = state.pointee.changes
        while true {
            if let failed = state.pointee.failed, failed.through >= change { throw failed.error }
            if state.pointee.synced >= change { return }
            if !state.pointee.running { break }
            pthread_cond_wait(finished, mutex)
        }
        state.pointee.running = true
        let covered = state.pointee.changes
        pthread_mutex_unlock(mutex)
        var failure: SystemCallError?
        do {
            try flush(descriptor)
        } catch {
            failure = error
        }
        pthread_mutex_lock(mutex)
        state.pointee.running = false
        if let failure {
            state.pointee.failed = (covered, failure)
        } else {
            state.pointee.synced = max(state.pointee.synced, covered)
        }
        pthread_cond_broadcast(finished)
        if let failure { throw failure }
    }

    /// The changes counted so far (for tests: a writer has counted its change, and waits).
    var changes: UInt64 {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return state.pointee.changes
    }
}
