// SPDX-License-Identifier: Apache-2.0
import CSystemd
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// A swift-log handler that sends structured entries to the systemd journal (`sd_journal_sendv(3)`).
///
/// Each entry has `MESSAGE=`, `PRIORITY=`, `SYSLOG_IDENTIFIER=`, `CODE_FILE=`, `CODE_LINE=`, `CODE_FUNC=` and
/// one field per metadata key (see ``JournalFields/name(forMetadataKey:)``), so
/// `journalctl AUTHD_GROUP=shop` finds a group's entries. When the journal cannot take an entry, it is written
/// to standard error instead.
public struct JournalLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    /// The `SYSLOG_IDENTIFIER=` of every entry.
    public let identifier: String
    private let fallback: ConsoleLogHandler

    public init(identifier: String, metadataProvider: Logger.MetadataProvider? = nil) {
        self.identifier = identifier
        self.metadataProvider = metadataProvider
        self.fallback = ConsoleLogHandler(metadataProvider: metadataProvider)
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let merged = mergedMetadata(metadata, metadataProvider, event)
        let fields = Self.fields(for: event, metadata: merged, identifier: identifier)
        if Self.send(fields) < 0 {
            var console = fallback
            console.metadata = metadata
            console.log(event: event)
        }
    }

    /// The `FIELD=value` assignments of one entry.
    public static func fields(for event: LogEvent, metadata: Logger.Metadata, identifier: String) -> [String] {
        var fields = [
            "MESSAGE=\(event.message)",
            "PRIORITY=\(JournalFields.priority(of: event.level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
        ]
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            var name = JournalFields.name(forMetadataKey: key)
            if JournalFields.reserved.contains(name) { name = "META_" + name }
            fields.append("\(name)=\(value)")
        }
        if let error = event.error { fields.append("ERROR=\(error)") }
        return fields
    }

    /// Sends one entry; values may hold any bytes, line breaks included.
    static func send(_ fields: [String]) -> Int32 {
        // One buffer for every field, copied from each string's own UTF-8.
        let total = fields.reduce(0) { $0 + $1.utf8.count }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { storage.deallocate() }
        var vectors: [iovec] = []
        vectors.reserveCapacity(fields.count)
        var offset = 0
        for var field in fields {
            let start = storage.baseAddress! + offset
            let count = field.withUTF8 { bytes in
                if let base = bytes.baseAddress { start.copyMemory(from: base, byteCount: bytes.count) }
                return bytes.count
            }
            vectors.append(iovec(iov_base: start, iov_len: count))
            offset += count
        }
        return sd_journal_sendv(vectors, Int32(vectors.count))
    }
}
