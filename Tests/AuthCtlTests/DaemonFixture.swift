import AuthTestKit
import Foundation
import Testing

/// The real exponea-authd binary on a socket of its own (user mode unless a configuration directory is
/// given), and the built authctl pointed at it through `EXPONEA_AUTHD_SOCKET`. Killed when released.
final class DaemonFixture {
    let root: TemporaryDirectory
    let notify: NotifySocket
    private(set) var process: BackgroundProcess!
    var socketPath: String { root.appending("io.socket") }
    var stateDirectory: String { root.appending("state") }

    /// - Parameter configDirectory: Runs the daemon in system mode with this access configuration.
    init(configDirectory: String? = nil) throws {
        root = try TemporaryDirectory(prefix: "authctl-test")
        notify = try NotifySocket()
        let credentials = root.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: false)
        try Data((0..<32).map { UInt8($0) }).write(
            to: URL(fileURLWithPath: credentials + "/exponea-authd.store-key"))
        var arguments = ["--log-target", "console", "--state-directory", stateDirectory, "--socket", socketPath]
        if let configDirectory {
            // Other users must reach the socket.
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.path)
            arguments += ["--config-directory", configDirectory]
        } else {
            arguments.insert("--user", at: 0)
        }
        process = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            arguments,
            environment: [
                "HOME": root.path, "PATH": "/usr/bin:/bin", "NOTIFY_SOCKET": notify.path,
                "CREDENTIALS_DIRECTORY": credentials,
            ]
        )
        guard notify.receive(containing: "READY=1") != nil else {
            throw StartFailure(output: process.output)
        }
    }

    deinit {
        process.stop()
        root.remove()
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

    /// How many subscribers `group` has, as `authctl list --json` says.
    func subscribers(_ group: String) throws -> Int {
        let list = try parseJSON(authctl(["list", "--json"]).standardOutput)
        let groups = list["groups"] as? [[String: Any]] ?? []
        return groups.first { $0["name"] as? String == group }?["subscribers"] as? Int ?? 0
    }

    struct StartFailure: Error, CustomStringConvertible {
        var output: String
        var description: String { "exponea-authd did not become ready:\n\(output)" }
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
