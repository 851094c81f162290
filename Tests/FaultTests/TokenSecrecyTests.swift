// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The token never shows in what the daemon prints or in its error replies: one marked token taken through every
/// method and every error path, at the most verbose log level.
@Suite("Fault: the token never shows in logs or errors", .offPool)
struct TokenSecrecyTests {
    /// What identifies the marked token: its customer id and key id are in its claims.
    static let customer = "MARKER-CUSTOMER-5e1f"
    static let keyID = "MARKER-KID-9b07"

    @Test func aMarkedTokenThroughEveryMethodAndErrorPathNeverShowsInTheOutputOrAnError() throws {
        let daemon = try DaemonUnderTest(arguments: ["--log-level", "trace", "--flush-timeout", "0.2"])
        defer { daemon.stop() }
        let jwt = TestJWT(keyID: Self.keyID)
        let token = jwt.token(expiringIn: 30, ids: ["registered": Self.customer])
        let parts = token.split(separator: ".").map(String.init)
        let header = parts[0]
        let payload = parts[1]
        let signature = parts[2]
        // What must not show: the token, its signature, its payload and header.payload, its claims' values.
        let secrets = [token, signature, payload, "\(header).\(payload)", Self.customer, Self.keyID]
        var errorReplies: [String] = []

        let client = try FaultClient(path: daemon.socketPath)
        defer { client.close() }
        let events = try FaultClient(path: daemon.socketPath)
        defer { events.close() }
        try events.send("Subscribe", ["group": "shop"], more: true)
        // Its first event, the group's state, comes once the subscription is registered.
        _ = try events.reply()
        /// Calls `method` and expects the error named, any error for "*", or none for nil.
        func call(_ method: String, _ parameters: [String: Any], error expected: String? = nil) throws {
            try client.send(method, parameters)
            let reply = try client.reply()
            if expected == "*" {
                #expect(reply.error != nil, "\(method): \(reply.text.prefix(300))")
            } else {
                #expect(reply.error == expected, "\(method): \(reply.text.prefix(300))")
            }
            if reply.error != nil { errorReplies.append(reply.text) }
        }

        // Every method, on the happy path (the token is within a minute of expiry: expiredSoon events).
        try call("SetToken", ["group": "shop", "token": token])
        try call("GetToken", ["group": "shop"])
        try call("Preflight", ["group": "shop"])
        try call("ReportAuthFailure", ["group": "shop", "status": 401, "generation": 1, "tokenExpired": true])
        try call("ReportAuthFailure", ["group": "shop", "status": 403, "generation": 1])
        try call("WaitForToken", ["group": "shop", "after": 0, "timeoutMs": 100])
        try call("WaitForToken", ["group": "shop", "after": 1, "timeoutMs": 100])
        try call("ClaimRefresh", ["group": "shop", "generation": 1])
        try call("IdentifyCustomer", ["group": "shop", "customerIds": ["registered": Self.customer], "token": token])
        try call("ListGroups", [:])
        try call("AcknowledgeFlush", ["group": "shop", "flushId": "not-a-flush"])
        for method in ["Anonymize", "StopIntegration", "ClearLocalCustomerData"] {
            try call(method, ["group": "shop"])  // the subscriber does not acknowledge: the clear waits 0.2 s
            try call("SetToken", ["group": "shop", "token": token])
        }
        try call("Subscribe", ["group": "shop"], error: "org.varlink.service.ExpectedMore")

        // Tokens the daemon refuses, each carrying the marked one or its parts.
        let malformed = [
            "Bearer " + token,
            token + ".extra",
            "\(header).\(payload)",
            "\(header).\(payload).\(signature)!",
            "\(header).\(payload)*.\(signature)",
            "\(TestJWT.base64URL(Data("not json \(Self.customer)".utf8))).\(payload).\(signature)",
            "\(header).\(TestJWT.base64URL(Data(#"{"ids":{"registered":"\#(Self.customer)"}}"#.utf8))).\(signature)",
            "\(header).\(TestJWT.base64URL(Data(#"{"exp":"soon","ids":{"r":"\#(Self.customer)"}}"#.utf8))).\(signature)",
            "\(header).\(TestJWT.base64URL(Data(#"{"exp":1e99,"ids":{"r":"\#(Self.customer)"}}"#.utf8))).\(signature)",
            "\(header).\(TestJWT.base64URL(Data(#"{"exp":1,"ids":["\#(Self.customer)"]}"#.utf8))).\(signature)",
            String(repeating: token, count: 80),
            " " + token,
        ]
        for bad in malformed {
            try call("SetToken", ["group": "shop", "token": bad], error: "com.exponea.Auth.MalformedToken")
            try call(
                "IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "x"], "token": bad],
                error: "com.exponea.Auth.MalformedToken")
        }
        // The token where something else belongs.
        try call("SetToken", ["group": token, "token": token], error: "*")
        try call("GetToken", ["group": token], error: "*")
        try call("Preflight", ["group": "shop.\(token)"], error: "*")
        try call("SetToken", ["group": "shop", "token": [token]], error: "org.varlink.service.InvalidParameter")
        try call("AcknowledgeFlush", ["group": "shop", "flushId": token])
        let tooMany = Dictionary(uniqueKeysWithValues: (0..<33).map { ("\($0)-\(token)", token) })
        try call(
            "IdentifyCustomer", ["group": "shop", "customerIds": tooMany], error: "org.varlink.service.InvalidParameter"
        )
        try client.sendRaw(
            Array(#"{"method":"com.exponea.Auth.SetToken","parameters":{"token":"\#(token)""#.utf8) + [0])
        let notJSON = try client.reply()
        #expect(notJSON.error == "org.varlink.service.InvalidParameter")
        errorReplies.append(notJSON.text)

        // A store that cannot be written: the record's name is taken by a directory.
        try FileManager.default.createDirectory(
            atPath: daemon.stateDirectory + "/blocked.token/inside", withIntermediateDirectories: true)
        try call("SetToken", ["group": "blocked", "token": token], error: "com.exponea.Auth.StoreFailure")
        try call(
            "IdentifyCustomer", ["group": "blocked", "customerIds": ["registered": Self.customer], "token": token],
            error: "com.exponea.Auth.StoreFailure")

        // A message over the bound that carries the token, and a connection closed with a reply pending.
        let oversized = try FaultClient(path: daemon.socketPath)
        try? oversized.sendRaw(Array(String(repeating: token, count: 300).utf8))
        #expect(oversized.closedByPeer(within: .seconds(10)))
        oversized.close()
        let gone = try FaultClient(path: daemon.socketPath)
        try gone.send("GetToken", ["group": "shop"])
        gone.close()

        // The expiry timer fires, the daemon restarts with the token stored and loads it (debug log), then stops.
        try call("SetToken", ["group": "soon", "token": jwt.token(expiringIn: 1, ids: ["registered": Self.customer])])
        #expect(
            daemon.waitForOutput { output in
                output.split(separator: "\n").contains { $0.contains("group=soon") && $0.contains("reason=expired") }
            })
        #expect(daemon.stop(signal: SIGTERM) == 0)
        try daemon.start()
        let again = try FaultClient(path: daemon.socketPath)
        try again.call("GetToken", ["group": "shop"])
        again.close()
        #expect(daemon.stop(signal: SIGTERM) == 0)

        let output = daemon.outputOfEveryRun
        #expect(output.contains("debug: Loaded app group"), "not the verbose log")
        #expect(output.contains("Cannot store the token"))
        #expect(output.contains("a message is longer than"))
        for secret in secrets {
            let printed = output.components(separatedBy: "\n").filter { $0.contains(secret) }
            #expect(printed.isEmpty, "the daemon printed \(secret.prefix(24))…: \(printed.prefix(3))")
            let replies = errorReplies.filter { $0.contains(secret) }
            #expect(replies.isEmpty, "an error reply has \(secret.prefix(24))…: \(replies.prefix(3))")
        }
        #expect(errorReplies.count >= 2 * malformed.count + 6)
        print("TokenSecrecy: \(errorReplies.count) error replies and \(output.utf8.count) bytes of log checked")
    }

    @Test func theAuditOfEveryDaemonsOutputFindsATokenItPrints() throws {
        let token = TestJWT().token(expiringIn: 60)
        let signature = String(token.split(separator: ".")[2])
        #expect(TestJWT.mintedSignatures(in: "info: got \(token) from a client") == [signature])
        #expect(TestJWT.mintedSignatures(in: "authd.sig=\(signature);") == [signature])
        #expect(TestJWT.mintedSignatures(in: "in a longer run: x\(signature)y") == [signature])
        // A token nobody minted here (same shape) is not reported.
        let foreign = TestJWT(secret: "another-secret-of-at-least-64-bytes-for-hs512-0123456789abcdefgh")
        var parts = foreign.token(expiringIn: 60).split(separator: ".").map(String.init)
        parts[2] = String(parts[2].reversed())
        #expect(TestJWT.mintedSignatures(in: parts.joined(separator: ".")).isEmpty)
        // A program named as the daemon, or told to, that prints a token is a test issue when it stops.
        withKnownIssue {
            let process = try BackgroundProcess("/bin/echo", ["leaked:", token], auditsTokens: true)
            #expect(process.waitForExit())
            process.stop()
        }
    }
}
