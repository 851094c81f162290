// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Synchronization

/// The one lock-protected read path of the service: each group's token and generation as the actor last
/// committed them, with GetToken's encoded reply, so that GetToken is answered on the loop, in the turn that read it
/// without waiting for the actor (the daemon's hottest call).
///
/// Only the actor writes, in the same turn as it commits a change to ``GroupTable``, so a reader never sees a
/// token the actor has not committed, and a reply always matches its generation. Replies are encoded on the
/// first read after a change; at most `replyCapacity` groups keep theirs (an arbitrary one makes room), so memory
/// stays bounded however many groups are read.
final class TokenSnapshot: Sendable {
    struct Entry: Sendable {
        var token: StreamJWT?
        var generation: UInt64
        /// GetToken's reply for this generation, once a reader encoded it.
        var reply: [UInt8]?
    }

    private struct State {
        var entries: [AppGroup: Entry] = [:]
        /// The groups whose entry holds a reply.
        var withReply: Set<AppGroup> = []
    }

    private let state = Mutex(State())
    private let replyCapacity: Int

    init(_ tokens: [AppGroup: (token: StreamJWT?, generation: UInt64)] = [:], replyCapacity: Int = 1024) {
        self.replyCapacity = replyCapacity
        let entries = tokens.mapValues { Entry(token: $0.token, generation: $0.generation) }
        state.withLock { $0.entries = entries }
    }

    /// The group's token and generation (0 for a group never set).
    subscript(group: AppGroup) -> (token: StreamJWT?, generation: UInt64) {
        state.withLock { state in
            let entry = state.entries[group]
            return (entry?.token, entry?.generation ?? 0)
        }
    }

    /// The actor committed a change of `group`: its reply is encoded again on the next read.
    func set(_ group: AppGroup, token: StreamJWT?, generation: UInt64) {
        state.withLock { state in
            state.entries[group] = Entry(token: token, generation: generation)
            state.withReply.remove(group)
        }
    }

    /// GetToken's reply for `group`, encoded by `encode` (outside the lock) when the snapshot has none for the
    /// current generation.
    func reply(for group: AppGroup, encode: (StreamJWT?, UInt64) throws -> [UInt8]) rethrows -> [UInt8] {
        // The reply alone first: the entry's token is copied out only when the reply must be made.
        if let reply = state.withLock({ $0.entries[group]?.reply }) { return reply }
        let entry = state.withLock { $0.entries[group] }
        let generation = entry?.generation ?? 0
        if let reply = entry?.reply { return reply }
        let reply = try encode(entry?.token, generation)
        guard entry != nil else { return reply }  // a group never set: nothing to keep
        state.withLock { state in
            // Keep it only if no change came meanwhile.
            guard state.entries[group]?.generation == generation, state.entries[group]?.reply == nil else { return }
            if state.withReply.count >= replyCapacity, let any = state.withReply.first {
                state.withReply.remove(any)
                state.entries[any]?.reply = nil
            }
            state.entries[group]?.reply = reply
            state.withReply.insert(group)
        }
        return reply
    }
}
