// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Foundation
import NIOCore

/// A call on its way to the daemon, with where its replies go.
struct PendingCall: Sendable {
    /// Where the replies of one call go.
    enum Replies: Sendable {
        /// One reply.
        case single(EventLoopPromise<[UInt8]>)
        /// Replies until one without `continues` (a call made with `more`).
        case stream(AsyncThrowingStream<[UInt8], any Error>.Continuation)
    }

    /// The call's JSON, without the NUL.
    var message: [UInt8]
    var replies: Replies
}

/// Pairs a connection's replies with its calls: Varlink answers the calls of one connection in order, so
/// the oldest call waiting is the one a reply belongs to.
final class VarlinkClientHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = PendingCall
    typealias OutboundOut = ByteBuffer

    /// Replies can be long (ListGroups of many groups); the bound keeps a broken peer from filling memory.
    static let maximumReplySize = 16 * 1024 * 1024

    private var decoder = VarlinkFrameDecoder(maximumMessageSize: maximumReplySize)
    private var waiting = CircularBuffer<PendingCall.Replies>()

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let call = unwrapOutboundIn(data)
        waiting.append(call.replies)
        var buffer = context.channel.allocator.buffer(capacity: call.message.count + 1)
        buffer.writeBytes(call.message)
        buffer.writeInteger(UInt8(0))
        context.write(wrapOutboundOut(buffer), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        decoder.append(buffer.readableBytesView)
        do {
            while let message = try decoder.nextMessage() { deliver(message) }
        } catch {
            failAll(AuthClientError(.protocolError, "The daemon sent a reply over \(Self.maximumReplySize) bytes"))
            context.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failAll(AuthClientError(.connectionLost, "The connection to exponea-authd closed before the reply came"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failAll(AuthClientError(.connectionLost, "The connection to exponea-authd failed: \(error)"))
        context.close(promise: nil)
    }

    private func deliver(_ message: [UInt8]) {
        guard let head = waiting.first else { return }  // a reply nobody asked for: ignore it
        switch head {
        case .single(let promise):
            waiting.removeFirst()
            promise.succeed(message)
        case .stream(let continuation):
            continuation.yield(message)
            if !ReplyHeader.continues(message) {
                waiting.removeFirst()
                continuation.finish()
            }
        }
    }

    private func failAll(_ error: AuthClientError) {
        while let replies = waiting.popFirst() {
            switch replies {
            case .single(let promise): promise.fail(error)
            case .stream(let continuation): continuation.finish(throwing: error)
            }
        }
    }
}

/// The members of a reply that say what it is, read before its parameters.
struct ReplyHeader: Decodable {
    var error: String?
    var continues: Bool?

    /// Whether `message` says more replies follow (an error reply ends a stream).
    static func continues(_ message: [UInt8]) -> Bool {
        guard let header = try? JSONDecoder().decode(ReplyHeader.self, from: Data(message)) else { return false }
        return header.error == nil && header.continues == true
    }
}
