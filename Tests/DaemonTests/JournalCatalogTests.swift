// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

/// The journal catalog explains every operator event, and journalctl reads it.
@Suite("The journal catalog (systemd/exponea-authd.catalog)", .offPool)
struct JournalCatalogTests {
    static let catalog = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../systemd/exponea-authd.catalog").standardized.path

    @Test func everyOperatorEventHasItsOwnEntry() throws {
        let text = try String(contentsOfFile: Self.catalog, encoding: .utf8)
        let ids = OperatorEvent.allCases.map(\.messageID)
        #expect(Set(ids).count == ids.count)
        for event in OperatorEvent.allCases {
            #expect(text.contains("\n-- \(event.messageID)\nSubject: "), "\(event)")
            #expect(event.messageID.count == 32 && event.messageID.allSatisfy(\.isHexDigit))
        }
        let entries = text.split(separator: "\n").filter { $0.hasPrefix("-- ") }
        #expect(entries.count == ids.count)
    }

    @Test func journalctlBuildsItsDatabaseFromIt() throws {
        let root = try TemporaryDirectory(prefix: "authd-catalog")
        defer { root.remove() }
        let directory = root.appending("usr/lib/systemd/catalog")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            atPath: root.appending("var/lib/systemd/catalog"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Self.catalog, toPath: directory + "/exponea-authd.catalog")
        let update = try ChildProcess.run("/usr/bin/journalctl", ["--root=\(root.path)", "--update-catalog"])
        #expect(update.status == 0, "\(update.standardError)")
        let listed = try ChildProcess.run("/usr/bin/journalctl", ["--root=\(root.path)", "--list-catalog"])
        for event in OperatorEvent.allCases {
            #expect(listed.standardOutput.contains("\(event.messageID) exponea-authd: "), "\(event)")
        }
    }
}
