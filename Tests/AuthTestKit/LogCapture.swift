// SPDX-License-Identifier: Apache-2.0
import Logging
import Synchronization

/// Keeps every message logged through its loggers in memory, so tests can look at what was logged.
///
/// ```swift
/// let capture = LogCapture()
/// let logger = capture.logger()
/// // ... code under test logs through `logger` ...
/// #expect(capture.entries.contains { $0.level == .warning })
/// ```
public final class LogCapture: Sendable {
    /// One logged message.
    public struct Entry: Sendable, CustomStringConvertible {
        /// The level it was logged at.
        public var level: Logger.Level
        /// The message text.
        public var message: String
        /// The logger's and the call's metadata, rendered as strings.
        public var metadata: [String: String]

        /// The message and all metadata in one string, for "never contains" checks.
        public var description: String {
            let fields = metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return "[\(level)] \(message) \(fields.joined(separator: " "))"
        }
    }

    private let storage = Mutex<[Entry]>([])
    /// Counts the entries as they come, for a wait on the next one.
    private let appended = CountBarrier()

    public init() {}

    /// Everything logged so far, in order.
    public var entries: [Entry] { storage.withLock { $0 } }

    /// A logger (level `trace`) whose messages go to this capture.
    public func logger(label: String = "test") -> Logger {
        var logger = Logger(label: label) { _ in Handler(capture: self) }
        logger.logLevel = .trace
        return logger
    }

    fileprivate func append(_ entry: Entry) {
        storage.withLock { $0.append(entry) }
        appended.increment()
    }

    /// Waits until an entry matches, checking each entry as it comes, or until `timeout` passes: whether one does.
    public func waitForEntry(timeout: Duration = .seconds(20), where matches: (Entry) -> Bool) async -> Bool {
        await waitForEntries(timeout: timeout) { $0.contains(where: matches) }
    }

    /// Waits until `condition` holds for the entries so far, checking it each time an entry comes, or until
    /// `timeout` passes: whether it does. For a condition over several entries (how many, the last one).
    public func waitForEntries(timeout: Duration = .seconds(20), _ condition: ([Entry]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            let seen = entries
            if condition(seen) { return true }
            let remaining = deadline - .now
            guard remaining > .zero else { return false }
            _ = await appended.wait(until: seen.count + 1, timeout: remaining)
        }
    }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            capture.append(
                Entry(
                    level: event.level, message: "\(event.message)",
                    metadata: merged.mapValues { "\($0)" }))
        }
    }
}
