// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Foundation
import NIOCore
import NIOPosix

/// One connection to the daemon's Varlink socket. Calls may overlap: they are sent in order and their
/// replies matched in order.
final class VarlinkConnection: Sendable {
    private let channel: any Channel

    private init(channel: any Channel) { self.channel = channel }

    /// Connects to the socket at `path`.
    ///
    /// - Throws: ``AuthClientError`` with ``AuthClientError/Code/daemonUnavailable`` when nothing listens
    ///   there, or ``AuthClientError/Code/permissionDenied`` when the socket may not be opened.
    static func connect(
        to path: String,
        on group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(AuthClientError) -> VarlinkConnection {
        do {
            let channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(VarlinkClientHandler())
                    }
                }
                .connect(unixDomainSocketPath: path)
                .get()
            return VarlinkConnection(channel: channel)
        } catch let error as IOError where error.errnoCode == EACCES || error.errnoCode == EPERM {
            throw AuthClientError(
                .permissionDenied, "Not allowed to connect to \(path): this user may not use this daemon")
        } catch {
            throw AuthClientError(
                .daemonUnavailable,
                "exponea-authd is not reachable at \(path) (\(Self.reason(error))); start it with "
                    + "'exponea-authd --user' or 'systemctl start exponea-authd.socket', "
                    + "or point EXPONEA_AUTHD_SOCKET at its socket"
            )
        }
    }

    /// Whether the connection is still open.
    var isActive: Bool { channel.isActive }

    /// Sends one call and returns its reply's JSON.
    func call(_ message: [UInt8]) async throws(AuthClientError) -> [UInt8] {
        let promise = channel.eventLoop.makePromise(of: [UInt8].self)
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { _ in promise.fail(Self.closed) }
        channel.writeAndFlush(PendingCall(message: message, replies: .single(promise)), promise: written)
        do {
            return try await promise.futureResult.get()
        } catch let error as AuthClientError {
            throw error
        } catch {
            throw AuthClientError(.connectionLost, "The call to exponea-authd failed: \(error)")
        }
    }

    /// Sends one call with `more` and returns its replies as they come. The stream ends after the last
    /// reply, and throws when the connection closes first.
    func stream(_ message: [UInt8]) -> AsyncThrowingStream<[UInt8], any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: [UInt8].self)
        let channel = channel
        continuation.onTermination = { termination in
            if case .cancelled = termination { channel.close(promise: nil) }
        }
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { _ in continuation.finish(throwing: Self.closed) }
        channel.writeAndFlush(PendingCall(message: message, replies: .stream(continuation)), promise: written)
        return stream
    }

    /// Closes the connection; calls still waiting fail with ``AuthClientError/Code/connectionLost``.
    func close() { channel.close(promise: nil) }

    private static let closed = AuthClientError(.connectionLost, "The connection to exponea-authd is closed")

    private static func reason(_ error: any Error) -> String {
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)) }
        return "\(error)"
    }
}
