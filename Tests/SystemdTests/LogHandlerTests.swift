// SPDX-License-Identifier: Apache-2.0
import Foundation
import Logging
import Synchronization
import Systemd
import Testing

@Suite("Logging to the journal and the console")
struct LogHandlerTests {
    @Test(arguments: [
        ("authd.group", "AUTHD_GROUP"),
        ("AUTHD_REASON", "AUTHD_REASON"),
        ("state-directory", "STATE_DIRECTORY"),
        ("_private", "PRIVATE"),
        ("__x", "X"),
        ("1st", "ST"),
        ("grüße", "GR__E"),
        ("...", "FIELD"),
        ("", "FIELD"),
        (String(repeating: "k", count: 100), String(repeating: "K", count: 64)),
    ])
    func metadataKeysBecomeValidFieldNames(key: String, field: String) {
        #expect(JournalFields.name(forMetadataKey: key) == field)
    }

    @Test func levelsMapToSyslogPriorities() {
        let priorities = Logger.Level.allCases.map { JournalFields.priority(of: $0) }
        #expect(priorities == [7, 7, 6, 5, 4, 3, 2])
    }

    @Test func journalEntriesCarryStructuredFields() {
        let event = LogEvent(
            level: .warning,
            message: "Record quarantined",
            metadata: nil,
            source: nil,
            file: "AuthStore/TokenStore.swift",
            function: "load(_:)",
            line: 42
        )
        let fields = JournalLogHandler.fields(
            for: event,
            metadata: ["authd.group": "shop", "message": "not the message"],
            identifier: "exponea-authd"
        )
        #expect(
            fields == [
                "MESSAGE=Record quarantined",
                "PRIORITY=4",
                "SYSLOG_IDENTIFIER=exponea-authd",
                "CODE_FILE=AuthStore/TokenStore.swift",
                "CODE_LINE=42",
                "CODE_FUNC=load(_:)",
                "AUTHD_GROUP=shop",
                "META_MESSAGE=not the message",
            ]
        )
    }

    @Test func consoleLinesAreOneLinePerMessageWithSortedMetadata() {
        let lines = Mutex<[String]>([])
        var handler = ConsoleLogHandler(write: { line in lines.withLock { $0.append(line) } })
        handler.metadata = ["b": "2"]
        let logger = Logger(label: "test") { _ in handler }
        logger.warning("Cannot read\nthe record", metadata: ["a": "1"])
        logger.debug("not shown at the default level")
        #expect(lines.withLock { $0 } == ["warning: Cannot read\\nthe record a=1 b=2\n"])
    }

    @Test func metadataOfManyKeysIsWrittenInTheOrderOfTheKeys() {
        let keys = ["caller_uid", "group", "message_id", "caller_pid", "state", "generation", "caller_unit", "a", "z"]
        let metadata = Logger.Metadata(uniqueKeysWithValues: keys.map { ($0, .string($0.uppercased())) })
        let event = LogEvent(
            level: .info, message: "Token set", metadata: nil, source: nil, file: "f", function: "g", line: 1)
        let expected = keys.sorted().map { " \($0)=\($0.uppercased())" }.joined()
        #expect(ConsoleLogHandler.format(event, metadata: metadata) == "info: Token set\(expected)\n")
        let fields = JournalLogHandler.fields(for: event, metadata: metadata, identifier: "x").dropFirst(6)
        #expect(Array(fields) == keys.sorted().map { "\($0.uppercased())=\($0.uppercased())" })
    }

    @Test func autoPicksTheConsoleWhenStandardErrorIsNotTheJournal() {
        #expect(!SystemdLogging.standardErrorIsJournal(environment: "0:0"))
        #expect(!SystemdLogging.standardErrorIsJournal(environment: "garbage"))
        var status = stat()
        fstat(2, &status)
        #expect(SystemdLogging.standardErrorIsJournal(environment: "\(status.st_dev):\(status.st_ino)"))
        #expect(SystemdLogging.handler(label: "x", identifier: "x", target: .console) is ConsoleLogHandler)
        #expect(SystemdLogging.handler(label: "x", identifier: "x", target: .journal) is JournalLogHandler)
    }
}
