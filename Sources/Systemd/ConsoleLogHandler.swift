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

    private let write: @Sendable (String) -> Void

    /// A handler writing to standard error.
    public init(metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(metadataProvider: metadataProvider, write: Self.writeToStandardError)
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
        write(Self.format(event, metadata: mergedMetadata(metadata, metadataProvider, event)))
    }

    /// `warning: Cannot read record authd.group=shop`, with metadata sorted by key and ended by a newline; a line
    /// break inside shown as `\n`, so one message stays one line.
    public static func format(_ event: LogEvent, metadata: Logger.Metadata) -> String {
        // Made as bytes and read as a string once: appending to a string checks and grows it piece by piece.
        var line: [UInt8] = []
        line.reserveCapacity(256)
        append(event.level.rawValue, to: &line)
        append(": ", to: &line)
        append(event.message.description, to: &line)
        if !metadata.isEmpty {
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
                line.append(UInt8(ascii: " "))
                append(key, to: &line)
                line.append(UInt8(ascii: "="))
                append(value.description, to: &line)
            }
        }
        if let error = event.error {
            append(" error=", to: &line)
            append("\(error)", to: &line)
        }
        line.append(UInt8(ascii: "\n"))
        return String(decoding: line, as: UTF8.self)
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

    @Sendable static func writeToStandardError(_ line: String) {
        var line = line
        line.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
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
