// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// GetToken's encoded replies, each kept with the generation it was encoded at: GetToken, the daemon's hottest
/// call, encodes a group's reply once per change, and a change is seen at once (its generation differs). At most
/// `capacity` groups keep theirs (an arbitrary one makes room), so memory stays bounded however many groups are
/// read. A plain value of the service's actor.
struct GetTokenReplies {
    private var replies: [AppGroup: (generation: UInt64, bytes: [UInt8])] = [:]
    private let capacity: Int

    init(capacity: Int = 1024) { self.capacity = capacity }

    /// The reply for `group` at `generation`: the one kept, or what `encode` makes, then kept.
    mutating func reply(for group: AppGroup, generation: UInt64, encode: () throws -> [UInt8]) rethrows -> [UInt8] {
        if let kept = replies[group], kept.generation == generation { return kept.bytes }
        let bytes = try encode()
        if replies[group] == nil, replies.count >= capacity, let any = replies.keys.first { replies[any] = nil }
        replies[group] = (generation, bytes)
        return bytes
    }

    /// How many groups keep a reply.
    var count: Int { replies.count }
}
