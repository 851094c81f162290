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

    /// Connects to the socket at `path` and checks, before anything is sent, that the process listening there
    /// is one of `trusted`.
    ///
    /// - Throws: ``AuthClientError`` with ``AuthClientError/Code/daemonUnavailable`` when nothing listens
    ///   there, ``AuthClientError/Code/permissionDenied`` when the socket may not be opened, or
    ///   ``AuthClientError/Code/untrustedServer`` when another user's process listens there.
    static func connect(
        to path: String,
        trusting trusted: TrustedServer,
        on group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(AuthClientError) -> VarlinkConnection {
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(VarlinkClientHandler())
                    }
                }
                .connect(unixDomainSocketPath: path)
                .get()
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
        // Nothing has been written yet: VarlinkClientHandler writes only the calls it is given.
        let server: PeerCredentials
        do {
            guard let provider = channel as? any SocketOptionProvider else { throw ChannelError.operationUnsupported }
            server = try await provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED)
            ).get()
        } catch {
            channel.close(promise: nil)
            throw AuthClientError(
                .untrustedServer,
                "Cannot read who serves \(path) (\(Self.reason(error))); nothing was sent to it")
        }
        guard trusted.uids.contains(server.uid) else {
            channel.close(promise: nil)
            throw AuthClientError(
                .untrustedServer,
                "The process serving \(path) runs as uid \(server.uid), not as \(trusted.expected): it is not "
                    + "exponea-authd and may be trying to intercept tokens, so nothing was sent to it. Ask the "
                    + "administrator to remove \(path), or point EXPONEA_AUTHD_SOCKET at the daemon's socket"
            )
        }
        return VarlinkConnection(channel: channel)
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
