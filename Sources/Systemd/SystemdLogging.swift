// SPDX-License-Identifier: Apache-2.0
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// Where a daemon's log goes.
public enum LogTarget: String, Sendable, CaseIterable {
    /// The journal when standard error is connected to it (as systemd sets `$JOURNAL_STREAM`), else stderr.
    case auto
    /// The systemd journal, with structured fields.
    case journal
    /// One line per message on standard error.
    case console
}

/// Picks the log handler for a ``LogTarget``.
public enum SystemdLogging {
    /// A handler for `target`: ``JournalLogHandler`` or ``ConsoleLogHandler``.
    public static func handler(label: String, identifier: String, target: LogTarget) -> any LogHandler {
        switch target {
        case .journal:
            return JournalLogHandler(identifier: identifier)
        case .console:
            return ConsoleLogHandler()
        case .auto:
            return standardErrorIsJournal() ? JournalLogHandler(identifier: identifier) : ConsoleLogHandler()
        }
    }

    /// Whether standard error is the journal stream systemd connected (`$JOURNAL_STREAM` is its
    /// `device:inode`), as `sd_journal_stream_fd(3)` and systemd's own tools decide.
    public static func standardErrorIsJournal(environment journalStream: String? = nil) -> Bool {
        guard let value = journalStream ?? getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else {
            return false
        }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
