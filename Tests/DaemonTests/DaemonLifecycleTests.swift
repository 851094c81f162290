// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The real daemon's life as systemd sees it: a STATUS that follows every change, one daemon per store, and a
/// SIGTERM honoured while the start-up is held up.
@Suite("exponea-authd lifecycle: status, store lock, stop during start-up")
struct DaemonLifecycleTests {
    @Test func statusIsCurrentRightAfterATokenIsSetAndCleared() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop() }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1\nSTATUS=Holding 0 app groups") == true)

        let client = try VarlinkTestClient(path: fixture.socketPath)
        defer { client.close() }
        try client.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        // No watchdog is set: the daemon has no timer that would refresh the status; the change itself does.
        let afterSet = fixture.notify.receive(containing: "Holding 1 app group (1 with a token)")
        #expect(afterSet?.hasPrefix("STATUS=") == true, "\(afterSet ?? "nothing")")
        try client.call("Anonymize", ["group": "shop"])
        #expect(fixture.notify.receive(containing: "Holding 1 app group (0 with a token)") != nil)
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }

    @Test func aSecondDaemonOnTheSameStoreRefusesAndNamesTheFirst() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let first = try fixture.start()
        defer { first.stop() }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)

        let notify = try NotifySocket()
        let second = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            [
                "--user", "--log-target", "console", "--state-directory", fixture.stateDirectory, "--socket",
                fixture.root.appending("second.socket"),
            ],
            environment: [
                "HOME": fixture.root.path, "NOTIFY_SOCKET": notify.path, "CREDENTIALS_DIRECTORY": fixture.credentials,
            ]
        )
        #expect(BackgroundProcess.waitUntil { !second.isRunning })
        #expect(second.stop() == 1)
        #expect(
            second.output.contains("is in use by another exponea-authd (pid \(first.pid))"), "\(second.output)")
        #expect(notify.receive(timeout: .milliseconds(100)) == nil)
        #expect(first.isRunning)

        // The lock goes with the process: once the first is gone, even by SIGKILL, a new one starts.
        first.stop(signal: SIGKILL)
        let third = try fixture.start()
        defer { third.stop() }
        #expect(fixture.notify.receive(containing: "READY=1") != nil, "\(third.output)")
        #expect(third.stop(signal: SIGTERM) == 0)
    }

    // Nothing in a file's place holds the start any more: the store opens its files without blocking and refuses
    // a FIFO (issue 18 item 4). The test needs another way to hold a start (a slow disk) before it runs again.
    @Test(.disabled("needs a new way to hold the start-up"))
    func sigtermEndsAStartUpThatIsHeldUp() throws {
        // A FIFO in place of the key file: opening it waits for a writer that never comes.
        let root = try TemporaryDirectory(prefix: "authd-fifo")
        defer { root.remove() }
        let state = root.appending("state")
        try FileManager.default.createDirectory(
            atPath: state, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        #expect(mkfifo(state + "/store.key", 0o600) == 0)
        let notify = try NotifySocket()
        let daemon = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            ["--user", "--log-target", "console", "--state-directory", state, "--socket", root.appending("io.socket")],
            environment: ["HOME": root.path, "NOTIFY_SOCKET": notify.path]
        )
        defer { daemon.stop() }
        // Held up: one of its threads waits in the FIFO's open.
        let held = BackgroundProcess.waitUntil(timeout: .seconds(10)) { Self.threadWaits(in: daemon.pid, on: "fifo") }
        #expect(held, "the start-up did not reach the FIFO: \(daemon.output)")

        let stopped = ContinuousClock.now
        kill(daemon.pid, SIGTERM)
        #expect(BackgroundProcess.waitUntil(timeout: .seconds(5)) { !daemon.isRunning })
        #expect(ContinuousClock.now - stopped < .seconds(5))
        #expect(daemon.stop() == 0)
        #expect(daemon.output.contains("Stopped during start-up"), "\(daemon.output)")
        #expect(notify.receive(timeout: .milliseconds(100)) == nil)  // never READY
    }

    /// Whether a thread of `pid` sleeps in a kernel function whose name contains `needle` (`wchan`).
    static func threadWaits(in pid: Int32, on needle: String) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.contains { task in
            let wchan = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/wchan", encoding: .utf8)) ?? ""
            return wchan.contains(needle) || wchan.contains("wait_for_partner")
        }
    }
}
