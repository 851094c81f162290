// SPDX-License-Identifier: Apache-2.0
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A swift-log handler that writes one line per message to standard error: `level: message key=value …`.
///
/// The fallback when no journal is there (a terminal, a container, a test).
public struct ConsoleLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// Where lines go: nil for standard error, written from the line's bytes.
    private let write: (@Sendable (String) -> Void)?

    /// A handler writing to standard error.
    public init(metadataProvider: Logger.MetadataProvider? = nil) {
        self.metadataProvider = metadataProvider
        self.write = nil
    }

    /// A handler giving each formatted line (with its newline) to `write`.
    public init(metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void) {
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line: [UInt8] = []
        Self.format(event, metadata: mergedMetadata(metadata, metadataProvider, event), into: &line)
        guard let write else {
            line.withUnsafeBytes { Self.writeToStandardError($0) }
            return
        }
        write(String(decoding: line, as: UTF8.self))
    }

    /// `warning: Cannot read record authd.group=shop`, with metadata sorted by key and ended by a newline; a line
    /// break inside shown as `\n`, so one message stays one line.
    public static func format(_ event: LogEvent, metadata: Logger.Metadata) -> String {
        var line: [UInt8] = []
        format(event, metadata: metadata, into: &line)
        return String(decoding: line, as: UTF8.self)
    }

    /// The line ``format(_:metadata:)`` makes, as bytes: they are written as they are, with no string made of them.
    static func format(_ event: LogEvent, metadata: Logger.Metadata, into line: inout [UInt8]) {
        line.reserveCapacity(256)
        append(event.level.rawValue, to: &line)
        append(": ", to: &line)
        append(event.message.description, to: &line)
        metadata.forEachSortedByKey { key, value in
            line.append(UInt8(ascii: " "))
            append(key, to: &line)
            line.append(UInt8(ascii: "="))
            append(value.description, to: &line)
        }
        if let error = event.error {
            append(" error=", to: &line)
            append("\(error)", to: &line)
        }
        line.append(UInt8(ascii: "\n"))
    }

    /// Appends `text`'s UTF-8, each line break as `\n`.
    private static func append(_ text: String, to line: inout [UInt8]) {
        var text = text
        text.withUTF8 { bytes in
            guard bytes.contains(UInt8(ascii: "\n")) else {
                line.append(contentsOf: bytes)
                return
            }
            for byte in bytes {
                if byte == UInt8(ascii: "\n") {
                    line.append(UInt8(ascii: "\\"))
                    line.append(UInt8(ascii: "n"))
                } else {
                    line.append(byte)
                }
            }
        }
    }

    static func writeToStandardError(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

extension Logger.Metadata {
    /// Calls `body` with each key and value in the order of the keys, without copying the dictionary's elements:
    /// their indices are sorted in a buffer on the stack.
    func forEachSortedByKey(_ body: (String, Logger.MetadataValue) -> Void) {
        guard !isEmpty else { return }
        withUnsafeTemporaryAllocation(of: Index.self, capacity: count) { buffer in
            let sorted = buffer.baseAddress!
            var placed = 0
            for index in indices {
                let key = self[index].key
                var slot = placed
                while slot > 0, key < self[sorted[slot - 1]].key { slot -= 1 }
                (sorted + slot + 1).moveInitialize(from: sorted + slot, count: placed - slot)
                (sorted + slot).initialize(to: index)
                placed += 1
            }
            for offset in 0..<placed { body(self[sorted[offset]].key, self[sorted[offset]].value) }
            sorted.deinitialize(count: placed)
        }
    }
}

/// The handler's metadata, then the provider's, then the event's: later ones win.
func mergedMetadata(
    _ handlerMetadata: Logger.Metadata,
    _ provider: Logger.MetadataProvider?,
    _ event: LogEvent
) -> Logger.Metadata {
    if handlerMetadata.isEmpty, provider == nil { return event.metadata ?? [:] }
    var merged = handlerMetadata
    if let provided = provider?.get() { merged.merge(provided) { _, new in new } }
    if let metadata = event.metadata { merged.merge(metadata) { _, new in new } }
    return merged
}
