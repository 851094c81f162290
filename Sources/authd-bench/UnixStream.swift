// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking AF_UNIX stream socket that speaks NUL-terminated messages: the benchmark's client side, and the
/// floor server's. Blocking I/O keeps the client's own cost small and steady, so the figures are the server's.
final class UnixStream {
    let descriptor: Int32
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var start = 0
    private var end = 0

    init(descriptor: Int32) { self.descriptor = descriptor }

    /// Connects to the socket at `path`.
    convenience init(connectingTo path: String) throws(BenchError) {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw .system("socket", errno) }
        let result = UnixSocketAddress.withAddress(path) { connect(descriptor, $0, $1) }
        guard result == 0 else {
            let error = errno
            close(descriptor)
            throw .system("connect \(path)", error)
        }
        self.init(descriptor: descriptor)
    }

    deinit { close(descriptor) }

    /// Writes every byte of `bytes`.
    func send(_ bytes: [UInt8]) throws(BenchError) {
        var sent = 0
        while sent < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + sent, $0.count - sent) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system("write", errno)
            }
            sent += count
        }
    }

    /// Reads up to the next NUL and returns the message without it.
    func receive() throws(BenchError) -> ArraySlice<UInt8> {
        var scanned = start
        while true {
            if let nul = buffer[scanned..<end].firstIndex(of: 0) {
                let message = buffer[start..<nul]
                start = nul + 1
                return message
            }
            scanned = end
            if start > 0 {
                // Move the partial message to the front.
                let pending = end - start
                buffer.withUnsafeMutableBytes { raw in
                    _ = memmove(raw.baseAddress!, raw.baseAddress! + start, pending)
                }
                scanned -= start
                end = pending
                start = 0
            }
            if end == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + end, $0.count - end) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .system("read", errno)
            }
            guard count > 0 else { throw .closed }
            end += count
        }
    }

    /// Sends `request` and waits for one reply; returns its length.
    @discardableResult
    func call(_ request: [UInt8]) throws(BenchError) -> Int {
        try send(request)
        return try receive().count
    }

    /// Whether a whole message is already buffered (so `receive()` will not block).
    var hasBufferedMessage: Bool { buffer[start..<end].contains(0) }
}

/// Why a benchmark could not run.
enum BenchError: Error, CustomStringConvertible {
    case system(String, Int32)
    case closed
    case unexpectedReply(String)
    case daemon(String)

    var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code)))"
        case .closed: "the server closed the connection"
        case .unexpectedReply(let reply): "unexpected reply: \(reply)"
        case .daemon(let message): message
        }
    }
}
