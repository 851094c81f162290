// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTestKit
import AuthTransport

extension VarlinkCallHandler {
    /// Dispatches `call` on `loop`, as the transport does when the call's turn comes, then runs what it left for
    /// later in a task on the loop, as the connection's task does; its replies go to `send`, each a framed message.
    func handle(
        _ call: VarlinkCall, from caller: Caller, connection: VarlinkConnectionID = .next(), on loop: TestLoop,
        send: @escaping VarlinkSend
    ) async throws {
        let dispatched = try await loop.run { _ in dispatch(call, from: caller, connection: connection) }
        switch dispatched {
        case .answered(let reply):
            if let reply { try? send(reply) }
        case .later(let work):
            // On the loop, as the connection's task runs it there; a child task, so that cancelling the caller
            // (what the transport does when the connection closes) reaches it.
            await withTaskGroup(of: Void.self) { group in
                group.addTask(executorPreference: loop.executor) { await work(VarlinkReplies(send: send)) }
            }
        }
    }

    /// What `call` is answered with in the turn that reads it, dispatched on `loop`; nil when it runs later.
    func answered(_ call: VarlinkCall, from caller: Caller, on loop: TestLoop) async throws -> [UInt8]? {
        try await loop.run { _ in
            guard case .answered(let reply) = dispatch(call, from: caller, connection: .next()) else { return nil }
            return reply
        }
    }
}
