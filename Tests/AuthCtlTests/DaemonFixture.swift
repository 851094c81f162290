// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The real exponea-authd binary on a socket of its own (user mode unless a configuration directory is
/// given), and the built authctl pointed at it through `EXPONEA_AUTHD_SOCKET`. Killed when released.
final class DaemonFixture {
    let daemon: DaemonUnderTest
    var root: TemporaryDirectory { daemon.root }
    var socketPath: String { daemon.socketPath }

    /// - Parameters:
    ///   - configDirectory: Runs the daemon in system mode with this access configuration.
    ///   - arguments: More command-line options for the daemon, such as `--flush-timeout`.
    ///
    /// The daemon logs at debug level, so that ``waitForSubscribers(_:count:)`` has its lines.
    init(configDirectory: String? = nil, arguments: [String] = []) throws {
        daemon = try DaemonUnderTest(
            arguments: ["--log-level", "debug"] + arguments, configDirectory: configDirectory)
    }

    /// The environment authctl runs with.
    var environment: [String: String] {
        ["EXPONEA_AUTHD_SOCKET": socketPath, "TZ": "UTC", "PATH": "/usr/bin:/bin"]
    }

    /// Runs authctl to completion.
    func authctl(_ arguments: [String], input: String = "", environment extra: [String: String] = [:]) throws
        -> ChildProcess.Result
    {
        try ChildProcess.run(
            BuildProducts.executable("authctl"),
            arguments,
            input: input,
            environment: environment.merging(extra) { _, new in new }
        )
    }

    /// Starts authctl in the background (for `watch`).
    func authctlInBackground(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(BuildProducts.executable("authctl"), arguments, environment: environment)
    }

    /// Stores `token` for `group` with `authctl set`.
    @discardableResult
    func set(_ group: String, _ token: String) throws -> ChildProcess.Result {
        let result = try authctl(["set", group], input: token + "\n")
        #expect(result.status == 0, "\(result.standardError)")
        return result
    }

    /// Waits until the daemon has set `group`'s token at `generation`: its operator line "Token set", as it comes.
    func waitForTokenSet(_ group: String, generation: Int, timeout: Duration = .seconds(10)) -> Bool {
        daemon.waitForOutput(timeout: timeout) { output in
            output.split(separator: "\n").contains { line in
                guard line.hasPrefix("info: Token set ") else { return false }
                let fields = Set(line.split(separator: " "))
                return fields.contains("generation=\(generation)") && fields.contains("group=\(group)")
            }
        }
    }

    /// Waits until the daemon has registered `count` subscribers of `group`: its debug line, as it comes.
    func waitForSubscribers(_ group: String, count: Int, timeout: Duration = .seconds(10)) -> Bool {
        daemon.waitForSubscribers(group, count: count, timeout: timeout)
    }
}

/// The JSON object `text` holds; an empty one when it holds none.
func parseJSON(_ text: String) throws -> [String: Any] {
    try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
}

/// Runs authctl without a daemon, with `EXPONEA_AUTHD_SOCKET` pointing nowhere unless `environment` says.
func runAuthctl(_ arguments: [String], input: String = "", environment: [String: String] = [:]) throws
    -> ChildProcess.Result
{
    let base = ["EXPONEA_AUTHD_SOCKET": "/nonexistent/authctl-test/io.socket", "TZ": "UTC", "PATH": "/usr/bin:/bin"]
    return try ChildProcess.run(
        BuildProducts.executable("authctl"),
        arguments,
        input: input,
        environment: base.merging(environment) { _, new in new }
    )
}
