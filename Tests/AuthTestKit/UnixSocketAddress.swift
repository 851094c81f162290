import Foundation

/// `sockaddr_un` for a path, for the few raw sockets tests make.
enum UnixSocketAddress {
    /// Calls `body` with the address of `path` and its length.
    static func withAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}

/// A connected AF_UNIX stream socket, for poking servers in tests.
public struct UnixClient: Sendable {
    /// The connected socket.
    public let descriptor: Int32

    /// Connects to the socket at `path`.
    public init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let result = UnixSocketAddress.withAddress(path) { connect(descriptor, $0, $1) }
        guard descriptor >= 0, result == 0 else {
            let code = POSIXErrorCode(rawValue: errno) ?? .EIO
            if descriptor >= 0 { Glibc.close(descriptor) }
            throw POSIXError(code)
        }
    }

    /// Closes the socket.
    public func close() { _ = Glibc.close(descriptor) }
}
