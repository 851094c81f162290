// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@Suite("authctl decode", .offPool)
struct DecodeCommandTests {
    let signer = TestJWT()

    func authctl(_ arguments: [String], input: String) throws -> ChildProcess.Result {
        try ChildProcess.run(BuildProducts.executable("authctl"), arguments, input: input, environment: ["TZ": "UTC"])
    }

    @Test func printsTheClaimsOfATokenOnStandardInput() throws {
        let token = signer.token(exp: 1_900_000_000, ids: ["registered": "alice", "cookie": "c-1"])
        let result = try authctl(["decode"], input: token + "\n")
        #expect(result.status == 0)
        var lines = result.standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 8)
        // The time left depends on when the test runs: check its shape, then the rest exactly.
        let expires = lines.remove(at: 2)
        #expect(expires.hasPrefix("expires:      2030-03-17 17:46:40 +0000 (in "))
        #expect(expires.wholeMatch(of: /.*\(in \d+d \d+h \d+m \d+s\)/) != nil)
        #expect(
            lines == [
                "algorithm:    HS512",
                "key id:       k1",
                "state:        valid",
                "customer ids:",
                "  cookie = c-1",
                "  registered = alice",
                "",
            ]
        )
    }

    @Test func printsJSONForScripts() throws {
        let token = signer.token(exp: 1_000_000_000, ids: ["registered": "bob"])
        let result = try authctl(["decode", "--json"], input: token)
        #expect(result.status == 0)
        let object = try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        #expect(object?["algorithm"] as? String == "HS512")
        #expect(object?["keyID"] as? String == "k1")
        #expect(object?["expiresAt"] as? Double == 1_000_000_000)
        #expect(object?["state"] as? String == "expired")
        #expect(object?["customerIds"] as? [String: String] == ["registered": "bob"])
    }

    @Test func aMalformedTokenFailsWithTheReasonAndWithoutEchoingIt() throws {
        let token = "eyJhbGciOiJIUzUxMiJ9.not-json-at-all.sig"
        let result = try authctl(["decode"], input: token)
        #expect(result.status == 1)
        #expect(result.standardOutput.isEmpty)
        #expect(
            result.standardError
                == "authctl: the token on standard input is not a stream JWT: the payload is not a JSON object\n"
        )
        #expect(!result.standardError.contains(token))
    }

    @Test func helpFitsIn80Columns() throws {
        for arguments in [["--help"], ["decode", "--help"]] {
            let result = try authctl(arguments, input: "")
            #expect(result.status == 0)
            #expect(result.standardOutput.contains("USAGE: authctl"))
            for line in result.standardOutput.split(separator: "\n") { #expect(line.count <= 80, "\(line)") }
        }
    }
}
