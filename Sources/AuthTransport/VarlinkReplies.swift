// SPDX-License-Identifier: Apache-2.0
import Systemd

/// Where a call's replies go: a connection's outbound side.
///
/// ``send(_:)`` hands one framed message over and returns at once: it is written at once, on the connection's
/// loop, where the connection's calls and the service that streams events to it run (the connection is reached
/// through `LoopBound`, which traps elsewhere). It does not wait for the peer to read: unsent bytes count against
/// the connection's bound, and a peer that stops reading is closed.
///
/// Ownership points one way: the replies hold their connection (while a task, or a subscription, keeps them), and
/// the connection holds nothing of them.
public final class VarlinkReplies: Sendable {
    private enum Destination {
        case connection(LoopBound<ServerConnection>)
        case function(VarlinkSend)
    }

    private let destination: Destination

    /// Replies that go to `send`, for a transport of another kind or a test.
    public init(send: @escaping VarlinkSend) { destination = .function(send) }

    /// A connection's replies.
    init(connection: LoopBound<ServerConnection>) { destination = .connection(connection) }

    /// Replies that go nowhere: a `oneway` call's.
    public static let discarded = VarlinkReplies { _ in }

    /// Writes one framed message (JSON and its NUL) after every message sent before.
    ///
    /// - Throws: ``VarlinkSendError`` once the connection is gone.
    public func send(_ message: [UInt8]) throws(VarlinkSendError) {
        switch destination {
        case .connection(let bound):
            let connection = bound.value
            guard !connection.isClosed else { throw VarlinkSendError(cause: ConnectionClosed()) }
            connection.append(message)
        case .function(let send):
            do {
                try send(message)
            } catch {
                throw VarlinkSendError(cause: error)
            }
        }
    }
}

/// The connection a reply was for is closed.
struct ConnectionClosed: Error, CustomStringConvertible {
    var description: String { "the connection is closed" }
}

/// Sends one framed Varlink message (JSON and its NUL) without waiting; throws once the connection is gone.
public typealias VarlinkSend = @Sendable ([UInt8]) throws -> Void

/// A reply could not be sent: the connection is gone.
public struct VarlinkSendError: Error, Sendable, CustomStringConvertible {
    /// What closed the connection, or what the send function threw.
    public var cause: any Error

    public var description: String { "the connection is gone: \(cause)" }
}
