// SPDX-License-Identifier: Apache-2.0
import Synchronization
import Systemd
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The loop's executor: work that work queues runs in the same turn of the loop, within a bound that keeps the
/// loop's other sources served.
@Suite("The loop's executor", .offPool)
struct LoopExecutorTests {
    /// A call's hops (a task to an actor and back) are jobs that each queue the next: they run in one turn, not
    /// one turn each with a write, a wait and a read of the executor's descriptor between them.
    @Test func workQueuedByWorkRunsInTheSameTurn() throws {
        let (loop, executor, bound) = try Self.loopWithExecutor()
        let turns = Mutex<[UInt64]>([])
        let hops = LoopExecutor.roundsPerWakeUp - 1
        @Sendable func hop(_ left: Int) {
            turns.withLock { $0.append(bound.value.iteration) }
            if left == 0 { return bound.value.exit(0) }
            executor.execute { hop(left - 1) }
        }
        executor.execute { hop(hops) }
        #expect(try loop.run() == 0)
        let seen = turns.withLock { $0 }
        #expect(seen.count == hops + 1)
        #expect(Set(seen).count == 1, "turns: \(seen)")
    }

    /// A call read from a socket starts a task: the work a handler of the loop queues runs when the handler
    /// returns, in the same turn, not a turn later through a write and a read of the executor's descriptor.
    @Test func workAHandlerQueuesRunsWhenTheHandlerReturns() throws {
        let (loop, executor, bound) = try Self.loopWithExecutor()
        let ends = try Pipe()
        defer { ends.close() }
        let turns = Mutex<(handler: UInt64, work: UInt64)>((0, 0))
        let source = try loop.onReadable(ends.read) {
            turns.withLock { $0.handler = loop.iteration }
            executor.execute {
                turns.withLock { $0.work = bound.value.iteration }
                bound.value.exit(0)
            }
        }
        defer { source.cancel() }
        var byte: UInt8 = 1
        #expect(write(ends.write, &byte, 1) == 1)
        #expect(try loop.run() == 0)
        let seen = turns.withLock { $0 }
        #expect(seen.handler > 0 && seen.work == seen.handler, "turns: \(seen)")
    }

    /// Work that keeps queuing more is cut off after a bounded number of rounds, and the loop serves a descriptor
    /// that became readable meanwhile.
    @Test func workThatKeepsQueuingCannotStarveTheLoop() throws {
        let (loop, executor, bound) = try Self.loopWithExecutor()
        let ends = try Pipe()
        defer { ends.close() }
        let runs = Atomic<Int>(0)
        @Sendable func again() {
            // A drain that never ends would reach this: the test fails rather than hangs.
            if runs.add(1, ordering: .relaxed).newValue == 100_000 { return bound.value.exit(1) }
            executor.execute { again() }
        }
        executor.execute { again() }
        var byte: UInt8 = 1
        #expect(write(ends.write, &byte, 1) == 1)
        let source = try loop.onReadable(ends.read) { loop.exit(0) }
        defer { source.cancel() }
        #expect(try loop.run() == 0)
        #expect(runs.load(ordering: .relaxed) <= 2 * LoopExecutor.roundsPerWakeUp)
    }

    /// A loop whose executor is attached, and the loop bound to it.
    static func loopWithExecutor() throws -> (MainLoop, LoopExecutor, LoopBound<MainLoop>) {
        let loop = try MainLoop()
        let executor = try LoopExecutor()
        try executor.attach(to: loop)
        return (loop, executor, LoopBound(loop, executor: executor))
    }

    /// A pipe's two ends.
    struct Pipe {
        let read: Int32
        let write: Int32

        init() throws {
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            (read, write) = (ends[0], ends[1])
        }

        func close() {
            Glibc.close(read)
            Glibc.close(write)
        }
    }
}
