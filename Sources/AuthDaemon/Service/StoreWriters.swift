// SPDX-License-Identifier: Apache-2.0
import AuthStore
import CProcessControl

#if canImport(Glibc)
    import Glibc
#endif

/// The threads that write the store, the daemon's only threads besides its loop: an fsync takes milliseconds on a
/// real disk, and writes of different groups that overlap share the file system's commit, so they run here, off
/// the loop, several at once.
///
/// A writer starts when a write finds every running writer busy (up to ``maximumThreads``), and exits after
/// ``idleExit`` without work: a daemon that is only read has none, and one that wrote a minute ago has none
/// again. A write's completion resumes its caller on the caller's isolation (the service's actor), and so comes
/// back to the loop through its executor, the one path.
public final class StoreWriters: StoreWriterPool, @unchecked Sendable {
    /// The daemon's writers.
    public static let shared = StoreWriters(maximumThreads: defaultThreadCount)

    /// How many writes of different groups may fsync at once: `authd-bench --only durability` measures each count.
    public static let defaultThreadCount = 8

    /// The writers' thread name (`/proc/PID/task/TID/comm`).
    public static let threadName = "store-writer"

    /// How long a writer waits for work before it exits.
    public static let idleExit: Duration = .seconds(10)

    /// The most writers at once.
    public let maximumThreads: Int
    private let idleExitSeconds: Int

    // Guarded by `mutex`: the state a writer waits on with `condition`.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var queue: [() -> Void] = []
    private var head = 0
    private var threads = 0
    private var idle = 0

    /// Writers up to `maximumThreads` at once, none started yet.
    public init(maximumThreads: Int, idleExit: Duration = StoreWriters.idleExit) {
        self.maximumThreads = max(1, maximumThreads)
        self.idleExitSeconds = max(1, Int(idleExit.components.seconds))
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// The writers running now.
    public var threadCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return threads
    }

    public func run(
        isolation: isolated (any Actor)? = #isolation, _ work: @escaping @Sendable () throws(TokenStoreError) -> Void
    ) async throws(TokenStoreError) {
        let failure: TokenStoreError? = await withCheckedContinuation { continuation in
            submit {
                do throws(TokenStoreError) {
                    try work()
                    continuation.resume(returning: nil)
                } catch {
                    continuation.resume(returning: error)
                }
            }
        }
        if let failure { throw failure }
    }

    private func submit(_ job: @escaping () -> Void) {
        pthread_mutex_lock(mutex)
        queue.append(job)
        let start = queue.count - head > idle && threads < maximumThreads
        if start { threads += 1 }
        let waiting = idle > 0
        pthread_mutex_unlock(mutex)
        // After the unlock: a writer woken while the mutex is held wakes only to wait for it.
        if waiting { pthread_cond_signal(condition) }
        if start { startWriter() }
    }

    private func startWriter() {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        // Sealing and writing one record needs little stack; the default 8 MiB would be address space only, but
        // a small one keeps the writers' cost plain.
        pthread_attr_setstacksize(&attributes, 256 * 1024)
        var thread = pthread_t()
        let context = Unmanaged.passRetained(self).toOpaque()
        let started = pthread_create(
            &thread, &attributes,
            { context in
                // So that a thread list explains itself: the loop, and these.
                _ = authd_name_thread(StoreWriters.threadName)
                Unmanaged<StoreWriters>.fromOpaque(context!).takeRetainedValue().work()
                return nil
            }, context)
        guard started != 0 else { return }
        Unmanaged<StoreWriters>.fromOpaque(context).release()
        // No thread: run the write here rather than lose it (the caller waits for it either way).
        pthread_mutex_lock(mutex)
        threads -= 1
        pthread_mutex_unlock(mutex)
        work(exitWhenIdle: true)
    }

    /// A writer's life: takes jobs until none comes for ``idleExit``.
    private func work(exitWhenIdle: Bool = false) {
        pthread_mutex_lock(mutex)
        while true {
            if head < queue.count {
                let job = queue[head]
                head += 1
                if head == queue.count {
                    queue.removeAll(keepingCapacity: true)
                    head = 0
                }
                pthread_mutex_unlock(mutex)
                job()
                pthread_mutex_lock(mutex)
                continue
            }
            if exitWhenIdle { break }
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            deadline.tv_sec += idleExitSeconds
            idle += 1
            let result = pthread_cond_timedwait(condition, mutex, &deadline)
            idle -= 1
            if result == ETIMEDOUT && head == queue.count {
                threads -= 1
                break
            }
        }
        pthread_mutex_unlock(mutex)
    }
}
