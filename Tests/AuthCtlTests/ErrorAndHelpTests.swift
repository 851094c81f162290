// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@Suite("authctl exit codes, help and completions", .offPool)
struct ErrorAndHelpTests {
    static let commands = [
        "status", "list", "whoami", "get", "set", "preflight", "identify", "anonymize", "stop", "clear", "watch",
        "metrics",
        "decode", "mint", "refresh-agent",
    ]

    @Test func anUnreachableDaemonFailsFastWith69AndSaysHowToStartIt() throws {
        let directory = try TemporaryDirectory(prefix: "authctl-test")
        defer { directory.remove() }
        let socket = directory.appending("io.socket")

        let start = ContinuousClock.now
        let viaOption = try runAuthctl(["get", "shop", "--socket", socket])
        #expect(ContinuousClock.now - start < .seconds(3))
        #expect(viaOption.status == 69)
        #expect(viaOption.standardOutput.isEmpty)
        #expect(viaOption.standardError.hasPrefix("authctl: exponea-authd is not reachable at \(socket) ("))
        #expect(viaOption.standardError.contains("start it with 'exponea-authd --user'"))

        let viaEnvironment = try runAuthctl(["status"], environment: ["EXPONEA_AUTHD_SOCKET": socket])
        #expect(viaEnvironment.status == 69)
        #expect(viaEnvironment.standardError.hasPrefix("authctl: exponea-authd is not reachable at \(socket) ("))
    }

    @Test(arguments: [
        (["get"], "authctl: Missing expected argument '<group>'"),
        (["get", "shop", "--bogus"], "authctl: Unknown option '--bogus'"),
        (["get", "../etc"], "authctl: '../etc' is not an app group name: "),
        (["set", ".hidden"], "authctl: '.hidden' is not an app group name: "),
        (["frobnicate"], "authctl: Unexpected argument 'frobnicate'"),
        (["status", "--socket", ""], "authctl: --socket needs a path"),
        // The reader of get and status (FastCommandLine) leaves each of these to ArgumentParser, with its message.
        (["get", "shop", "--socket", ""], "authctl: --socket needs a path"),
        (["get", "shop", "--socket="], "authctl: Missing value for '--socket <path>'"),
        (["get", "shop", "--socket"], "authctl: Missing value for '--socket <path>'"),
        (["get", "shop", "news"], "authctl: Unexpected argument 'news'"),
        (["get", "shop", "-x"], "authctl: Unknown option '-x'"),
        (["status", "news"], "authctl: Unexpected argument 'news'"),
        (["status", "--header"], "authctl: Unknown option '--header'"),
    ])
    func aWrongCommandLineExitsWith2(arguments: [String], message: String) throws {
        let result = try runAuthctl(arguments)
        #expect(result.status == 2)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix(message), "\(result.standardError)")
        #expect(result.standardError.contains("Usage: authctl"))
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run authctl as another user"))
    func aUserTheConfigurationDoesNotNameGets77() throws {
        let config = try TemporaryDirectory(prefix: "authctl-etc")
        defer { config.remove() }
        try "[AppGroup]\nName=shop\nUsers=65534\n".write(
            toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        let daemon = try DaemonFixture(configDirectory: config.path)

        func asNobody(_ arguments: [String], socket: String) throws -> ChildProcess.Result {
            try ChildProcess.run(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", BuildProducts.executable("authctl")]
                    + arguments + ["--socket", socket],
                environment: ["TZ": "UTC", "PATH": "/usr/bin:/bin"]
            )
        }

        let refused = try asNobody(["get", "news"], socket: daemon.socketPath)
        #expect(refused.status == 77)
        #expect(refused.standardError == "authctl: This user may not use app group 'news'; see exponea-authd.conf(5)\n")

        let allowed = try asNobody(["get", "shop"], socket: daemon.socketPath)
        #expect(allowed.status == 3, "\(allowed.standardError)")

        // A socket this user may not open at all.
        let privateDirectory = try TemporaryDirectory(prefix: "authctl-private")
        defer { privateDirectory.remove() }
        let link = privateDirectory.appending("io.socket")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: daemon.socketPath)
        let unreachable = try asNobody(["status"], socket: link)
        #expect(unreachable.status == 77)
        #expect(unreachable.standardError.hasPrefix("authctl: Not allowed to connect to \(link)"))
    }

    @Test func everyCommandHasHelpThatFitsIn80Columns() throws {
        for arguments in [["--help"], ["help", "set"]] + Self.commands.map({ [$0, "--help"] }) {
            let result = try runAuthctl(arguments)
            #expect(result.status == 0, "\(arguments)")
            #expect(result.standardOutput.contains("USAGE: authctl"), "\(arguments)")
            for line in result.standardOutput.split(separator: "\n") { #expect(line.count <= 80, "\(line)") }
        }
        let root = try runAuthctl(["--help"]).standardOutput
        for command in Self.commands { #expect(root.contains("  \(command) "), "\(command)") }
        #expect(root.contains("69 exponea-authd is not"))
        #expect(root.contains("--generate-completion-script"))
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func generatesShellCompletions(shell: String) throws {
        let result = try runAuthctl(["--generate-completion-script", shell])
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("authctl"))
        for command in ["watch", "preflight", "identify"] { #expect(result.standardOutput.contains(command)) }
    }
}
