// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import AuthTestKit
import Foundation
import Testing

/// A client of another user calls every method of `com.exponea.Auth` on an app group that is not its own:
/// each call is refused with PermissionDenied, changes nothing, and no reply tells it anything about the group's
/// token or the other groups.
@Suite("Fault: another user's app group", .offPool)
struct ForeignUserTests {
    /// The group of uid 4242, which the client (uid 65534) calls.
    static let vault = "vault"
    /// The client's own group.
    static let lobby = "lobby"
    /// A third group, of uid 4343, that the client never names.
    static let neighbour = "neighbour-of-vault-owner"

    /// The calls on `group`: every method of the interface (the switch makes a new method a compile error here).
    static func calls(on group: String, token: String) -> [(method: AuthInterface.Method, parameters: [String: Any])] {
        AuthInterface.Method.allCases.map { method in
            let parameters: [String: Any] =
                switch method {
                case .setToken: ["group": group, "token": token]
                case .getToken, .preflight, .anonymize, .stopIntegration, .clearLocalCustomerData, .subscribe:
                    ["group": group]
                case .reportAuthFailure: ["group": group, "status": 401, "generation": 1, "tokenExpired": true]
                case .waitForToken: ["group": group, "after": 0, "timeoutMs": 200]
                case .identifyCustomer: ["group": group, "customerIds": ["registered": "intruder"], "token": token]
                case .acknowledgeFlush: ["group": group, "flushId": "00000000-0000-0000-0000-000000000000"]
                case .claimRefresh, .releaseRefresh: ["group": group, "generation": 1]
                case .listGroups, .countGroups, .whoAmI: [:]
                }
            return (method, parameters)
        }
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run a client as another user"))
    func everyMethodOnAnotherUsersGroupIsRefusedAndTellsNothing() throws {
        let config = try TemporaryDirectory(prefix: "authd-etc")
        defer { config.remove() }
        try """
        [AppGroup]
        Name=\(Self.vault)
        Users=4242

        [AppGroup]
        Name=\(Self.lobby)
        Users=65534

        [AppGroup]
        Name=\(Self.neighbour)
        Users=4343
        """.write(toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        let daemon = try DaemonUnderTest(configDirectory: config.path)
        defer { daemon.stop() }

        let secretJWT = TestJWT(keyID: "vault-kid-7f3a")
        let secret = secretJWT.token(expiringIn: 3600, ids: ["registered": "vault-customer-91c2"])
        let lobbyToken = TestJWT().token(expiringIn: 3600, ids: ["registered": "lobby-customer"])
        let root = try FaultClient(path: daemon.socketPath)
        defer { root.close() }
        try root.call("SetToken", ["group": Self.vault, "token": secret])
        try root.call("SetToken", ["group": Self.neighbour, "token": secret])
        try root.call("SetToken", ["group": Self.lobby, "token": lobbyToken])

        // The intruder's own token is one the daemon would accept.
        let intruderToken = TestJWT().token(expiringIn: 3600, ids: ["registered": "intruder"])
        let calls = Self.calls(on: Self.vault, token: intruderToken)
        let replies = try Self.asNobody(
            calls.map { (qualified: $0.method.qualifiedName, parameters: $0.parameters) }
                + [(qualified: AuthInterface.Method.getToken.qualifiedName, parameters: ["group": Self.lobby])],
            socket: daemon.socketPath)
        try #require(replies.count == calls.count + 1)

        let parts = secret.split(separator: ".").map(String.init)
        let secrets = [secret, parts[1], parts[2], "vault-customer-91c2", "vault-kid-7f3a", Self.neighbour]
        for ((method, _), text) in zip(calls, replies) {
            let reply = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
            if method == .listGroups {
                // Not refused, but it lists the caller's group only.
                let groups = (reply["parameters"] as? [String: Any])?["groups"] as? [[String: Any]] ?? []
                #expect(groups.map { $0["name"] as? String } == [Self.lobby], "\(text)")
                #expect(!text.contains(Self.vault), "ListGroups names the vault: \(text)")
            } else if method == .whoAmI {
                // Not refused, but it names the caller's group only, with the rule that allows it.
                let seen = reply["parameters"] as? [String: Any] ?? [:]
                let groups = seen["appGroups"] as? [[String: Any]] ?? []
                #expect(groups.map { $0["name"] as? String } == [Self.lobby], "\(text)")
                #expect(groups.first?["rules"] as? [String] == ["Users=65534"], "\(text)")
                #expect(seen["uid"] as? Int == 65534, "\(text)")
                #expect(!(seen["everyGroup"] is String), "\(text)")
            } else if method == .countGroups {
                // Not refused, but it counts the caller's group only.
                let counts = reply["parameters"] as? [String: Any] ?? [:]
                #expect(counts["groups"] as? Int == 1, "\(text)")
                #expect(counts["withToken"] as? Int == 1, "\(text)")
            } else {
                #expect(reply["error"] as? String == "com.exponea.Auth.PermissionDenied", "\(method): \(text)")
                #expect(reply["parameters"] as? [String: String] == ["group": Self.vault], "\(method): \(text)")
            }
            for secret in secrets { #expect(!text.contains(secret), "\(method) tells \(secret.prefix(20)): \(text)") }
        }
        // The same user is served on its own group: the refusals are about the group, not the connection.
        let own = try JSONSerialization.jsonObject(with: Data(replies.last!.utf8)) as? [String: Any] ?? [:]
        #expect((own["parameters"] as? [String: Any])?["token"] as? String == lobbyToken, "\(replies.last!)")

        // Nothing changed: the token, its generation, no subscriber, no claim.
        let vault = try root.call("GetToken", ["group": Self.vault])
        #expect(vault["token"] as? String == secret)
        #expect(vault["generation"] as? Int == 1)
        let groups = try root.call("ListGroups")["groups"] as? [[String: Any]] ?? []
        #expect(groups.first { $0["name"] as? String == Self.vault }?["subscribers"] as? Int == 0)
        #expect(try root.call("ClaimRefresh", ["group": Self.vault, "generation": 1])["granted"] as? Bool == true)
        // Logged, once per user and interval with a count: not a line per call.
        #expect(daemon.waitForOutput { $0.contains("Permission denied") })
        let printed = daemon.output.contains("vault-customer-91c2")
        #expect(!printed, "the daemon printed the vault's customer id")
    }

    /// Runs `calls` as uid 65534 (each on a connection of its own) and returns the replies as sent.
    static func asNobody(_ calls: [(qualified: String, parameters: [String: Any])], socket: String) throws -> [String] {
        let messages = calls.map { call -> [String: Any] in
            var message: [String: Any] = ["method": call.qualified, "parameters": call.parameters]
            if call.qualified.hasSuffix(".Subscribe") { message["more"] = true }
            return message
        }
        let input = String(decoding: try JSONSerialization.data(withJSONObject: messages), as: UTF8.self)
        let script = """
            import json, socket, sys
            replies = []
            for message in json.load(sys.stdin):
                connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                connection.settimeout(10)
                connection.connect(sys.argv[1])
                connection.sendall(json.dumps(message).encode() + b"\\0")
                data = b""
                while not data.endswith(b"\\0"):
                    chunk = connection.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                connection.close()
                replies.append(data.rstrip(b"\\0").decode())
            json.dump(replies, sys.stdout)
            """
        let result = try ChildProcess.run(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script, socket],
            input: input,
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/"]
        )
        guard result.status == 0 else { throw ClientFailure(message: result.standardError) }
        return try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String] ?? []
    }

    struct ClientFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { "the client as uid 65534 failed: \(message)" }
    }
}
