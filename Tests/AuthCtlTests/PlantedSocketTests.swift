// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// bob (uid 4243) listens where alice's (uid 4242) or root's authctl looks for the daemon: authctl sends him
/// nothing, neither alice's token (`set`) nor a request for one he could answer with his own (`get`).
@Suite("authctl and another user's planted socket", .offPool)
struct PlantedSocketTests {
    static let alice: UInt32 = 4242
    static let bob: UInt32 = 4243
    static let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "alice"])

    /// Runs authctl as `uid` (root when nil) with `environment` only.
    static func authctl(_ arguments: [String], as uid: UInt32? = nil, input: String = "", environment: [String: String])
        throws -> ChildProcess.Result
    {
        let authctl = try BuildProducts.executable("authctl")
        guard let uid else { return try ChildProcess.run(authctl, arguments, input: input, environment: environment) }
        return try ChildProcess.run(
            "/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", authctl] + arguments,
            input: input, environment: environment)
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run processes as other users"))
    func anExplicitSocketServedByAnotherUserIsSentNothing() throws {
        let directory = try TemporaryDirectory(prefix: "authd-planted")
        defer { directory.remove() }
        #expect(chown(directory.path, Self.bob, Self.bob) == 0 && chmod(directory.path, 0o755) == 0)
        let server = try PlantedServer(path: directory.appending("io.socket"), uid: Self.bob)
        defer { server.stop() }

        let base = ["PATH": "/usr/bin:/bin", "TZ": "UTC"]
        let runs: [(arguments: [String], environment: [String: String], input: String)] = [
            (["set", "shop", "--socket", server.path], base, Self.token + "\n"),
            (["set", "shop"], base.merging(["EXPONEA_AUTHD_SOCKET": server.path]) { $1 }, Self.token + "\n"),
            (["get", "shop"], base.merging(["EXPONEA_AUTHD_SOCKET": server.path]) { $1 }, ""),
        ]
        for (index, run) in runs.enumerated() {
            let result = try Self.authctl(run.arguments, input: run.input, environment: run.environment)
            #expect(result.status == 1, "\(run.arguments): \(result.standardError)")
            #expect(result.standardOutput.isEmpty)
            #expect(result.standardError.contains("\(server.path) runs as uid \(Self.bob)"), "\(result.standardError)")
            #expect(result.standardError.contains("nothing was sent"))
            // Each connection was closed without a byte sent.
            #expect(server.connections(atLeast: index + 1) == Array(repeating: 0, count: index + 1))
        }
    }

    /// Without XDG_RUNTIME_DIR authctl and the user daemon fall back to /tmp/exponea-authd-UID, which bob can
    /// create first. authctl ignores a directory that is not alice's own and sends bob nothing; alice's daemon
    /// refuses to serve there and says why. Once the directory is gone, alice's own daemon serves there and
    /// authctl uses it.
    @Test(.enabled(if: getuid() == 0, "needs root to run processes as other users"))
    func aPlantedFallbackDirectoryIsIgnoredByAuthctlAndRefusedByTheDaemon() throws {
        let fallback = "/tmp/exponea-authd-\(Self.alice)"
        try? FileManager.default.removeItem(atPath: fallback)
        defer { try? FileManager.default.removeItem(atPath: fallback) }
        let home = try TemporaryDirectory(prefix: "authd-alice")
        defer { home.remove() }
        #expect(chown(home.path, Self.alice, Self.alice) == 0)
        let environment = ["PATH": "/usr/bin:/bin", "TZ": "UTC", "HOME": home.path]  // no XDG_RUNTIME_DIR

        let server = try PlantedServer(path: fallback + "/io.socket", uid: Self.bob)
        for arguments in [["set", "shop"], ["get", "shop"]] {
            let result = try Self.authctl(arguments, as: Self.alice, input: Self.token + "\n", environment: environment)
            #expect(result.status != 0, "\(arguments)")
            #expect(!result.standardError.contains(fallback), "\(result.standardError)")
        }
        // A connection of the test's own, after authctl ended: the server takes connections in order, so had
        // authctl connected, its connection would be listed before this one.
        try UnixClient(path: server.path).close()
        #expect(server.connections(atLeast: 1) == [0])

        let daemonCommand = [
            "--reuid=\(Self.alice)", "--regid=\(Self.alice)", "--clear-groups",
            try BuildProducts.executable("exponea-authd"), "--user", "--log-target", "console",
        ]
        let refused = try ChildProcess.run("/usr/bin/setpriv", daemonCommand, environment: environment)
        #expect(refused.status == 1)
        #expect(
            refused.standardError.contains("the socket directory \(fallback) belongs to uid \(Self.bob)"),
            "\(refused.standardError)")
        #expect(refused.standardError.contains("XDG_RUNTIME_DIR"))

        // The positive twin: with bob's directory gone, alice's own daemon and authctl work there.
        server.stop()
        try FileManager.default.removeItem(atPath: fallback)
        let daemon = try BackgroundProcess("/usr/bin/setpriv", daemonCommand, environment: environment)
        defer { daemon.stop(signal: SIGTERM) }
        #expect(daemon.waitForOutput { $0.contains("info: Ready: ") }, "\(daemon.output)")
        let set = try Self.authctl(["set", "shop"], as: Self.alice, input: Self.token + "\n", environment: environment)
        #expect(set.status == 0, "\(set.standardError) \(daemon.output)")
        let get = try Self.authctl(["get", "shop"], as: Self.alice, environment: environment)
        #expect(get.standardOutput == Self.token + "\n", "\(get.standardError)")
    }
}
