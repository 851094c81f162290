// SPDX-License-Identifier: Apache-2.0
import Dispatch

/// Runs `body` on the concurrency pool and waits for its result on the calling thread: the bridge from the
/// daemon's own threads (the signal loop, the expiry timer) into the service's actor.
///
/// Never call it from a task on the pool itself: it would hold one of the pool's few threads while waiting.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = ResultBox<T>()
    Task {
        result.value = await body()
        done.signal()
    }
    done.wait()
    return result.value!
}

/// Hands a value from the task to the waiting thread; the semaphore orders the accesses.
private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
