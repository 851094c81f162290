// SPDX-License-Identifier: Apache-2.0
import Synchronization
import Systemd

/// Where a call's replies go: a connection's outbound side, usable from any task without waiting.
///
/// ``send(_:)`` hands one framed message over and returns at once. On the connection's loop it is written at
/// once; from another thread it is handed to the loop, which writes the messages it is handed in order. It does
/// not wait for the peer to read either: unsent bytes count against the connection's bound, and a peer that
/// stops reading is closed. A `more` call can so stream replies from outside its own task (events fanned out to
/// many connections), while ``backlog`` tells how far behind the connection is.
///
/// Ownership points one way: the replies hold their connection (while a task, or a subscription, keeps them), and
/// the connection holds nothing of them; what they share is the connection's ``ConnectionOpenState``.
public final class VarlinkReplies: Sendable {
    private enum Destination {
        case connection(LoopBound<ServerConnection>, ConnectionOpenState)
        case function(VarlinkSend)
    }

    private let destination: Destination
    /// Messages handed to the loop from another thread and not yet written.
    private let handedOver = Atomic<Int>(0)

    /// Replies that go to `send`, for a transport of another kind or a test; their ``backlog`` is always 0.
    public init(send: @escaping VarlinkSend) { destination = .function(send) }

    /// A connection's replies, open while `state` says the connection is.
    init(connection: LoopBound<ServerConnection>, state: ConnectionOpenState) {
        destination = .connection(connection, state)
    }

    /// Replies that go nowhere: a `oneway` call's.
    public static let discarded = VarlinkReplies { _ in }

    /// Hands one framed message (JSON and its NUL) over to be written after every message handed over before.
    ///
    /// - Throws: ``VarlinkSendError`` once the connection is gone.
    public func send(_ message: [UInt8]) throws(VarlinkSendError) {
        switch destination {
        case .connection(let connection, let state):
            guard state.isOpen else { throw VarlinkSendError(cause: ConnectionClosed()) }
            if connection.executor.isCurrent {
                connection.value.append(message)
            } else {
                handedOver.add(1, ordering: .relaxed)
                connection.executor.execute { [self] in
                    handedOver.subtract(1, ordering: .relaxed)
                    connection.value.append(message)
                }
            }
        case .function(let send):
            do {
                try send(message)
            } catch {
                throw VarlinkSendError(cause: error)
            }
        }
    }

    /// The messages handed over and not yet written to the connection: more than a few means its loop is
    /// falling behind.
    public var backlog: Int { handedOver.load(ordering: .relaxed) }
}

/// Whether a connection is open, shared by the connection and the replies of its calls: the connection sets it
/// as it closes, so that later sends throw, without holding the replies (which hold the connection).
final class ConnectionOpenState: Sendable {
    private let open = Atomic<Bool>(true)

    var isOpen: Bool { open.load(ordering: .acquiring) }

    func close() { open.store(false, ordering: .releasing) }
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
