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
        let entry = Self.entry(
            for: event, metadata: mergedMetadata(metadata, metadataProvider, event), identifier: identifier)
        if entry.send() < 0 {
            var console = fallback
            console.metadata = metadata
            console.log(event: event)
        }
    }

    /// The `FIELD=value` assignments of one entry.
    public static func fields(for event: LogEvent, metadata: Logger.Metadata, identifier: String) -> [String] {
        let entry = entry(for: event, metadata: metadata, identifier: identifier)
        return entry.ends.indices.map { field in
            let start = field == 0 ? 0 : entry.ends[field - 1]
            return String(decoding: entry.bytes[start..<entry.ends[field]], as: UTF8.self)
        }
    }

    /// One entry's fields written one after another into one buffer, each one's end kept: no string is made per
    /// field.
    struct Entry {
        var bytes: [UInt8] = []
        var ends: [Int] = []

        mutating func field(_ name: StaticString, _ value: String) {
            bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            bytes.append(UInt8(ascii: "="))
            var value = value
            value.withUTF8 { bytes.append(contentsOf: $0) }
            ends.append(bytes.count)
        }

        /// Sends the entry; values may hold any bytes, line breaks included.
        func send() -> Int32 {
            bytes.withUnsafeBufferPointer { buffer in
                withUnsafeTemporaryAllocation(of: iovec.self, capacity: ends.count) { vectors in
                    var start = 0
                    for (field, end) in ends.enumerated() {
                        vectors[field] = iovec(
                            iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress! + start),
                            iov_len: end - start)
                        start = end
                    }
                    return sd_journal_sendv(vectors.baseAddress, Int32(ends.count))
                }
            }
        }
    }

    /// The entry of `event`: the handler's own fields, then one per metadata key in the keys' order.
    static func entry(for event: LogEvent, metadata: Logger.Metadata, identifier: String) -> Entry {
        var entry = Entry()
        entry.bytes.reserveCapacity(512)
        entry.ends.reserveCapacity(8 + metadata.count)
        entry.field("MESSAGE", event.message.description)
        entry.field("PRIORITY", String(JournalFields.priority(of: event.level)))
        entry.field("SYSLOG_IDENTIFIER", identifier)
        entry.field("CODE_FILE", event.file)
        entry.field("CODE_LINE", String(event.line))
        entry.field("CODE_FUNC", event.function)
        metadata.forEachSortedByKey { key, value in
            JournalFields.appendName(forMetadataKey: key, to: &entry.bytes)
            entry.bytes.append(UInt8(ascii: "="))
            var value = value.description
            value.withUTF8 { entry.bytes.append(contentsOf: $0) }
            entry.ends.append(entry.bytes.count)
        }
        if let error = event.error { entry.field("ERROR", "\(error)") }
        return entry
    }
}
