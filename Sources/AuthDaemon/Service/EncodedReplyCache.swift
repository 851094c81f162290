// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Synchronization

/// GetToken replies already encoded, by group and generation: a group's reply changes only with its
/// generation, and encoding it is most of what answering GetToken costs. Holds at most `capacity` groups
/// (an arbitrary one makes room), so memory stays bounded however many groups are read.
final class EncodedReplyCache: Sendable {
    private struct Entry {
        var generation: UInt64
        var reply: [UInt8]
    }

    private let entries = Mutex<[AppGroup: Entry]>([:])
    private let capacity: Int

    init(capacity: Int = 1024) { self.capacity = capacity }

    /// The reply for `group` at `generation`, encoding it with `encode` when it is not cached.
    func reply(
        for group: AppGroup, generation: UInt64, encode: () throws -> [UInt8]
    ) rethrows -> [UInt8] {
        if let entry = entries.withLock({ $0[group] }), entry.generation == generation { return entry.reply }
        let reply = try encode()
        entries.withLock { entries in
            if entries.count >= capacity, entries[group] == nil, let any = entries.keys.first {
                entries[any] = nil
            }
            entries[group] = Entry(generation: generation, reply: reply)
        }
        return reply
    }
}
