// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Foundation

/// A connected AF_UNIX stream socket, for poking servers in tests.
public struct UnixClient: Sendable {
    /// The connected socket.
    public let descriptor: Int32

    /// Connects to the socket at `path`; a read that waits longer than `receiveTimeout` fails with `ETIMEDOUT`,
    /// so a test that expects a reply that never comes fails instead of hanging.
    public init(path: String, receiveTimeout: Duration = .seconds(20)) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let result = UnixSocketAddress.withAddress(path) { connect(descriptor, $0, $1) }
        guard descriptor >= 0, result == 0 else {
            let code = POSIXErrorCode(rawValue: errno) ?? .EIO
            if descriptor >= 0 { Glibc.close(descriptor) }
            throw POSIXError(code)
        }
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// A client on an end of a connected pair (`socketpair(2)`), with the same receive timeout.
    public init(connected descriptor: Int32, receiveTimeout: Duration = .seconds(20)) {
        self.descriptor = descriptor
        var timeout = timeval(tv_sec: Int(receiveTimeout.components.seconds), tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Closes the socket.
    public func close() { _ = Glibc.close(descriptor) }
}

extension UnixClient {
    /// Sends `message` (with its NUL unless told otherwise); a connection the server closed throws EPIPE
    /// (`MSG_NOSIGNAL`: a SIGPIPE would kill the test process).
    public func send(_ message: String, terminated: Bool = true) throws {
        try send(bytes: Array(message.utf8) + (terminated ? [0] : []))
    }

    /// Sends `bytes` whole, as ``send(_:terminated:)`` does.
    public func send(bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
            offset += written
        }
    }

    /// Sends one call and returns the reply, without its NUL.
    public func exchange(_ message: String) throws -> String {
        try send(message)
        return try receiveReply()
    }

    /// Whether the server closes the connection within `timeout`.
    public func receiveUntilClosed(timeout: Duration) throws -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            guard poll(&poller, 1, 100) >= 0 else { return false }
            if poller.revents != 0 {
                let count = read(descriptor, &buffer, buffer.count)
                if count <= 0 { return true }
            }
        }
        return false
    }

    /// The next reply, without its NUL.
    public func receiveReply() throws -> String {
        var reply: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = read(descriptor, &byte, 1)
            if count == 1 {
                if byte == 0 { return String(decoding: reply, as: UTF8.self) }
                reply.append(byte)
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                throw POSIXError(count < 0 && errno == EAGAIN ? .ETIMEDOUT : .ECONNRESET)
            }
        }
    }
}
