// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// GetToken's encoded replies, by group: GetToken, the daemon's hottest call, encodes a group's reply once per
/// change, and a hit costs one lookup. The service's actor forgets a group's reply in the turn that changes the
/// group (``changed(_:)``). At most `capacity` groups keep theirs (an arbitrary one makes room), so memory stays
/// bounded however many groups are read. A plain value of the actor.
struct GetTokenReplies {
    private var replies: [AppGroup: [UInt8]] = [:]
    private let capacity: Int

    init(capacity: Int = 1024) { self.capacity = capacity }

    /// The reply kept for `group`, if any.
    subscript(group: AppGroup) -> [UInt8]? { replies[group] }

    /// Keeps `reply` for `group` until the group changes.
    mutating func keep(_ reply: [UInt8], for group: AppGroup) {
        if replies[group] == nil, replies.count >= capacity, let any = replies.keys.first { replies[any] = nil }
        replies[group] = reply
    }

    /// `group`'s token or generation changed: its reply is made again on the next read.
    mutating func changed(_ group: AppGroup) { replies[group] = nil }

    /// How many groups keep a reply.
    var count: Int { replies.count }
}
