// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// `authctl refresh-agent` against the real daemon, with real refresh commands (shell scripts that mint with
/// `authctl mint`).
@Suite("authctl refresh-agent", .offPool)
struct RefreshAgentTests {
    let signer = TestJWT()

    /// A refresh command in `directory`: it appends a line to `runs` for each run, saves what it read on
    /// standard input and its environment, then does `body` (by default: prints a fresh minted token).
    func command(in directory: TemporaryDirectory, body: String? = nil) throws -> String {
        let key = directory.appending("stream.key")
        try Data("agent-test-secret".utf8).write(to: URL(fileURLWithPath: key))
        chmod(key, 0o600)
        let mint = try BuildProducts.executable("authctl")
        let script = directory.appending("refresh.sh")
        let text = """
            #!/bin/sh
            cat > "\(directory.path)/request"
            echo "$EXPONEA_AUTH_GROUP $EXPONEA_AUTH_REASON" >> "\(directory.path)/runs"
            \(body ?? "exec \(mint) mint --secret-file \(key) --id registered=jane --ttl 3600")

            """
        try writeExecutable(text, to: script)
        return script
    }

    func runs(_ directory: TemporaryDirectory) -> [String] {
        ((try? String(contentsOfFile: directory.appending("runs"), encoding: .utf8)) ?? "")
            .split(separator: "\n").map(String.init)
    }

    @Test func severalAgentsRunTheCommandOncePerExpiry() throws {
        let daemon = try DaemonFixture()
        try daemon.set("shop", signer.token(expiringIn: 3600))
        let script = try command(in: daemon.root)
        let agents = try (0..<3).map { _ in
            try daemon.authctlInBackground(["refresh-agent", "shop", "--", script])
        }
        defer { for agent in agents { agent.stop() } }
        #expect(daemon.waitForSubscribers("shop", count: 3, timeout: .seconds(10)))

        // A token in its last minute: every agent hears expiredSoon for generation 2 at once.
        try daemon.set("shop", signer.token(expiringIn: 30, ids: ["registered": "jane"]))
        #expect(daemon.waitForTokenSet("shop", generation: 3))
        // Barrier: every agent has decided (it refreshed, or heard that another one does).
        let decided = agents.allSatisfy { agent in
            agent.waitForOutput(timeout: .seconds(10)) {
                $0.contains("stored a new token") || $0.contains("another app or agent refreshes")
            }
        }
        #expect(decided, "\(agents.map(\.output))")
        #expect(runs(daemon.root) == ["shop expiredSoon"])
        let request = try String(contentsOfFile: daemon.root.appending("request"), encoding: .utf8)
        #expect(request == #"{"group":"shop","reason":"expiredSoon","customerIds":{"registered":"jane"}}"# + "\n")
        let stored = try daemon.authctl(["get", "shop"]).standardOutput
        #expect(!agents.contains { $0.output.contains(stored.trimmingCharacters(in: .newlines)) })
    }

