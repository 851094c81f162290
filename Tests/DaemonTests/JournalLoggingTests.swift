// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

/// The daemon's journal log handler against libsystemd's real native protocol: the daemon runs in a private
/// mount namespace where a stand-in journald listens on /run/systemd/journal/socket.
@Suite("Logging to the journal", .offPool)
struct JournalLoggingTests {
    static var canMakeMountNamespaces: Bool {
        (try? ChildProcess.run("/usr/bin/unshare", ["-m", "true"]).status) == 0
    }

    @Test(.enabled(if: canMakeMountNamespaces, "needs root or user namespaces for unshare --mount"))
    func entriesCarryStructuredFieldsAndNoToken() throws {
        let state = try TemporaryDirectory(prefix: "authd-journal")
        defer { state.remove() }
        let capture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/journal-capture.py").path
        let daemon = try BuildProducts.executable("exponea-authd")
        let script = """
            mount -t tmpfs tmpfs /run/systemd 2>/dev/null || { mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd; }
            exec python3 "$0" --until "Started in" -- "$1" --user --log-target journal --state-directory "$2"
            """
        let result = try ChildProcess.run(
            "/usr/bin/unshare",
            ["-m", "/bin/sh", "-c", script, capture, daemon, state.appending("store")]
        )
        #expect(result.status == 0, "\(result.standardError)")
        let entries = result.standardOutput.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String]
        }
        let ready = try #require(entries.first { $0["MESSAGE"] == "Token store ready" }, "\(result.standardOutput)")
        #expect(ready["PRIORITY"] == "6")
        #expect(ready["SYSLOG_IDENTIFIER"] == "exponea-authd")
        #expect(ready["AUTHD_GROUPS"] == "0")
        #expect(ready["AUTHD_STATE_DIRECTORY"] == state.appending("store"))
        #expect(ready["CODE_FILE"]?.hasSuffix("Daemon.swift") == true)
        #expect(ready["CODE_FUNC"] != nil && ready["CODE_LINE"] != nil)

        let warning = try #require(entries.first { $0["MESSAGE"]?.contains("not bound to this device") == true })
        #expect(warning["PRIORITY"] == "4")
        #expect(warning["AUTHD_KEY_FILE"] == state.appending("store/store.key"))
        // An operator's event: its catalog entry explains it (journalctl -x).
        #expect(warning["MESSAGE_ID"] == OperatorEvent.storeKeyProblem.messageID)
        #expect(entries.contains { $0["MESSAGE"] == "Started in user mode" })
    }
}
