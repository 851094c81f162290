// SPDX-License-Identifier: Apache-2.0
import CSystemd
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Swift concurrency's jobs, run by the thread of a ``MainLoop``: an executor whose queue is a source of the
/// loop (an `eventfd(2)` readable while jobs wait), so that tasks, actors and the loop's own sources (sockets,
/// timers, signals, the bus) share one thread and one `epoll_wait`.
///
/// Through public API only (SE-0392, SE-0417): an actor whose `unownedExecutor` is this executor runs on the
/// loop, and a task started with `Task(executorPreference:)` runs its nonisolated code there. The loop's
/// callbacks can enter such an actor synchronously: `assumeIsolated` holds on the loop's thread, as the runtime asks
/// this executor (``checkIsolated()``, ``isIsolatingCurrentContext()``); ``isCurrent`` is the same test without the
/// runtime's lookup (the daemon's service enters through it on its hot path). Nothing of the daemon goes to Swift's
/// global executor, so no libdispatch thread starts.
///
/// Each wake-up runs the jobs queued, then those they queued, for at most ``roundsPerWakeUp`` rounds, then lets
/// the loop poll: the jobs a call queues one after another (its task's start, its entry into ``LoopIsolation``)
/// run in one turn, and tasks that keep enqueuing more work (a flooding user's calls, a job each) cannot starve
/// the sockets. Work that a handler of the loop queues (a call read from a socket starts its
/// task) runs when the handler returns, in the same turn, with no wake-up through the descriptor.
///
/// `Task.sleep` does not go through this executor (the runtime's `SchedulingExecutor` sleeps on libdispatch's
/// timer thread): timers belong to the loop (``MainLoop/after(_:accuracy:_:)``, ``schedule(after:_:)``).
public final class LoopExecutor: SerialExecutor, TaskExecutor, Sendable {
    private enum Work {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    /// Readable while work is queued.
    private let descriptor: Int32
    private let queue = Mutex<[Work]>([])
    /// The loop's thread, once attached.
    private let owner = Atomic<UInt>(0)
    /// The loop, for timers: touched only on its thread.
    fileprivate nonisolated(unsafe) var loop: MainLoop?
    /// Inside ``runRounds()``, which takes what the loop's thread queues meanwhile without a wake-up: touched only
    /// on the loop's thread.
    private nonisolated(unsafe) var draining = false
    /// The work `runRounds` takes from the queue: the loop's alone.
    private nonisolated(unsafe) var batch: [Work] = []

    /// How many times one wake-up takes the queue again, for what the jobs it ran queued. Four: a call takes two
    /// in a row, and a connection's further calls one each, so four let a flooding connection run about four
    /// calls before the loop reads the other sockets.
    public static let roundsPerWakeUp = 4

    /// An executor with an empty queue; its jobs run once it is attached to a loop.
    ///
    /// - Throws: ``SystemdError`` from `eventfd`.
    public init() throws(SystemdError) {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        guard descriptor >= 0 else {
            throw SystemdError(
                code: .eventLoop, function: "eventfd", errno: errno, context: "cannot create the loop's executor")
        }
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Runs the queued jobs on `loop`'s thread from now on; call it on that thread.
    public func attach(to loop: MainLoop) throws(SystemdError) {
        owner.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .releasing)
        self.loop = loop
        loop.afterDispatch = { [unowned self] in runRounds() }
        try loop.onReadable(descriptor) { [self] in
            var count: eventfd_t = 0
            _ = eventfd_read(descriptor, &count)
            runRounds()
        }
    }

    /// Whether the calling thread is the loop's.
    public var isCurrent: Bool {
        let owner = owner.load(ordering: .acquiring)
        return owner != 0 && owner == UInt(bitPattern: Int(bitPattern: pthread_self()))
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    /// Runs `body` on the loop's thread, after the work queued before it. Callable from any thread.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        submit(.closure(body))
    }

    /// Runs `body` on the loop's thread once `delay` has passed (CLOCK_MONOTONIC): a timer of the loop, which
    /// ``LoopTimer/cancel()`` disarms. Callable from any thread.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer(executor: self, body: body)
        if isCurrent {
            timer.arm(after: delay)
        } else {
            execute { timer.arm(after: delay) }
        }
        return timer
    }

    public func checkIsolated() {
        precondition(isCurrent, "not on the event loop's thread")
    }

    public func isIsolatingCurrentContext() -> Bool? { isCurrent }

