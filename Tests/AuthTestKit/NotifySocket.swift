// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Foundation

/// A datagram socket standing in for systemd's notification socket (`$NOTIFY_SOCKET`), to receive what a
/// service sends with `sd_notify`.
public final class NotifySocket: @unchecked Sendable {
    /// The socket's path, for `NOTIFY_SOCKET`.
    public let path: String
    private let descriptor: Int32
    private let directory: TemporaryDirectory

    public init() throws {
        directory = try TemporaryDirectory(prefix: "authd-notify")
        path = directory.appending("notify")
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let descriptor = self.descriptor
        let bound = UnixSocketAddress.withAddress(path) { bind(descriptor, $0, $1) }
        guard descriptor >= 0, bound == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    /// The next datagram, or nil when none arrives within `timeout`.
    public func receive(timeout: Duration = .seconds(5)) -> String? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(timeout / .milliseconds(1))
        guard poll(&poller, 1, milliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        guard count >= 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    /// Datagrams until one contains `needle` (returned), or nil after `timeout`.
    public func receive(containing needle: String, timeout: Duration = .seconds(5)) -> String? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let message = receive(timeout: deadline - ContinuousClock.now), message.contains(needle) {
                return message
            }
        }
        return nil
    }

    deinit {
        close(descriptor)
        directory.remove()
    }
}
