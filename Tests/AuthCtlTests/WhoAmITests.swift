// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// `authctl whoami` (issue 40): how the real daemon sees the caller, and which rule allows each group.
@Suite("authctl whoami against the daemon", .offPool)
struct WhoAmITests {
    static let configuration = """
        [AppGroup]
        Name=shop
        Users=65534
        Units=shop-*.service

        [AppGroup]
        Name=crew
        Groups=65534

        [AppGroup]
        Name=vault
        Users=4242
        """

    /// `authctl ARGUMENTS --socket SOCKET` as nobody (uid and gid 65534, no supplementary group), first moved into
    /// the cgroup `cgroup` when given.
    static func asNobody(_ arguments: [String], socket: String, cgroup: String? = nil) throws -> ChildProcess.Result {
        let authctl = [
            "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            try BuildProducts.executable("authctl"),
        ]
        let command = authctl + arguments + ["--socket", socket]
        guard let cgroup else {
            return try ChildProcess.run(command[0], Array(command.dropFirst()), environment: ["PATH": "/usr/bin:/bin"])
        }
        return try ChildProcess.run(
            "/bin/sh", ["-c", "echo $$ > \"$0\"/cgroup.procs && exec \"$@\"", cgroup] + command,
            environment: ["PATH": "/usr/bin:/bin"])
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run authctl as another user"))
    func namesTheCallersIdsAndEachGroupsRule() throws {
        let config = try TemporaryDirectory(prefix: "authctl-etc")
        defer { config.remove() }
        try Self.configuration.write(toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(configDirectory: config.path)

        let json = try Self.asNobody(["whoami", "--json"], socket: daemon.socketPath)
        #expect(json.status == 0, "\(json.standardError)")
        let seen = try parseJSON(json.standardOutput)
        #expect(seen["uid"] as? Int == 65534)
        #expect(seen["gid"] as? Int == 65534)
        #expect(seen["gids"] as? [Int] == [])
        #expect(seen["everyGroup"] is NSNull)
        let groups = (seen["appGroups"] as? [[String: Any]] ?? []).map {
            "\($0["name"] as? String ?? "?"): \(($0["rules"] as? [String] ?? []).joined(separator: ","))"
        }
        #expect(groups == ["crew: Groups=65534", "shop: Users=65534"], "\(json.standardOutput)")

        let text = try Self.asNobody(["whoami"], socket: daemon.socketPath)
        #expect(text.status == 0)
        #expect(text.standardOutput.contains("uid:    65534\n"), "\(text.standardOutput)")
        #expect(text.standardOutput.contains("groups: crew (Groups=65534)\n        shop (Users=65534)\n"))

        let root = try daemon.authctl(["whoami", "--json"])
        #expect(try parseJSON(root.standardOutput)["everyGroup"] as? String == "root", "\(root.standardOutput)")
    }

    /// A process in the cgroup of `shop-app.service` is named by it, and allowed by `Units=shop-*.service`; the same
    /// uid in `other-app.service` is not (exit 77). The daemon finds the unit through the process's pidfd and the
    /// cgroup file system: the cgroups here are made by the test in the host's cgroup v2 tree, as systemd would.
    @Test(.enabled(if: getuid() == 0 && Self.cgroupRoot != nil, "needs root and a writable cgroup v2 tree"))
    func aProcessIsNamedAndAllowedByItsUnit() throws {
        let config = try TemporaryDirectory(prefix: "authctl-etc")
        defer { config.remove() }
        try "[AppGroup]\nName=kiosk\nUnits=shop-*.service\n".write(
            toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(configDirectory: config.path)
        let token = TestJWT().token(expiringIn: 3600)
        try daemon.set("kiosk", token)

        let slice = "\(Self.cgroupRoot!)/authd-test-\(getpid()).slice"
        let shop = slice + "/shop-app.service"
        let other = slice + "/other-app.service"
        for path in [slice, shop, other] { #expect(mkdir(path, 0o755) == 0, "\(path): \(errno)") }
        defer { for path in [shop, other, slice] { rmdir(path) } }

        let seen = try Self.asNobody(["whoami", "--json"], socket: daemon.socketPath, cgroup: shop)
        #expect(seen.status == 0, "\(seen.standardError)")
        let object = try parseJSON(seen.standardOutput)
        #expect(object["unit"] as? String == "shop-app.service", "\(seen.standardOutput)")
        let groups = object["appGroups"] as? [[String: Any]] ?? []
        #expect(groups.first?["rules"] as? [String] == ["Units=shop-*.service"], "\(seen.standardOutput)")

        let allowed = try Self.asNobody(["get", "kiosk"], socket: daemon.socketPath, cgroup: shop)
        #expect(allowed.status == 0, "\(allowed.standardError)")
        #expect(allowed.standardOutput == token + "\n")
        let refused = try Self.asNobody(["get", "kiosk"], socket: daemon.socketPath, cgroup: other)
        #expect(refused.status == 77)
        #expect(!refused.standardOutput.contains(token) && !refused.standardError.contains(token))
    }

    /// A connection refused at the per-user bound is logged with the caller's unit (CALLER_UNIT=), found for the
    /// line that is written, as the dispatcher's events are.
    @Test(.enabled(if: getuid() == 0 && Self.cgroupRoot != nil, "needs root and a writable cgroup v2 tree"))
    func aRefusedConnectionIsLoggedWithTheCallersUnit() throws {
        let config = try TemporaryDirectory(prefix: "authctl-etc")
        defer { config.remove() }
        try "[AppGroup]\nName=kiosk\nUnits=shop-*.service\n".write(
            toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(configDirectory: config.path, arguments: ["--max-connections-per-user", "1"])
        let slice = "\(Self.cgroupRoot!)/authd-test-\(getpid())-refused.slice"
        let shop = slice + "/shop-app.service"
        for path in [slice, shop] { #expect(mkdir(path, 0o755) == 0, "\(path): \(errno)") }
        defer { for path in [shop, slice] { rmdir(path) } }

        // Two connections of nobody, in shop-app.service: the second is one too many. The process stays (until
        // stopped), so its unit can be found when the refusal is logged.
        let script = """
            import signal, socket, sys
            held = [socket.socket(socket.AF_UNIX) for _ in range(2)]
            for s in held: s.connect(sys.argv[1])
            print("connected", flush=True)
            signal.pause()
            """
        let app = try BackgroundProcess(
            "/bin/sh",
            [
                "-c", "echo $$ > \"$0\"/cgroup.procs && exec \"$@\"", shop, "/usr/bin/setpriv", "--reuid=65534",
                "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, daemon.socketPath,
            ])
        defer { app.stop() }
        #expect(app.waitForOutput { $0.contains("connected") })
        #expect(
            daemon.daemon.waitForOutput { output in
                output.split(separator: "\n").contains {
                    $0.contains("Refusing a connection") && $0.contains("caller_unit=shop-app.service")
                        && $0.contains("caller_uid=65534")
                }
            }, "\(daemon.daemon.output)")
    }

    /// The cgroup v2 tree (a cgroup v2 directory has `cgroup.controllers`), when this test may make cgroups in it.
    static let cgroupRoot: String? = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"].first { path in
        access(path + "/cgroup.controllers", F_OK) == 0 && access(path, W_OK) == 0
    }
}
