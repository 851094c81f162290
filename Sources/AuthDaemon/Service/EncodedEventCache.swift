// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Synchronization

/// The last event encoded as a Subscribe reply: one event goes to every subscriber of its group in turn, so
/// a group's thousand subscribers share one encoding instead of making a thousand.
final class EncodedEventCache: Sendable {
    private let last = Mutex<(event: AuthEvent, reply: [UInt8])?>(nil)

    /// The `continues: true` reply carrying `event`.
    func reply(for event: AuthEvent) throws -> [UInt8] {
        if let cached = last.withLock({ $0 }), cached.event == event { return cached.reply }
        let reply = try VarlinkReplyEncoder.reply(SubscribeResult(event: event), continues: true)
        last.withLock { $0 = (event, reply) }
        return reply
    }
}
