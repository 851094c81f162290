// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Access follows the groups the calling process holds, not what the user database says its user belongs to:
/// carol is a member of `shopapps` in /etc/group, but a process of hers that cleared its supplementary groups
/// no longer holds it, and is refused; a process that holds the group is allowed, whatever the database says.
@Suite("Fault: access by the process's own credentials", .offPool)
struct ProcessCredentialsTests {
    static let carol: UInt32 = 4245
    static let dave: UInt32 = 4246
    static let shopApps: UInt32 = 4300

    @Test(.enabled(if: getuid() == 0, "needs root for a mount namespace and other users"))
    func aGroupTheProcessDroppedNoLongerGivesAccess() throws {
        let root = try TemporaryDirectory(prefix: "authd-creds")
        defer { root.remove() }
        #expect(chmod(root.path, 0o755) == 0)
        // The user database the daemon sees (its own mount namespace): carol, a member of shopapps.
        let passwd =
            try String(contentsOfFile: "/etc/passwd", encoding: .utf8)
            + "carol:x:\(Self.carol):\(Self.carol)::/:/bin/false\n"
        let group =
            try String(contentsOfFile: "/etc/group", encoding: .utf8)
            + "carol:x:\(Self.carol):\nshopapps:x:\(Self.shopApps):carol\n"
        try passwd.write(toFile: root.appending("passwd"), atomically: true, encoding: .utf8)
        try group.write(toFile: root.appending("group"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: root.appending("etc"), withIntermediateDirectories: false)
        try "[AppGroup]\nName=shop\nGroups=shopapps\n".write(
            toFile: root.appending("etc/authd.conf"), atomically: true, encoding: .utf8)
        let credentials = root.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false)
        try Data((0..<32).map { UInt8($0) }).write(to: URL(fileURLWithPath: credentials + "/exponea-authd.store-key"))
        let socket = root.appending("io.socket")

        let daemon = try BackgroundProcess(
            "/usr/bin/unshare",
            [
                "--mount", "--propagation", "private", "/bin/sh", "-c",
                #"mount --bind "$1" /etc/passwd && mount --bind "$2" /etc/group && shift 2 && exec "$@""#, "sh",
                root.appending("passwd"), root.appending("group"), try BuildProducts.executable("exponea-authd"),
                "--log-target", "console", "--config-directory", root.appending("etc"), "--state-directory",
                root.appending("state"), "--socket", socket,
            ],
            environment: ["PATH": "/usr/bin:/bin", "CREDENTIALS_DIRECTORY": credentials]
        )
        defer { daemon.stop(signal: SIGTERM) }
        // Its "Ready" line comes with READY=1: the socket listens and the store is loaded.
        #expect(daemon.waitForOutput { $0.contains("info: Ready: ") }, "\(daemon.output)")
        // The name was resolved when the configuration was read, in the daemon's namespace.
        #expect(!daemon.output.contains("no group 'shopapps'"), "\(daemon.output)")

        func getToken(_ credentials: [String]) throws -> String {
            let script = """
                import socket, sys
                connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                connection.settimeout(10)
                connection.connect(sys.argv[1])
                connection.sendall(b'{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}\\0')
                data = b""
                while not data.endswith(b"\\0"):
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                sys.stdout.write(data.rstrip(b"\\0").decode())
                """
            let result = try ChildProcess.run(
                "/usr/bin/setpriv", credentials + ["/usr/bin/python3", "-c", script, socket],
                environment: ["PATH": "/usr/bin:/bin", "HOME": "/"])
            return result.standardOutput + result.standardError
        }
        let denied = #"{"error":"com.exponea.Auth.PermissionDenied","parameters":{"group":"shop"}}"#
        let allowed = #"{"parameters":{"generation":0}}"#
        let carol = ["--reuid=\(Self.carol)", "--regid=\(Self.carol)"]
        let dave = ["--reuid=\(Self.dave)", "--regid=\(Self.dave)"]

        #expect(try getToken(carol + ["--clear-groups"]) == denied)  // a member, but not holding the group
        #expect(try getToken(carol + ["--groups=\(Self.shopApps)"]) == allowed)
        #expect(try getToken(dave + ["--groups=27,\(Self.shopApps)"]) == allowed)  // holds it, whatever /etc/group says
        #expect(try getToken(dave + ["--clear-groups"]) == denied)
        // As its primary group.
        #expect(try getToken(["--reuid=\(Self.dave)", "--regid=\(Self.shopApps)", "--clear-groups"]) == allowed)
        #expect(daemon.isRunning)
    }
}
