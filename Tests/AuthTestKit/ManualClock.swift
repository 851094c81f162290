// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Foundation
import Synchronization

/// A ``ServiceClock`` that stands still until a test moves it, and whose timers fire only when the test says:
/// expiry, leases, flush bounds and WaitForToken's bound are tested at fixed times, with no sleeping.
///
/// ```swift
/// let clock = ManualClock(Date(timeIntervalSince1970: 1_900_000_000))
/// let service = AuthService(store: store, records: [], clock: clock, storeWriters: StoreWriters.shared,
///                           executor: loop.executor, logger: logger)
/// #expect(await clock.waitForTimers(armed: 1))   // a barrier: the service armed its timer
/// await clock.advance(by: 30, firing: true)       // moves the clock and runs what became due
/// ```
public final class ManualClock: ServiceClock {
    private struct Timer {
        var id: Int
        var due: Date
        var order: Int
        var action: @Sendable () async -> Void
    }

    private struct State {
        var now: Date
        var timers: [Timer] = []
        var armed = 0
    }

    private let state: Mutex<State>
    private let armed = CountBarrier()

    /// A clock that reads `now` until moved.
    public init(_ now: Date) { state = Mutex(State(now: now)) }

    /// The time the clock shows.
    public var now: Date { state.withLock { $0.now } }

    /// Moves the clock by `interval` seconds (negative moves it back); timers do not fire.
    public func advance(by interval: TimeInterval) { state.withLock { $0.now = $0.now.addingTimeInterval(interval) } }

    /// Moves the clock by `interval` seconds, then runs every timer that became due, in due order, each to its end.
    public func advance(by interval: TimeInterval, firing: Bool) async {
        advance(by: interval)
        if firing { await fireDueTimers() }
    }

    /// Sets the clock to `date`, forward or backward.
    public func set(_ date: Date) { state.withLock { $0.now = date } }

    /// Runs every timer due at the clock's time, in due order (one armed by another runs too when due).
    ///
    /// - Returns: How many ran.
    @discardableResult
    public func fireDueTimers() async -> Int {
        var fired = 0
        while let timer = takeDueTimer() {
            await timer.action()
            fired += 1
        }
        return fired
    }

    /// How many timers were ever armed.
    public var armedCount: Int { state.withLock { $0.armed } }

    /// How many timers wait to fire.
    public var pendingCount: Int { state.withLock { $0.timers.count } }

    /// A barrier: waits until `count` timers were armed in all (a WaitForToken is waiting, a lease or a flush's
    /// bound is running), or `timeout` passed; whether they were.
    public func waitForTimers(armed count: Int, timeout: Duration = .seconds(20)) async -> Bool {
        await armed.wait(until: count, timeout: timeout)
    }

    public func schedule(after delay: Duration, _ action: @escaping @Sendable () async -> Void) -> ServiceTimer {
        let seconds = Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18
        let id = state.withLock { state in
            state.armed += 1
            state.timers.append(
                Timer(
                    id: state.armed, due: state.now.addingTimeInterval(seconds), order: state.armed, action: action))
            return state.armed
        }
        armed.increment()
        return ServiceTimer { [self] in state.withLock { $0.timers.removeAll { $0.id == id } } }
    }

    private func takeDueTimer() -> Timer? {
        state.withLock { state in
            let due = state.timers.enumerated().filter { $0.element.due <= state.now }
            guard let first = due.min(by: { ($0.element.due, $0.element.order) < ($1.element.due, $1.element.order) })
            else { return nil }
            return state.timers.remove(at: first.offset)
        }
    }
}

/// A count that tasks wait on, the tests' alternative to sleeping: `wait(until:timeout:)` returns as soon as the
/// count reaches its target (a subscriber registered, an event arrived, a timer armed), or when the bound passed.
public final class CountBarrier: Sendable {
    private struct Waiter {
        var target: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var count = 0
        var nextID: UInt64 = 0
        var waiters: [UInt64: Waiter] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// The count now.
    public var count: Int { state.withLock { $0.count } }

    /// Adds `amount` and wakes whoever waited for the new count.
    public func increment(by amount: Int = 1) {
        let woken = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count += amount
            let reached = state.waiters.filter { $0.value.target <= state.count }
            for id in reached.keys { state.waiters[id] = nil }
            return reached.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Waits until the count is at least `target`, or `timeout` passed: whether it got there.
    public func wait(until target: Int, timeout: Duration = .seconds(20)) async -> Bool {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitUntil(target) }
            group.addTask { try? await Task.sleep(for: timeout) }  // the bound, not an ordering
            await group.next()
            group.cancelAll()
        }
        return count >= target
    }

    /// Waits until the count is at least `target`; returns early when the task is cancelled.
    private func waitUntil(_ target: Int) async {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.count >= target || Task.isCancelled { return true }
                    state.waiters[id] = Waiter(target: target, continuation: continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }
}

/// Values that arrive from other tasks (events, handler calls), for a test to wait on without sleeping.
public final class Arrivals<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])
    private let arrived = CountBarrier()

    public init() {}

    /// Records `value` and wakes whoever waits for it.
    public func append(_ value: Value) {
        values.withLock { $0.append(value) }
        arrived.increment()
    }

    /// Every value so far, in order of arrival.
    public var all: [Value] { values.withLock { $0 } }

    /// Waits until `count` values arrived, or `timeout` passed: whether they did.
    public func waitFor(count: Int, timeout: Duration = .seconds(20)) async -> Bool {
        await arrived.wait(until: count, timeout: timeout)
    }
}