    @Test func withoutACommandTheAgentRunsTheGroupsRefreshCommandFromAuthdConf() throws {
        let daemon = try DaemonFixture()
        let script = try command(in: daemon.root)
        let config = daemon.root.appending("config")
        try FileManager.default.createDirectory(atPath: config + "/authd.conf.d", withIntermediateDirectories: true)
        try Data("[AppGroup]\nName=news\nRefreshCommand=false\n".utf8).write(
            to: URL(fileURLWithPath: config + "/authd.conf"))
        try Data("[AppGroup]\nName=shop\nRefreshCommand=\(script) --from-config\n".utf8).write(
            to: URL(fileURLWithPath: config + "/authd.conf.d/shop.conf"))
        let agent = try daemon.authctlInBackground(["refresh-agent", "shop", "--config-directory", config])
        defer { agent.stop() }
        #expect(
            daemon.waitForTokenSet("shop", generation: 1), "\(agent.output)")
        #expect(runs(daemon.root) == ["shop notProvided"])
    }

    @Test func withoutACommandOrARefreshCommandTheAgentSaysWhereToPutOne() throws {
        let directory = try TemporaryDirectory(prefix: "authctl-agent")
        defer { directory.remove() }
        let result = try runAuthctl(["refresh-agent", "shop", "--config-directory", directory.path])
        #expect(result.status == 2)
        #expect(result.standardError.contains("RefreshCommand= in the [AppGroup] of 'shop'"))
    }

    @Test func anAgentStartedWithoutATokenFetchesOneAtOnce() throws {
        let daemon = try DaemonFixture()
        let agent = try daemon.authctlInBackground(["refresh-agent", "shop", "--", command(in: daemon.root)])
        defer { agent.stop() }
        #expect(
            daemon.waitForTokenSet("shop", generation: 1), "\(agent.output)")
        #expect(runs(daemon.root) == ["shop notProvided"])
        #expect(try daemon.authctl(["get", "shop"]).status == 0)
    }

    @Test func aFailingCommandIsRetriedWithGrowingDelaysAndLoggedWithItsStatus() throws {
        let daemon = try DaemonFixture()
        let agent = try daemon.authctlInBackground([
            "refresh-agent", "shop", "--", command(in: daemon.root, body: "echo oops >&2; exit 3"),
        ])
        defer { agent.stop() }
        let delays = {
            agent.output.matches(of: /trying again in ([0-9.]+) s/).compactMap { Double($0.output.1) }
        }
        #expect(
            agent.waitForOutput(timeout: .seconds(30)) { $0.matches(of: /trying again in ([0-9.]+) s/).count >= 3 },
            "\(agent.output)")
        let seen = delays()
        #expect((0.8...1.2).contains(seen[0]), "\(seen)")
        #expect((1.6...2.4).contains(seen[1]), "\(seen)")
        #expect((3.2...4.8).contains(seen[2]), "\(seen)")
        #expect(agent.output.contains("the refresh command failed: exit status 3"))
        // Never more runs than tries.
        #expect(runs(daemon.root).count <= seen.count + 1)
        #expect(try daemon.authctl(["get", "shop"]).status == 3)
    }

    @Test func aCommandThatHangsIsKilledWithWhatItStarted() throws {
        let daemon = try DaemonFixture()
        let pidFile = daemon.root.appending("pid")
        let agent = try daemon.authctlInBackground([
            "refresh-agent", "shop", "--command-timeout", "1", "--",
            // Its output goes elsewhere: a grandchild left holding the agent's standard error would keep the test's
            // pipe open after the agent is killed.
            command(in: daemon.root, body: "sleep 300 >/dev/null 2>&1 & echo $! > \(pidFile); wait"),
        ])
        defer { agent.stop() }
        #expect(
            agent.waitForOutput(timeout: .seconds(15)) { $0.contains("ran past 1.0 s and was killed") },
            "\(agent.output)")
        let pid = try #require(
            Int32((try? String(contentsOfFile: pidFile, encoding: .utf8))?.trimmingCharacters(in: .newlines) ?? ""))
        // The grandchild went with its process group (a zombie until its new parent reaps it counts as gone).
        #expect(SpawnedProcess.waitForExit(of: pid, timeout: .seconds(5)) ?? true)
        // The claim ended with the failure: the agent's next try is granted at once, not after the lease.
        #expect(
            agent.waitForOutput(timeout: .seconds(15)) {
                $0.components(separatedBy: "refreshing app group 'shop'").count >= 3
            }, "\(agent.output)")
        #expect(!agent.output.contains("another app or agent refreshes"))
    }

    @Test func anAgentKilledMidRefreshIsTakenOverAtOnce() throws {
        let daemon = try DaemonFixture()
        let first = try TemporaryDirectory(prefix: "authd-agent-a")
        defer { first.remove() }
        try daemon.set("shop", signer.token(expiringIn: 3600))
        // The first agent's backend says it started (on the agent's standard error, which it inherits), then never
        // answers.
        let hanging = try daemon.authctlInBackground([
            "refresh-agent", "shop", "--command-timeout", "600", "--",
            command(in: first, body: "echo backend-fetching >&2; exec sleep 600 2>/dev/null"),
        ])
        defer { hanging.stop() }
        #expect(daemon.waitForSubscribers("shop", count: 1, timeout: .seconds(10)))
        // The token enters its last minute: the first agent claims the refresh and its backend hangs.
        try daemon.set("shop", signer.token(expiringIn: 30))
        #expect(
            hanging.waitForOutput(timeout: .seconds(10)) { $0.contains("backend-fetching") }, "\(hanging.output)")
        let second = try daemon.authctlInBackground(["refresh-agent", "shop", "--", command(in: daemon.root)])
        defer { second.stop() }
        #expect(daemon.waitForSubscribers("shop", count: 2, timeout: .seconds(10)))
        // The second agent heard that the refresh is claimed, and waits.
        #expect(runs(daemon.root).isEmpty)

        hanging.stop(signal: SIGKILL)
        // The claim died with its holder; the second agent refreshes long before any lease could run out.
        #expect(
            daemon.waitForTokenSet("shop", generation: 3), "\(second.output)")
        #expect(runs(daemon.root) == ["shop expiredSoon"])
    }

    @Test func unusableOutputIsAFailureAndNeverLogged() throws {
        let daemon = try DaemonFixture()
        let agent = try daemon.authctlInBackground([
            "refresh-agent", "shop", "--", command(in: daemon.root, body: "echo 'not a token at all'"),
        ])
        defer { agent.stop() }
        // The failure this test means, not any first "trying again".
        #expect(
            agent.waitForOutput(timeout: .seconds(10)) {
                $0.contains("exit status 0, but it printed more than one word")
            }, "\(agent.output)")
        #expect(!agent.output.contains("not a token at all"))
    }

    @Test func theAgentComesBackWithTheDaemon() throws {
        let daemon = try DaemonFixture()
        try daemon.set("shop", signer.token(expiringIn: 3600))
        let agent = try daemon.authctlInBackground(["refresh-agent", "shop", "--", command(in: daemon.root)])
        defer { agent.stop() }
        #expect(daemon.waitForSubscribers("shop", count: 1, timeout: .seconds(10)))
        daemon.daemon.stop(signal: SIGTERM)
        try daemon.daemon.start()
        #expect(
            agent.waitForOutput(timeout: .seconds(20)) { $0.contains("lost the daemon") },
            "\(agent.output)")
        #expect(daemon.waitForSubscribers("shop", count: 1, timeout: .seconds(20)))
        // And acts on what it hears after.
        try daemon.set("shop", signer.token(expiringIn: 30))
        // The agent's token is the third of the group's (the two above first).
        #expect(daemon.waitForTokenSet("shop", generation: 3), "\(agent.output)")
        #expect(runs(daemon.root) == ["shop expiredSoon"])
    }
}
