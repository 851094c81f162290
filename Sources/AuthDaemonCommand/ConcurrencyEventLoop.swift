// SPDX-License-Identifier: Apache-2.0
import CConcurrencyHook
import NIOCore
import NIOPosix

/// Swift concurrency's global executor in the daemon: one NIO event loop of its own, apart from the loops that
/// serve the socket. Every task, and so the `AuthService` actor, runs there.
///
/// On an event loop, libdispatch starts no worker pool (whose monitor wakes every second for the life of the
/// process). Not on the loops that serve the socket: a loop runs every job queued to it before it polls its
/// sockets again, so with the calls' tasks on those loops, one user flooding calls (each call's end lets its
/// connection take the next ones it had sent) made each poll wait for every call the flood had buffered, and
/// another user's GetToken (answered at once on the loop) waited as long: seconds in a debug build. On a loop of
/// their own, the tasks queue among themselves, and the socket loops poll between short runs of work
/// (`FloodTests`).
///
/// NIO's own `NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()` finds the
/// runtime's hook with `dlsym`, which fails in a binary with the runtime linked in (`--static-swift-stdlib` hides
/// the archives' symbols), and would put the jobs on the socket loops; the hook is set here by reference instead.
enum ConcurrencyEventLoop {
    /// The loop: one thread, started when the first task is enqueued.
    static let loop: any EventLoop = MultiThreadedEventLoopGroup(numberOfThreads: 1).next()

    /// Makes ``loop`` the global executor. Call it on the main thread before the first task.
    ///
    /// - Returns: Whether the loop took over (false when another hook was already set).
    @discardableResult
    static func install() -> Bool {
        typealias EnqueueGlobalHook = @convention(thin) (UnownedJob, @convention(thin) (UnownedJob) -> Void) -> Void
        let hook: EnqueueGlobalHook = { job, _ in
            ConcurrencyEventLoop.loop.executor.enqueue(ExecutorJob(job))
        }
        return withUnsafePointer(to: hook) { pointer in
            pointer.withMemoryRebound(to: UnsafeMutableRawPointer?.self, capacity: 1) {
                exauthd_install_enqueue_global_hook($0.pointee) == 1
            }
        }
    }
}
