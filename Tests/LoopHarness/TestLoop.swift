// SPDX-License-Identifier: Apache-2.0
import Synchronization
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// An sd-event loop with its executor on a thread of its own, for one test: what the daemon's main thread is.
/// The test reaches it only through ``run(_:)``, which runs a closure on the loop's thread and hands back its
/// result.
public final class TestLoop: Sendable {
    public let executor: LoopExecutor
    private let thread: Mutex<pthread_t?> = Mutex(nil)
    /// The loop, touched only on its thread.
    private nonisolated(unsafe) var loop: MainLoop?

    public init() throws {
        executor = try LoopExecutor()
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(
            &thread, nil,
            { context in
                let testLoop = Unmanaged<TestLoop>.fromOpaque(context!).takeRetainedValue()
                testLoop.runLoop()
                return nil
            }, context)
        precondition(started == 0, "cannot start the loop's thread")
        self.thread.withLock { $0 = thread }
    }

    private func runLoop() {
        do {
            let loop = try MainLoop()
            self.loop = loop
            try executor.attach(to: loop)
            _ = try loop.run()
        } catch {
            fatalError("the test loop failed: \(error)")
        }
        loop = nil
    }

    /// Runs `body` on the loop's thread, with the loop.
    public func run<T: Sendable>(_ body: @escaping @Sendable (MainLoop) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            executor.execute { [self] in continuation.resume(with: Result { try body(loop!) }) }
        }
    }

    /// Ends the loop after what was queued before, and waits for its thread.
    public func stop() {
        executor.execute { [self] in loop?.exit() }
        if let thread = thread.withLock({ $0 }) { pthread_join(thread, nil) }
    }
}
