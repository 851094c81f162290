// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The installed `/usr/bin/authctl` is a symlink to the one binary, `/usr/bin/exponea-authd` (scripts/install): the
/// name it is run by chooses the role. Here the built exponea-authd runs through symlinks, as it is installed.
@Suite("exponea-authd is authctl when run by that name", .offPool)
struct MultiCallTests {
    /// A symlink named `name` in `directory` to the built exponea-authd.
    static func link(_ name: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.appending(name)
        try FileManager.default.createSymbolicLink(
            atPath: path, withDestinationPath: BuildProducts.executable("exponea-authd"))
        return path
    }

    @Test func runAsAuthctlItSetsAndGetsATokenAndSpeaksAsAuthctl() throws {
        let daemon = try DaemonFixture()
        let authctl = try Self.link("authctl", in: daemon.root)
        let token = TestJWT().token(expiringIn: 3600)

        // ArgumentParser's path (set), then the fast command line (get, status).
        let set = try ChildProcess.run(authctl, ["set", "shop"], input: token + "\n", environment: daemon.environment)
        #expect(set.status == 0, "\(set.standardError)")
        #expect(set.standardOutput.hasPrefix("Set the token of app group 'shop': generation 1"))
        let get = try ChildProcess.run(authctl, ["get", "shop"], environment: daemon.environment)
        #expect(get.status == 0, "\(get.standardError)")
        #expect(get.standardOutput == token + "\n")
        let status = try ChildProcess.run(authctl, ["status", "--json"], environment: daemon.environment)
        #expect(status.status == 0, "\(status.standardError)")
        #expect(try parseJSON(status.standardOutput)["product"] as? String == "exponea-authd")

        let help = try ChildProcess.run(authctl, ["--help"], environment: daemon.environment)
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("USAGE: authctl <subcommand>"))
        let wrong = try ChildProcess.run(authctl, ["frobnicate"], environment: daemon.environment)
        #expect(wrong.status == 2)
        #expect(wrong.standardError.hasPrefix("authctl: Unexpected argument 'frobnicate'"))
    }

    @Test(arguments: ["exponea-authd", "authd", "authctl.old"])
    func anyOtherNameIsTheDaemon(name: String) throws {
        let directory = try TemporaryDirectory(prefix: "authd-multicall")
        defer { directory.remove() }
        let program = try Self.link(name, in: directory)

        let help = try ChildProcess.run(program, ["--help"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("USAGE: exponea-authd [--user]"), "\(help.standardOutput)")
        // A subcommand of authctl is no argument of the daemon's.
        let status = try ChildProcess.run(program, ["status"], environment: ["PATH": "/usr/bin:/bin"])
        #expect(status.status == 64)
        #expect(status.standardError.contains("Unexpected argument 'status'"), "\(status.standardError)")
    }
}
