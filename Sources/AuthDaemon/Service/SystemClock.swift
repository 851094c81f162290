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
/// The timers are the loop's (``LoopExecutor/schedule(after:_:)``), and their actions run in tasks on it:
/// `Task.sleep` would start libdispatch's timer thread.
public struct SystemClock: ServiceClock {
    private let executor: LoopExecutor

    /// A clock whose timers fire on `executor`'s loop.
    public init(executor: LoopExecutor) { self.executor = executor }

    public var now: Date { Date() }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> ServiceTimer {
        let timer = executor.schedule(after: delay) { Task(executorPreference: executor) { await action() } }
        return ServiceTimer { timer.cancel() }
    }
}
