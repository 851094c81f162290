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

    /// `warning: Cannot read record authd.group=shop`, with metadata sorted by key and ended by a newline.
    public static func format(_ event: LogEvent, metadata: Logger.Metadata) -> String {
        var line = "\(event.level): \(event.message)"
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line += " \(key)=\(value)"
        }
        if let error = event.error { line += " error=\(error)" }
        return line.replacingNewlines() + "\n"
    }

    @Sendable static func writeToStandardError(_ line: String) {
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

/// The handler's metadata, then the provider's, then the event's: later ones win.
func mergedMetadata(
    _ handlerMetadata: Logger.Metadata,
    _ provider: Logger.MetadataProvider?,
    _ event: LogEvent
) -> Logger.Metadata {
    var merged = handlerMetadata
    if let provided = provider?.get() { merged.merge(provided) { _, new in new } }
    if let metadata = event.metadata { merged.merge(metadata) { _, new in new } }
    return merged
}

extension String {
    /// Line breaks shown as `\n`, so one message stays one line.
    fileprivate func replacingNewlines() -> String {
        guard contains(where: \.isNewline) else { return self }
        return split(separator: "\n", omittingEmptySubsequences: false).joined(separator: "\\n")
    }
}
