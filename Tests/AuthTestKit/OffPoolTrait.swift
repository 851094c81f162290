// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization
import Testing

/// Runs each test case on threads of its own instead of the concurrency pool, a few cases at a time.
///
/// Swift Testing runs a synchronous test on the pool, which has one thread per core. A test that blocks there
/// (waiting for a daemon's reply, a child's exit, a log line) holds a pool thread for as long as it waits, and a
/// test whose server or client runs in the test process on that pool then starves. Every suite whose tests block
/// carries this trait, so the pool stays free for the in-process tests, and one `swift test` run serves both.
///
/// At most ``width`` cases run under it at once: the blocking tests start daemons and clients, and unbounded
/// they would all start at once.
public struct OffPoolTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    /// How many cases run at once: twice the cores, at least 4; `AUTHD_TEST_WIDTH` sets it.
    public static let width: Int = {
        if let text = ProcessInfo.processInfo.environment["AUTHD_TEST_WIDTH"], let width = Int(text), width > 0 {
            return width
        }
        return max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)
    }()

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await TestSlots.shared.acquire()
        defer { TestSlots.shared.release() }
        // A child task, which starts as a job of the executor: a call under `withTaskExecutorPreference` alone
        // may begin on the pool thread it was made on, and a synchronous test never hops off it.
        // The group waits for the child, so `function` does not outlive this call.
        try await withoutActuallyEscaping(function) { function in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask(executorPreference: ThreadPerJobExecutor.shared) { try await function() }
                try await group.waitForAll()
            }
        }
    }
}

extension Trait where Self == OffPoolTrait {
    /// Runs each test case on threads of its own, off the concurrency pool: for tests that block.
    public static var offPool: Self { Self() }
}

/// A task executor that runs each job on a new thread, named `test-off-pool`: a job may block as long as it
/// likes without holding anything another test needs.
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        Thread {
            // Not Thread.name, which Foundation applies to the thread only now and then.
            _ = setThreadName(pthread_self(), ThreadPerJobExecutor.threadName)
            job.runSynchronously(on: executor)
        }.start()
    }

    /// The name of its threads.
    static let threadName = "test-off-pool"
}

/// A counting semaphore that awaits instead of blocking.
final class TestSlots: Sendable {
    static let shared = TestSlots(OffPoolTrait.width)

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(free: count)) }

    func acquire() async {
        await withCheckedContinuation { continuation in
            let acquired = state.withLock { state in
                guard state.free > 0 else {
                    state.waiting.append(continuation)
                    return false
                }
                state.free -= 1
                return true
            }
            if acquired { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return CheckedContinuation<Void, Never>?.none
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}

/// The name of the calling thread, as the kernel has it.
public func currentThreadName() -> String {
    let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return name.trimmingCharacters(in: .newlines)
}

/// `pthread_setname_np(3)`, which Swift's Glibc module hides behind `_GNU_SOURCE`.
@_silgen_name("pthread_setname_np")
private func setThreadName(_ thread: pthread_t, _ name: UnsafePointer<CChar>) -> Int32
