// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@Suite("authctl set, get, preflight and identify against the daemon", .offPool)
struct TokenCommandTests {
    let signer = TestJWT()

    // MARK: set

    @Test func setReadsTheTokenFromStandardInputAndPrintsGenerationAndExpiry() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(exp: 1_900_000_000, ids: ["registered": "jane"])

        let result = try daemon.authctl(["set", "shop"], input: "  \(token)\n\n")
        #expect(result.status == 0)
        #expect(result.standardError.isEmpty)
        let expected = /Set the token of app group 'shop': generation 1, expires 2030-03-17 17:46:40 \+0000 (.*)\n/
        let relative = result.standardOutput.wholeMatch(of: expected)?.output.1
        #expect(relative?.wholeMatch(of: /\(in \d+d \d+h \d+m \d+s\)/) != nil, "\(result.standardOutput)")
        #expect(try daemon.authctl(["get", "shop"]).standardOutput == token + "\n")
    }

    @Test func setReadsTheTokenFromAFile() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(expiringIn: 3600, ids: ["registered": "jane", "cookie": "c-1"])
        let file = daemon.root.appending("token.jwt")
        try (token + "\n").write(toFile: file, atomically: true, encoding: .utf8)

        let result = try daemon.authctl(["set", "shop", "--file", file, "--json"])
        #expect(result.status == 0)
        let object = try parseJSON(result.standardOutput)
        #expect(object["group"] as? String == "shop")
        #expect(object["generation"] as? Int == 1)
        #expect(object["state"] as? String == "valid")
        #expect(object["customerIds"] as? [String: String] == ["registered": "jane", "cookie": "c-1"])
        #expect((object["expiresAt"] as? Double).map { abs($0 - Date().timeIntervalSince1970 - 3600) < 5 } == true)
        #expect(try daemon.authctl(["get", "shop"]).standardOutput == token + "\n")

        let missing = try daemon.authctl(["set", "shop", "--file", daemon.root.appending("nothing.jwt")])
        #expect(missing.status == 1)
        #expect(missing.standardError.hasPrefix("authctl: cannot open \(daemon.root.appending("nothing.jwt")): "))
    }

    @Test func setRefusesATokenOnTheCommandLineAndSaysWhy() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(expiringIn: 3600)

        let result = try daemon.authctl(["set", "shop", token])
        #expect(result.status == 2)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("authctl: a token on the command line is visible to every user"))
        #expect(result.standardError.contains("standard input"))
        #expect(result.standardError.contains("authctl set shop < token.jwt"))
        #expect(!result.standardError.contains(token))
        // Nothing was stored.
        #expect(try daemon.authctl(["get", "shop"]).status == 3)

        let other = try daemon.authctl(["set", "shop", "something"])
        #expect(other.status == 2)
        #expect(other.standardError.hasPrefix("authctl: unexpected argument 'something'"))
    }

    @Test func aMalformedTokenFailsWithTheDaemonsReasonAndWithoutTheToken() throws {
        let daemon = try DaemonFixture()
        let token = "eyJhbGciOiJIUzUxMiJ9.bm90LWpzb24.c2lnbmF0dXJl"

        let result = try daemon.authctl(["set", "shop"], input: token)
        #expect(result.status == 1)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.hasPrefix("authctl: The token is not a stream JWT (payloadNotJSONObject)"))
        for part in token.split(separator: ".") { #expect(!result.standardError.contains(part)) }

        let empty = try daemon.authctl(["set", "shop"], input: " \n")
        #expect(empty.status == 1)
        #expect(
            empty.standardError
                == "authctl: no token on standard input; pass one like this: authctl set shop < token.jwt\n")
    }

    @Test func setAcceptsAnExpiredTokenWithANote() throws {
        let daemon = try DaemonFixture()
        let result = try daemon.authctl(["set", "shop"], input: signer.token(expiringIn: -60))
        #expect(result.status == 0)
        #expect(result.standardOutput.contains("generation 1, expires "))
        #expect(result.standardOutput.contains(" ago)"))
        #expect(result.standardError.contains("this token has already expired"))
    }

    // MARK: get

    @Test func getPrintsTheTokenTheHeaderOrJSON() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(exp: 1_900_000_000, ids: ["registered": "jane"])
        try daemon.set("shop", token)

        let plain = try daemon.authctl(["get", "shop"])
        #expect(plain.status == 0)
        #expect(plain.standardOutput == token + "\n")
        #expect(plain.standardError.isEmpty)

        let header = try daemon.authctl(["get", "shop", "--header"])
        #expect(header.status == 0)
        #expect(header.standardOutput == "Authorization: Bearer \(token)\n")

        let json = try daemon.authctl(["get", "--json", "shop"])
        #expect(json.status == 0)
        let object = try parseJSON(json.standardOutput)
        #expect(object["group"] as? String == "shop")
        #expect(object["token"] as? String == token)
        #expect(object["generation"] as? Int == 1)
        #expect(object["state"] as? String == "valid")
        #expect(object["expiresAt"] as? Double == 1_900_000_000)
        #expect(object["customerIds"] as? [String: String] == ["registered": "jane"])
    }

    /// get's command line, read by its own reader (GetFastPath) or by ArgumentParser (with --wait, --help, a
    /// repeated option): the same output in any order and spelling.
    @Test func getReadsItsOptionsInAnyOrderAndSpelling() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(exp: 1_900_000_000, ids: ["registered": "jane"])
        try daemon.set("shop", token)
        let socket = daemon.socketPath
        let elsewhere = ["EXPONEA_AUTHD_SOCKET": daemon.root.appending("elsewhere.socket")]
        for arguments in [
            ["get", "shop", "--header"], ["get", "--header", "shop"], ["get", "shop", "--header", "--wait=0"],
            ["get", "shop", "--header", "--header"],
        ] {
            let result = try daemon.authctl(arguments)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
            #expect(result.standardOutput == "Authorization: Bearer \(token)\n", "\(arguments)")
        }
        for arguments in [
            ["get", "shop", "--socket", socket], ["get", "--socket=\(socket)", "shop"],
            ["get", "--socket", socket, "shop", "--wait", "--socket", socket],
        ] {
            let result = try daemon.authctl(arguments, environment: elsewhere)
            #expect(result.status == 0, "\(arguments): \(result.standardError)")
            #expect(result.standardOutput == token + "\n", "\(arguments)")
        }
        let json = try daemon.authctl(["get", "--header", "--json", "shop"])
        #expect(try parseJSON(json.standardOutput)["token"] as? String == token)
        let help = try daemon.authctl(["get", "shop", "--help"])
        #expect(help.status == 0)
        #expect(help.standardOutput.hasPrefix("OVERVIEW: Print an app group's token."))
    }

    @Test func getWithoutATokenExitsWith3() throws {
        let daemon = try DaemonFixture()

        let result = try daemon.authctl(["get", "shop"])
        #expect(result.status == 3)
        #expect(result.standardOutput.isEmpty)
        #expect(
            result.standardError
                == "authctl: app group 'shop' has no token; set one with 'authctl set shop < token.jwt'\n")

        let json = try daemon.authctl(["get", "shop", "--json"])
        #expect(json.status == 3)
        let object = try parseJSON(json.standardOutput)
        #expect(object["token"] is NSNull)
        #expect(object["state"] as? String == "notProvided")
        #expect(object["generation"] as? Int == 0)
        #expect(object["expiresAt"] is NSNull)
        #expect(object["customerIds"] is NSNull)
    }

    @Test func getPrintsAnExpiredTokenButExitsWith3() throws {
        let daemon = try DaemonFixture()
        let expired = signer.token(expiringIn: -30)
        try daemon.set("shop", expired)

        let result = try daemon.authctl(["get", "shop"])
        #expect(result.status == 3)
        #expect(result.standardOutput == expired + "\n")
        #expect(result.standardError.hasPrefix("authctl: the token of app group 'shop' expired at "))
        #expect(!result.standardError.contains(expired))

        // Expiring soon still works.
        let soon = signer.token(expiringIn: 30)
        try daemon.set("shop", soon)
        let json = try daemon.authctl(["get", "shop", "--json"])
        #expect(json.status == 0)
        #expect(try parseJSON(json.standardOutput)["state"] as? String == "expiredSoon")
    }

    // MARK: preflight

    @Test func preflightPrintsStateAndReasonAndExitsWith3WithoutAUsableToken() throws {
        let daemon = try DaemonFixture()

        let none = try daemon.authctl(["preflight", "shop"])
        #expect(none.status == 3)
        #expect(
            none.standardOutput == """
                state:      notProvided
                reason:     notProvided (the group's apps were sent jwtError)
                generation: 0

                """)

        try daemon.set("shop", signer.token(expiringIn: 3600))
        let valid = try daemon.authctl(["preflight", "shop"])
        #expect(valid.status == 0)
        #expect(valid.standardOutput == "state:      valid\nreason:     (none)\ngeneration: 1\n")
        let validJSON = try parseJSON(daemon.authctl(["preflight", "shop", "--json"]).standardOutput)
        #expect(validJSON["state"] as? String == "valid")
        #expect(validJSON["reason"] is NSNull)
        #expect(validJSON["generation"] as? Int == 1)
        #expect(validJSON["group"] as? String == "shop")
        #expect(validJSON["token"] == nil)

        try daemon.set("shop", signer.token(expiringIn: 30))
        let soon = try daemon.authctl(["preflight", "shop", "--json"])
        #expect(soon.status == 0)
        #expect(try parseJSON(soon.standardOutput)["reason"] as? String == "expiredSoon")

        try daemon.set("shop", signer.token(expiringIn: -30))
        let expired = try daemon.authctl(["preflight", "shop", "--json"])
        #expect(expired.status == 3)
        let expiredJSON = try parseJSON(expired.standardOutput)
        #expect(expiredJSON["state"] as? String == "expired")
        #expect(expiredJSON["reason"] as? String == "expired")
        #expect(expiredJSON["generation"] as? Int == 3)
    }

    // MARK: identify

    @Test func identifyWithoutATokenClearsTheStoredOne() throws {
        let daemon = try DaemonFixture()
        try daemon.set("shop", signer.token(expiringIn: 3600))

        let result = try daemon.authctl([
            "identify", "shop", "--id", "registered=jane@example.com", "--id", "cookie=c-1",
        ])
        #expect(result.status == 0)
        #expect(
            result.standardOutput
                == "Identified app group 'shop' as cookie=c-1,registered=jane@example.com (generation 2); "
                + "its token was cleared: set this customer's with 'authctl set shop'\n")
        #expect(try daemon.authctl(["get", "shop"]).status == 3)

        let json = try daemon.authctl(["identify", "shop", "--id", "registered=bob", "--json"])
        #expect(json.status == 0)
        let object = try parseJSON(json.standardOutput)
        #expect(object["group"] as? String == "shop")
        #expect(object["generation"] as? Int == 3)
        #expect(object["customerIds"] as? [String: String] == ["registered": "bob"])
        #expect(object["tokenCleared"] as? Bool == true)
    }

    @Test func identifyWithATokenFromStandardInputStoresIt() throws {
        let daemon = try DaemonFixture()
        let token = signer.token(expiringIn: 3600, ids: ["registered": "jane"])

        let result = try daemon.authctl(
            ["identify", "shop", "--id", "registered=jane", "--token-stdin", "--json"], input: token + "\n")
        #expect(result.status == 0)
        let object = try parseJSON(result.standardOutput)
        #expect(object["tokenCleared"] as? Bool == false)
        #expect(object["generation"] as? Int == 1)
        #expect(try daemon.authctl(["get", "shop"]).standardOutput == token + "\n")

        let text = try daemon.authctl(["identify", "shop", "--id", "registered=jane", "--token-stdin"], input: token)
        #expect(
            text.standardOutput
                == "Identified app group 'shop' as registered=jane with the token from standard input (generation 2)\n")

        let malformed = try daemon.authctl(
            ["identify", "shop", "--id", "registered=jane", "--token-stdin"], input: "a.b")
        #expect(malformed.status == 1)
        #expect(malformed.standardError.hasPrefix("authctl: The token is not a stream JWT (notThreeParts)"))
    }

    @Test(arguments: [
        ([], "authctl: give at least one --id KEY=VALUE"),
        (
            ["--id", "registered"],
            "authctl: --id needs KEY=VALUE, such as registered=jane@example.com, not 'registered'"
        ),
        (["--id", "=jane"], "authctl: --id needs KEY=VALUE, such as registered=jane@example.com, not '=jane'"),
        (["--id", "a=1", "--id", "a=2"], "authctl: --id a is given twice"),
    ])
    func identifyRefusesMalformedIds(ids: [String], message: String) throws {
        let result = try runAuthctl(["identify", "shop"] + ids)
        #expect(result.status == 2)
        #expect(result.standardError.hasPrefix(message + "\n"), "\(result.standardError)")
        #expect(result.standardError.contains("Usage: authctl identify <group> --id <key=value>"))
    }
}