    /// Runs `body` in `actor`'s isolation, synchronously, on the loop's thread; traps on another. `actor`'s
    /// executor must be this one.
    ///
    /// It does what `assumeIsolated` does, with the loop's own thread test as the check: `assumeIsolated` first
    /// asks the runtime for the current executor and compares executor identities, which on the loop's thread
    /// outside a job ends in the same test after a dynamic cast and several runtime calls. As the standard
    /// library's does, it relies on a function of an isolated parameter having the representation of one of a
    /// plain parameter. `withoutActuallyEscaping` allocates a context for a closure that captures, on each call:
    /// a path hot enough to mind casts a function that captures nothing instead.
    @inlinable
    public func enter<Isolation: Actor, Result>(
        _ actor: Isolation, _ body: (isolated Isolation) throws -> Result
    ) rethrows -> Result {
        checkIsolated()
        typealias Isolated = (isolated Isolation) throws -> Result
        typealias Plain = (Isolation) throws -> Result
        return try withoutActuallyEscaping(body) { (body: @escaping Isolated) throws -> Result in
            try unsafeBitCast(body, to: Plain.self)(actor)
        }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    private func submit(_ work: Work) {
        let wake = queue.withLock { queue in
            queue.append(work)
            return queue.count == 1
        }
        guard wake else { return }
        // One write per batch: the loop takes the whole queue when it wakes. None from the loop's own thread while
        // it drains the queue (it takes this work in its next round) or runs a handler (the work runs when the
        // handler returns); `draining` and the loop's flags are touched only there.
        if isCurrent, let loop, draining || loop.isDispatching {
            if !draining { loop.workQueuedByHandler = true }
            return
        }
        _ = eventfd_write(descriptor, 1)
    }

    /// Runs the work queued now, then what it queued, for up to ``roundsPerWakeUp`` rounds; work left then waits
    /// for the next turn of the loop, after its other sources.
    private func runRounds() {
        draining = true
        defer { draining = false }
        for _ in 0..<Self.roundsPerWakeUp {
            // The queue and the batch swap their arrays: neither is copied or made anew in a round.
            queue.withLock { swap(&$0, &batch) }
            defer { batch.removeAll(keepingCapacity: true) }
            guard !batch.isEmpty else { return }
            for work in batch {
                switch work {
                case .job(let job):
                    job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
                case .closure(let body):
                    body()
                }
            }
        }
        if queue.withLock({ !$0.isEmpty }) { _ = eventfd_write(descriptor, 1) }
    }
}

/// The loop's thread as an actor: a task that runs isolated to it runs on the loop, and enters every actor whose
/// executor is the loop's (the service, its dispatcher) without a hop, as they share one serial executor.
public actor LoopIsolation {
    public nonisolated let executor: LoopExecutor

    public init(_ executor: LoopExecutor) { self.executor = executor }

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
}

/// A timer of a ``LoopExecutor``'s loop (``LoopExecutor/schedule(after:_:)``). Firing or cancelling it lets its
/// source and its body go at once, not when the delay would have run out.
public final class LoopTimer: Sendable {
    private let executor: LoopExecutor
    /// The source and the body, touched only on the loop's thread.
    private nonisolated(unsafe) var source: EventSource?
    private nonisolated(unsafe) var body: (@Sendable () -> Void)?

    fileprivate init(executor: LoopExecutor, body: @escaping @Sendable () -> Void) {
        self.executor = executor
        self.body = body
    }

    /// On the loop's thread: arms the source, unless the timer was cancelled first.
    fileprivate func arm(after delay: Duration) {
        guard body != nil, let loop = executor.loop else { return }
        // The source holds the timer until it fires or is cancelled; either drops the source.
        source = try? loop.after(delay) { [self] in fire() }
        if source == nil { fire() }
    }

    private func fire() {
        let body = body
        cancelOnLoop()
        body?()
    }

    /// Disarms the timer: its body does not run, unless it has started already. Callable from any thread.
    public func cancel() {
        if executor.isCurrent {
            cancelOnLoop()
        } else {
            executor.execute { [self] in cancelOnLoop() }
        }
    }

    private func cancelOnLoop() {
        source?.cancel()
        source = nil
        body = nil
    }
}

/// A value confined to a ``LoopExecutor``'s thread, passed through code that may run elsewhere (a task, a
/// `Sendable` closure): ``value`` gives it back only on that thread.
public struct LoopBound<Value>: @unchecked Sendable {
    private let wrapped: Value
    /// The executor whose thread the value belongs to.
    public let executor: LoopExecutor

    /// Binds `value` to `executor`'s thread; call it on that thread.
    public init(_ value: Value, executor: LoopExecutor) {
        executor.checkIsolated()
        self.wrapped = value
        self.executor = executor
    }

    /// Binds `value`, made on another thread and held by nothing else (the compiler checks that the caller keeps
    /// no reference: `sending`), to `executor`'s thread: what the daemon's start-up thread makes for the loop.
    public init(handingOver value: sending Value, to executor: LoopExecutor) {
        self.wrapped = value
        self.executor = executor
    }

    /// The value; traps off the loop's thread.
    public var value: Value {
        executor.checkIsolated()
        return wrapped
    }
}
