// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Systemd

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The system's wall clock, with timers on CLOCK_MONOTONIC (a timer's delay is a duration, not a wall-clock
/// instant: a clock set back does not stretch it).
///
/// In the daemon the timers are the loop's (``LoopExecutor/schedule(after:_:)``): `Task.sleep` would start
/// libdispatch's timer thread. Without a loop (a test), they are tasks sleeping on Swift's `ContinuousClock`.
public struct SystemClock: ServiceClock {
    private let executor: LoopExecutor?

    /// A clock whose timers fire on `executor`'s loop, or in sleeping tasks when it is nil.
    public init(executor: LoopExecutor? = nil) { self.executor = executor }

    public var now: Date { Date() }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> ServiceTimer {
        guard let executor else {
            let task = Task {
                try? await Task.sleep(for: delay)
                guard !Task.isCancelled else { return }
                await action()
            }
            return ServiceTimer { task.cancel() }
        }
        let timer = executor.schedule(after: delay) { Task(executorPreference: executor) { await action() } }
        return ServiceTimer { timer.cancel() }
    }
}
