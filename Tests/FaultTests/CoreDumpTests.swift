// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The daemon and authctl hold tokens in memory: they make themselves non-dumpable (`PR_SET_DUMPABLE` 0) at
/// start, so no core dump holds a token whatever `ulimit -c` says, and no other process of the same user may
/// ptrace them or read their memory. The installed authctl is the daemon's binary run by that name: it too.
///
/// The kernel shows it without a core dump: the files of a non-dumpable process in /proc/PID belong to root
/// (proc(5)). So each program runs as an ordinary user, and its /proc/PID/status must then belong to root.
@Suite("Fault: no token in a core dump", .offPool)
struct CoreDumpTests {
    static let user: UInt32 = 4247

    /// The owner of /proc/`pid`/status.
    static func procOwner(_ pid: Int32) -> UInt32? {
        var info = stat()
        return stat("/proc/\(pid)/status", &info) == 0 ? info.st_uid : nil
    }

    /// Whether `pid` runs authctl (and no longer setpriv).
    static func isAuthctl(_ pid: Int32) -> Bool {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.hasPrefix("authctl") == true
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run the programs as another user"))
    func theDaemonAndAuthctlAreNotDumpable() throws {
        let home = try TemporaryDirectory(prefix: "authd-dump")
        defer { home.remove() }
        #expect(chown(home.path, Self.user, Self.user) == 0)  // mode 0700, as user mode asks
        let socket = home.appending("io.socket")
        let setpriv = ["--reuid=\(Self.user)", "--regid=\(Self.user)", "--clear-groups"]
        let environment = [
            "PATH": "/usr/bin:/bin", "HOME": home.path, "EXPONEA_AUTHD_SOCKET": socket,
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
        ]
        let daemon = try BackgroundProcess(
            "/usr/bin/setpriv",
            setpriv + [
                try BuildProducts.executable("exponea-authd"), "--user", "--log-target", "console", "--socket", socket,
            ],
            environment: environment)
        defer { daemon.stop(signal: SIGTERM) }
        // Its "Ready" line comes with READY=1: the socket listens and the store is loaded.
        #expect(daemon.waitForOutput { $0.contains("info: Ready: ") }, "\(daemon.output)")

        // A token in the daemon's memory, set by authctl as the same user.
        let token = TestJWT().token(expiringIn: 3600)
        let set = try ChildProcess.run(
            "/usr/bin/setpriv", setpriv + [try BuildProducts.executable("authctl"), "set", "shop"], input: token,
            environment: environment)
        #expect(set.status == 0, "\(set.standardError)")
        #expect(Self.procOwner(daemon.pid) == 0)

        // authctl, while it runs (watch runs until stopped), with the token read from the daemon.
        let watch = try BackgroundProcess(
            "/usr/bin/setpriv", setpriv + [try BuildProducts.executable("authctl"), "watch", "shop"],
            environment: environment)
        defer { watch.stop() }
        // setpriv is root's until it execs authctl, which disables dumps first thing: once authctl printed the
        // group's state line (its subscription's first event), it is authctl, and its /proc entry is root's.
        #expect(watch.waitForOutput { $0.contains("state ") }, "\(watch.output)")
        #expect(Self.procOwner(watch.pid) == 0 && Self.isAuthctl(watch.pid))
        #expect(watch.isRunning, "\(watch.output)")

        // The installed authctl: the one binary, exponea-authd, run through a symlink named authctl.
        let link = home.appending("authctl")
        try FileManager.default.createSymbolicLink(
            atPath: link, withDestinationPath: BuildProducts.executable("exponea-authd"))
        let multiCall = try BackgroundProcess(
            "/usr/bin/setpriv", setpriv + [link, "watch", "shop"], environment: environment)
        defer { multiCall.stop() }
        #expect(multiCall.waitForOutput { $0.contains("state ") }, "\(multiCall.output)")
        #expect(Self.procOwner(multiCall.pid) == 0 && Self.isAuthctl(multiCall.pid))
        #expect(multiCall.isRunning, "\(multiCall.output)")

        // The control: the same user's ordinary program is its own in /proc.
        // Its line comes once setpriv has made it the user's.
        let sleeper = try BackgroundProcess(
            "/usr/bin/setpriv", setpriv + ["/bin/sh", "-c", "echo started; exec /bin/sleep 30"],
            environment: environment)
        defer { sleeper.stop() }
        #expect(sleeper.waitForOutput { $0.contains("started") }, "\(sleeper.output)")
        #expect(Self.procOwner(sleeper.pid) == Self.user)
    }
}
