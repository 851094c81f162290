// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// Splits a Varlink byte stream into messages: each is one JSON object ended by a NUL byte.
///
/// Bounded: a message longer than ``maximumMessageSize`` is an error as soon as that many bytes have arrived
/// without a NUL, so a peer can never make the decoder buffer more.
///
/// ```swift
/// var decoder = VarlinkFrameDecoder()
/// decoder.append(bytesFromSocket)
/// while let message = try decoder.nextMessage() { handle(message) }
/// ```
public struct VarlinkFrameDecoder: Sendable {
    /// The default bound on one message: 64 KiB.
    public static let defaultMaximumMessageSize = 64 * 1024

    /// The longest message accepted, NUL excluded.
    public let maximumMessageSize: Int

    private var buffer: [UInt8] = []
    private var start = 0
    /// Where the search for the next NUL resumes, so bytes are scanned once however they arrive.
    private var scanned = 0

    public init(maximumMessageSize: Int = defaultMaximumMessageSize) {
        self.maximumMessageSize = maximumMessageSize
    }

    /// Adds bytes read from the connection.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Adds bytes read from the connection into a buffer of the caller's (a `recv` buffer), copied in one go
    /// whether or not the generic ``append(_:)`` is specialised for the caller's module.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Drops the messages already taken once they are at least half the buffer.
    private mutating func compact() {
        if start > 0 && start >= buffer.count / 2 {
            buffer.removeFirst(start)
            scanned -= start
            start = 0
        }
    }

    /// The bytes received that do not yet form a whole message.
    public var pendingByteCount: Int { buffer.count - start }

    /// The next whole message, without its NUL, or nil until more bytes arrive.
    ///
    /// - Throws: ``VarlinkFramingError/messageTooLarge(limit:)`` when a message exceeds the bound; the
    ///   connection cannot be resynchronised and should be closed.
    public mutating func nextMessage() throws(VarlinkFramingError) -> [UInt8]? {
        // memchr, not firstIndex(of:): it scans words at a time where firstIndex looks at every byte.
        let found = buffer.withUnsafeBufferPointer { bytes -> Int? in
            guard scanned < bytes.count, let base = bytes.baseAddress,
                let nul = memchr(base + scanned, 0, bytes.count - scanned)
            else { return nil }
            return base.distance(to: nul.assumingMemoryBound(to: UInt8.self))
        }
        if let end = found {
            guard end - start <= maximumMessageSize else { throw .messageTooLarge(limit: maximumMessageSize) }
            let message = Array(buffer[start..<end])
            start = end + 1
            scanned = start
            return message
        }
        scanned = buffer.count
        guard buffer.count - start <= maximumMessageSize else { throw .messageTooLarge(limit: maximumMessageSize) }
        return nil
    }
}

/// Why a Varlink byte stream cannot be read on.
public enum VarlinkFramingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A message grew past the bound without its ending NUL.
    case messageTooLarge(limit: Int)

    public var description: String {
        switch self {
        case .messageTooLarge(let limit): "a message is longer than \(limit) bytes"
        }
    }
}
