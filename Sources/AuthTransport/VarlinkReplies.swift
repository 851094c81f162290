// SPDX-License-Identifier: Apache-2.0
internal import NIOCore

/// Where a call's replies go: a connection's outbound side, usable from any thread or task without waiting.
///
/// ``send(_:)`` hands one framed message over and returns at once; the connection writes the messages it is
/// handed in order. It does not wait for the peer to read either: unsent bytes count against the connection's
/// high-water mark, and a peer that stops reading is closed. A `more` call can so stream replies from outside
/// its own task (events fanned out to many connections), while ``backlog`` tells how far behind the connection is.
public final class VarlinkReplies: Sendable {
    private enum Destination {
        case connection(any Channel, ConnectionActivity, PendingWrites)
        case function(VarlinkSend)
    }

    private let destination: Destination

    /// Replies that go to `send`, for a transport of another kind or a test; their ``backlog`` is always 0.
    public init(send: @escaping VarlinkSend) { destination = .function(send) }

    /// A connection's replies, written by `writes`, the queue of the channel's event loop.
    init(channel: any Channel, activity: ConnectionActivity, writes: PendingWrites) {
        destination = .connection(channel, activity, writes)
    }

    /// Replies that go nowhere: a `oneway` call's.
    public static let discarded = VarlinkReplies { _ in }

    /// Hands one framed message (JSON and its NUL) over to be written after every message handed over before.
    ///
    /// - Throws: ``VarlinkSendError`` once the connection is gone.
    public func send(_ message: [UInt8]) throws(VarlinkSendError) {
        switch destination {
        case .connection(let channel, let activity, let writes):
            guard channel.isActive else { throw VarlinkSendError(cause: ChannelError.ioOnClosedChannel) }
            writes.append(message, for: channel, activity: activity)
        case .function(let send):
            do {
                try send(message)
            } catch {
                throw VarlinkSendError(cause: error)
            }
        }
    }

    /// The messages handed over and not yet written to the connection: more than a few means its event loop
    /// is falling behind.
    public var backlog: Int {
        switch destination {
        case .connection(_, let activity, _): activity.queuedWriteCount
        case .function: 0
        }
    }
}

/// Sends one framed Varlink message (JSON and its NUL) without waiting; throws once the connection is gone.
public typealias VarlinkSend = @Sendable ([UInt8]) throws -> Void

/// A reply could not be sent: the connection is gone.
public struct VarlinkSendError: Error, Sendable, CustomStringConvertible {
    /// What closed the connection, or what the send function threw.
    public var cause: any Error

    public var description: String { "the connection is gone: \(cause)" }
}
