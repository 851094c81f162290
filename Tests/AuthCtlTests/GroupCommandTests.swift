// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@Suite("authctl status, list, anonymize, stop and clear against the daemon", .offPool)
struct GroupCommandTests {
    let signer = TestJWT()

    @Test func statusSaysWhichDaemonAnswersWhereAndHowManyGroups() throws {
        let daemon = try DaemonFixture()
        try daemon.set("shop", signer.token(expiringIn: 3600))
        _ = try daemon.authctl(["identify", "news", "--id", "cookie=c"])

        let text = try daemon.authctl(["status"])
        #expect(text.status == 0)
        let lines = text.standardOutput.split(separator: "\n").map(String.init)
        #expect(lines.count == 4)
        #expect(lines.first?.wholeMatch(of: /daemon:     exponea-authd \S+ \(Bloomreach\)/) != nil, "\(lines)")
        #expect(lines.dropFirst().first == "socket:     \(daemon.socketPath)")
        #expect(lines.dropFirst(2).first?.hasPrefix("interfaces: ") == true)
        #expect(lines.dropFirst(2).first?.contains("com.exponea.Auth") == true)
        #expect(lines.last == "groups:     2 (1 with a token)")

        let json = try daemon.authctl(["status", "--json"])
        #expect(json.status == 0)
        let object = try parseJSON(json.standardOutput)
        #expect(object["product"] as? String == "exponea-authd")
        #expect(object["vendor"] as? String == "Bloomreach")
        #expect(object["version"] is String)
        #expect(object["socket"] as? String == daemon.socketPath)
        #expect((object["interfaces"] as? [String])?.contains("com.exponea.Auth") == true)
        #expect(object["groups"] as? Int == 2)
        #expect(object["groupsWithToken"] as? Int == 1)
    }

    /// status takes its counts from the daemon (CountGroups): they follow every change, and match what list shows.
    @Test func statusCountsWhatListShows() throws {
        let daemon = try DaemonFixture()
        func counts() throws -> (groups: Int?, withToken: Int?) {
            let status = try daemon.authctl(["status", "--json"])
            #expect(status.status == 0, "\(status.standardError)")
            let object = try parseJSON(status.standardOutput)
            let listed = try parseJSON(daemon.authctl(["list", "--json"]).standardOutput)["groups"] as? [[String: Any]]
            #expect(object["groups"] as? Int == listed?.count)
            #expect(object["groupsWithToken"] as? Int == listed?.count { $0["hasToken"] as? Bool == true })
            return (object["groups"] as? Int, object["groupsWithToken"] as? Int)
        }
        #expect(try counts() == (0, 0))
        for group in ["a", "b", "c"] { try daemon.set(group, signer.token(expiringIn: 3600)) }
        try daemon.set("expired", signer.token(exp: 1_000_000_000))
        _ = try daemon.authctl(["identify", "news", "--id", "cookie=c"])
        #expect(try counts() == (5, 4))
        #expect(try daemon.authctl(["clear", "b"]).status == 0)
        #expect(try daemon.authctl(["anonymize", "c"]).status == 0)
        #expect(try counts() == (5, 2))
        #expect(try daemon.authctl(["status"]).standardOutput.hasSuffix("groups:     5 (2 with a token)\n"))
    }

    @Test func theSocketOptionOverridesTheEnvironment() throws {
        let daemon = try DaemonFixture()
        let result = try daemon.authctl(
            ["status", "--json", "--socket", daemon.socketPath],
            environment: ["EXPONEA_AUTHD_SOCKET": daemon.root.appending("elsewhere.socket")]
        )
        #expect(result.status == 0)
        #expect(try parseJSON(result.standardOutput)["socket"] as? String == daemon.socketPath)
        // Read by authctl's own reader of status, or by ArgumentParser (a repeated option): the same.
        for arguments in [["status", "--socket=\(daemon.socketPath)"], ["status", "--json", "--json"]] {
            let other = try daemon.authctl(arguments)
            #expect(other.status == 0, "\(arguments): \(other.standardError)")
            #expect(other.standardOutput.contains(daemon.socketPath), "\(arguments)")
        }
    }

    @Test func listPrintsATableOrJSON() throws {
        let daemon = try DaemonFixture()
        let empty = try daemon.authctl(["list"])
        #expect(empty.status == 0)
        #expect(empty.standardOutput == "No app groups.\n")
        #expect(try parseJSON(daemon.authctl(["list", "--json"]).standardOutput)["groups"] as? [Any] != nil)

        try daemon.set("com.example.shop", signer.token(exp: 1_900_000_000))
        try daemon.set("com.example.shop", signer.token(exp: 1_900_000_000))
        _ = try daemon.authctl(["identify", "news", "--id", "cookie=c"])

        let table = try daemon.authctl(["list"])
        #expect(table.status == 0)
        #expect(
            table.standardOutput == """
                GROUP             STATE        EXPIRES                    GENERATION  SUBSCRIBERS
                com.example.shop  valid        2030-03-17 17:46:40 +0000  2           0
                news              notProvided  -                          1           0

                """)

