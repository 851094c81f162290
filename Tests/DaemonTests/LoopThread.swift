// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization
import Systemd

/// A ``MainLoop`` run by a thread of its own, for tests of what lives on one (the bus announcer, the expiry
/// timer's source): ``sync(_:)`` runs a closure on the loop's thread and waits for its result.
final class LoopThread: Sendable {
    /// What a closure run on the loop's thread gets: the loop, and a place to keep what must live as long.
    final class Context {
        let loop: MainLoop
        private(set) var kept: [AnyObject] = []
        fileprivate var atStop: [() -> Void] = []

        fileprivate init(loop: MainLoop) { self.loop = loop }

        /// Keeps `object` alive until the loop ends.
        func keep(_ object: AnyObject) { kept.append(object) }
        /// Runs `body` on the loop's thread when the loop is stopped.
        func onStop(_ body: @escaping () -> Void) { atStop.append(body) }
    }

    private typealias Command = @Sendable (Context) -> Void
    private let inbox: LoopInbox<Command?>
    private let ended = DispatchSemaphore(value: 0)

    init() throws {
        let inbox = try LoopInbox<Command?>()
        self.inbox = inbox
        let started = DispatchSemaphore(value: 0)
        let failure = Mutex<(any Error)?>(nil)
        let ended = self.ended
        Thread.detachNewThread {
            defer { ended.signal() }
            do {
                let loop = try MainLoop()
                let context = Context(loop: loop)
                try inbox.receive(on: loop) { command in
                    guard let command else {
                        for body in context.atStop { body() }
                        return loop.exit()
                    }
                    command(context)
                }
                started.signal()
                _ = try loop.run()
            } catch {
                failure.withLock { $0 = error }
                started.signal()
            }
        }
        started.wait()
        if let error = failure.withLock({ $0 }) { throw error }
    }

    /// Runs `body` on the loop's thread and returns what it returned.
    func sync<T: Sendable>(_ body: @escaping @Sendable (Context) throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<T, any Error>?>(nil)
        inbox.send { context in
            let outcome = Result { try body(context) }
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0 }!.get()
    }

    /// Runs the `onStop` bodies, ends the loop and waits for its thread.
    func stop() {
        inbox.send(nil)
        ended.wait()
    }
}
