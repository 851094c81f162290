// SPDX-License-Identifier: Apache-2.0
import Logging

/// How swift-log's vocabulary maps onto the journal's (`systemd.journal-fields(7)`).
public enum JournalFields {
    /// A valid journal field name for a metadata key: upper case `A-Z 0-9 _`, other characters as `_`, no
    /// leading underscore or digit (those are the journal's own), at most 64 characters.
    ///
    /// `authd.group` becomes `AUTHD_GROUP`; a key with nothing usable becomes `FIELD`.
    public static func name(forMetadataKey key: String) -> String {
        var name: [UInt8] = []
        appendName(forMetadataKey: key, to: &name, prefixingReserved: false)
        return String(decoding: name, as: UTF8.self)
    }

    /// Appends the field name of `key` (``name(forMetadataKey:)``) to `bytes`, with `META_` before a name the
    /// handler's own fields use (`MESSAGE`, `PRIORITY`, …) when `prefixingReserved`.
    static func appendName(forMetadataKey key: String, to bytes: inout [UInt8], prefixingReserved: Bool = true) {
        let start = bytes.count
        var leading = true
        for scalar in key.unicodeScalars {
            let byte: UInt8
            switch scalar.value {
            case 0x61...0x7A: byte = UInt8(scalar.value - 32)
            case 0x41...0x5A, 0x30...0x39, 0x5F: byte = UInt8(scalar.value)
            default: byte = UInt8(ascii: "_")
            }
            // A name starts with a letter: leading underscores and digits go.
            if leading, byte == UInt8(ascii: "_") || (0x30...0x39).contains(byte) { continue }
            leading = false
            guard bytes.count - start < 64 else { break }
            bytes.append(byte)
        }
        if bytes.count == start {
            bytes.append(contentsOf: "FIELD".utf8)
            return
        }
        if prefixingReserved, reserved.contains(where: { $0.elementsEqual(bytes[start...]) }) {
            bytes.insert(contentsOf: "META_".utf8, at: start)
        }
    }

    /// The syslog priority (`PRIORITY=`) of a swift-log level.
    public static func priority(of level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7  // debug
        case .info: 6  // info
        case .notice: 5  // notice
        case .warning: 4  // warning
        case .error: 3  // err
        case .critical: 2  // crit
        }
    }

    /// The fields reserved for the message itself, which metadata may not overwrite.
    static let reserved: [[UInt8]] = [
        "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "LOGGER",
    ].map { Array($0.utf8) }
}