        let json = try daemon.authctl(["list", "--json"])
        #expect(json.status == 0)
        let groups = try parseJSON(json.standardOutput)["groups"] as? [[String: Any]] ?? []
        #expect(groups.count == 2)
        #expect(groups.first?["name"] as? String == "com.example.shop")
        #expect(groups.first?["hasToken"] as? Bool == true)
        #expect(groups.first?["state"] as? String == "valid")
        #expect(groups.first?["expiresAt"] as? Double == 1_900_000_000)
        #expect(groups.first?["generation"] as? Int == 2)
        #expect(groups.first?["subscribers"] as? Int == 0)
        #expect(groups.last?["name"] as? String == "news")
        #expect(groups.last?["hasToken"] as? Bool == false)
        #expect(groups.last?["expiresAt"] is NSNull)
    }

    @Test(arguments: [
        ("anonymize", "Anonymized", "anonymize"),
        ("stop", "Stopped", "stopIntegration"),
    ])
    func clearingCommandsRemoveTheToken(command: String, verb: String, cause: String) throws {
        let daemon = try DaemonFixture()
        try daemon.set("shop", signer.token(expiringIn: 3600))

        let text = try daemon.authctl([command, "shop"])
        #expect(text.status == 0)
        #expect(text.standardOutput == "\(verb) app group 'shop': its token and customer ids are cleared\n")
        #expect(text.standardError.isEmpty)
        #expect(try daemon.authctl(["get", "shop"]).status == 3)

        try daemon.set("shop", signer.token(expiringIn: 3600))
        let json = try daemon.authctl([command, "shop", "--json"])
        #expect(json.status == 0)
        #expect(
            try parseJSON(json.standardOutput) as NSDictionary == [
                "group": "shop", "cause": cause, "asked": 0, "unconfirmed": [Any](),
            ])
        let after = try daemon.authctl(["get", "shop", "--json"])
        #expect(after.status == 3)
        #expect(try parseJSON(after.standardOutput)["generation"] as? Int == 4)
    }

    /// R9: clear is the wipe, with no flush.
    @Test func clearWipesWithoutAFlush() throws {
        let daemon = try DaemonFixture(arguments: ["--flush-timeout", "60"])
        try daemon.set("shop", signer.token(expiringIn: 3600))
        // An app that would never acknowledge a flush: clear does not ask it.
        let app = try UnixClient(path: daemon.socketPath)
        defer { app.close() }
        try app.send(#"{"method":"com.exponea.Auth.Subscribe","more":true,"parameters":{"group":"shop"}}"#)
        #expect(try app.receiveReply().contains(#""kind":"state""#))

        let text = try daemon.authctl(["clear", "shop"])
        #expect(text.status == 0)
        #expect(
            text.standardOutput
                == "Cleared app group 'shop': its token and customer ids are gone, nothing was flushed\n")
        #expect(try app.receiveReply().contains(#""cause":"clearLocalCustomerData""#))
        let json = try daemon.authctl(["clear", "shop", "--json"])
        #expect(
            try parseJSON(json.standardOutput) as NSDictionary == ["group": "shop", "cause": "clearLocalCustomerData"])
    }

    /// An app that does not confirm its flush: the group is cleared, authctl names the app and exits 4.
    @Test(arguments: ["anonymize", "stop"])
    func anUnconfirmedFlushIsReportedWithExitStatus4(command: String) throws {
        let daemon = try DaemonFixture(arguments: ["--flush-timeout", "0.3"])
        try daemon.set("shop", signer.token(expiringIn: 3600))
        let app = try UnixClient(path: daemon.socketPath)
        defer { app.close() }
        try app.send(#"{"method":"com.exponea.Auth.Subscribe","more":true,"parameters":{"group":"shop"}}"#)
        #expect(try app.receiveReply().contains(#""kind":"state""#))

        let text = try daemon.authctl([command, "shop"])
        #expect(text.status == 4)
        #expect(text.standardOutput.hasSuffix("its token and customer ids are cleared\n"))
        #expect(text.standardError.contains("the app with pid \(getpid()) did not confirm in time"))
        #expect(text.standardError.contains("1 of 1 apps of 'shop' did not confirm their flush"))
        #expect(try daemon.authctl(["get", "shop"]).status == 3)

        try daemon.set("shop", signer.token(expiringIn: 3600))
        let json = try daemon.authctl([command, "shop", "--json"])
        #expect(json.status == 4)
        let object = try parseJSON(json.standardOutput)
        #expect(object["asked"] as? Int == 1)
        let unconfirmed = object["unconfirmed"] as? [[String: Any]] ?? []
        #expect(unconfirmed.count == 1)
        #expect(unconfirmed.first?["pid"] as? Int == Int(getpid()))
        #expect(unconfirmed.first?["reason"] as? String == "timedOut")
    }
}
