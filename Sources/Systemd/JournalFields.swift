// SPDX-License-Identifier: Apache-2.0
import Logging

/// How swift-log's vocabulary maps onto the journal's (`systemd.journal-fields(7)`).
public enum JournalFields {
    /// A valid journal field name for a metadata key: upper case `A-Z 0-9 _`, other characters as `_`, no
    /// leading underscore or digit (those are the journal's own), at most 64 characters.
    ///
    /// `authd.group` becomes `AUTHD_GROUP`; a key with nothing usable becomes `FIELD`.
    public static func name(forMetadataKey key: String) -> String {
        var name = String(
            String.UnicodeScalarView(
                key.unicodeScalars.map { scalar in
                    switch scalar {
                    case "a"..."z": Unicode.Scalar(scalar.value - 32)!
                    case "A"..."Z", "0"..."9", "_": scalar
                    default: "_"
                    }
                }
            )
        )
        while let first = name.first, first == "_" || first.isNumber { name.removeFirst() }
        if name.isEmpty { return "FIELD" }
        return String(name.prefix(64))
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
    static let reserved: Set<String> = [
        "MESSAGE", "PRIORITY", "SYSLOG_IDENTIFIER", "CODE_FILE", "CODE_LINE", "CODE_FUNC", "LOGGER",
    ]
}
