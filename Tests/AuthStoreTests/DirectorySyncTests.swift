// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import SystemPackage
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#endif

/// Group commit of the store directory: writers share an fsync that started after their change, never one that
/// started before it, and a failed fsync fails every writer it was to cover.
@Suite("The store directory's shared fsync", .offPool)
struct DirectorySyncTests {
    /// An fsync the test holds until it lets it go, and counts.
    final class HeldFlush: Sendable {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let count = Atomic<Int>(0)
        let failing = Atomic<Bool>(false)

        func flush(_ descriptor: CInt) throws(SystemCallError) {
            count.add(1, ordering: .relaxed)
            started.signal()
            release.wait()
            if failing.load(ordering: .relaxed) { throw SystemCallError(call: "fsync", errno: .ioError) }
        }
    }

    /// Runs `body` on a thread of its own; the group is left when it returns.
    static func spawn(_ group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        Thread.detachNewThread {
            body()
            group.leave()
        }
    }

    /// Waits until `sync` has counted `changes` (the writers wait for an fsync then). Polled, yielding the CPU: a
    /// writer that counts its change and then waits shows nothing a test can wait on.
    static func waitUntilCounted(_ sync: DirectorySync, _ changes: UInt64) {
        while sync.changes < changes { sched_yield() }
    }

    @Test func changesMadeDuringAnFsyncShareTheNextOne() throws {
        let held = HeldFlush()
        let sync = DirectorySync(-1, flush: held.flush)
        let writers = DispatchGroup()
        let succeeded = Atomic<Int>(0)
        let write: @Sendable () -> Void = {
            if (try? sync.changed()) != nil { succeeded.add(1, ordering: .relaxed) }
        }
        Self.spawn(writers, write)
        held.started.wait()  // the first writer's fsync runs, and covers its change only
        for _ in 0..<3 { Self.spawn(writers, write) }
        Self.waitUntilCounted(sync, 4)
        held.release.signal()
        held.started.wait()  // one fsync for the three changes made meanwhile
        held.release.signal()
        writers.wait()
        #expect(held.count.load(ordering: .relaxed) == 2)
        #expect(succeeded.load(ordering: .relaxed) == 4)
    }

    @Test func aFailedFsyncFailsEveryWriterItWasToCover() throws {
        let held = HeldFlush()
        let sync = DirectorySync(-1, flush: held.flush)
        let writers = DispatchGroup()
        let failed = Atomic<Int>(0)
        let write: @Sendable () -> Void = {
            if (try? sync.changed()) == nil { failed.add(1, ordering: .relaxed) }
        }
        Self.spawn(writers, write)
        held.started.wait()
        for _ in 0..<3 { Self.spawn(writers, write) }
        Self.waitUntilCounted(sync, 4)
        held.release.signal()  // the first succeeds
        held.started.wait()
        held.failing.store(true, ordering: .relaxed)
        held.release.signal()  // the second fails: the three writers it covered fail, none tries again
        writers.wait()
        #expect(failed.load(ordering: .relaxed) == 3)
        #expect(held.count.load(ordering: .relaxed) == 2)

        // A change after the failure gets an fsync of its own.
        held.failing.store(false, ordering: .relaxed)
        Self.spawn(writers, write)
        held.started.wait()
        held.release.signal()
        writers.wait()
        #expect(failed.load(ordering: .relaxed) == 3)
        #expect(held.count.load(ordering: .relaxed) == 3)
    }
}
