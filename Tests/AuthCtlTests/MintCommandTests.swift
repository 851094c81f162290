// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Crypto
import Foundation
import Testing

@Suite("authctl mint", .offPool)
struct MintCommandTests {
    /// A secret file of this user with `mode`.
    func secretFile(_ directory: TemporaryDirectory, mode: mode_t = 0o600, bytes: String = "dev-secret\n") throws
        -> String
    {
        let path = directory.appending("stream.key")
        try Data(bytes.utf8).write(to: URL(fileURLWithPath: path))
        #expect(chmod(path, mode) == 0)
        return path
    }

    func parts(_ token: String) throws -> (header: [String: Any], payload: [String: Any], input: Data, mac: Data) {
        let pieces = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        try #require(pieces.count == 3)
        func decode(_ text: String) throws -> Data {
            try #require(TestJWT.decodeBase64URL(text))
        }
        let header = try JSONSerialization.jsonObject(with: decode(pieces[0])) as? [String: Any] ?? [:]
        let payload = try JSONSerialization.jsonObject(with: decode(pieces[1])) as? [String: Any] ?? [:]
        return (header, payload, Data("\(pieces[0]).\(pieces[1])".utf8), try decode(pieces[2]))
    }

    @Test(arguments: ["HS256", "HS384", "HS512"])
    func aMintedTokenVerifiesWithHMACOverTheSecretFileBytes(alg: String) throws {
        let directory = try TemporaryDirectory(prefix: "authctl-mint")
        defer { directory.remove() }
        let path = try secretFile(directory)
        let result = try runAuthctl([
            "mint", "--secret-file", path, "--kid", "k7", "--id", "registered=jane", "--id", "cookie=c 1",
            "--ttl", "300", "--alg", alg,
        ])
        #expect(result.status == 0, "\(result.standardError)")
        let token = result.standardOutput.trimmingCharacters(in: .newlines)
        let (header, payload, input, mac) = try parts(token)
        #expect(header["alg"] as? String == alg)
        #expect(header["typ"] as? String == "JWT")
        #expect(header["kid"] as? String == "k7")
        #expect(payload["ids"] as? [String: String] == ["registered": "jane", "cookie": "c 1"])
        let exp = try #require(payload["exp"] as? Int)
        let iat = try #require(payload["iat"] as? Int)
        #expect(exp - iat == 300)
        // Keyed with the file's bytes exactly, its newline included.
        let key = SymmetricKey(data: Data("dev-secret\n".utf8))
        let valid: Bool
        switch alg {
        case "HS256": valid = HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: input, using: key)
        case "HS384": valid = HMAC<SHA384>.isValidAuthenticationCode(mac, authenticating: input, using: key)
        default: valid = HMAC<SHA512>.isValidAuthenticationCode(mac, authenticating: input, using: key)
        }
        #expect(valid)
        let wrongKey = SymmetricKey(data: Data("dev-secret".utf8))
        #expect(!HMAC<SHA512>.isValidAuthenticationCode(mac, authenticating: input, using: wrongKey))
    }

    @Test func aMintedTokenIsAcceptedByTheDaemon() throws {
        let fixture = try DaemonFixture()
        let path = try secretFile(fixture.root)
        let minted = try fixture.authctl(["mint", "--secret-file", path, "--id", "registered=jane"])
        #expect(minted.status == 0)
        let set = try fixture.authctl(["set", "shop", "--json"], input: minted.standardOutput)
        #expect(set.status == 0, "\(set.standardError)")
        let got = try fixture.authctl(["get", "shop"])
        #expect(got.standardOutput == minted.standardOutput)
    }

    @Test(arguments: [0o644, 0o640, 0o604, 0o660] as [mode_t])
    func aSecretFileOthersMayReadIsRefused(mode: mode_t) throws {
        let directory = try TemporaryDirectory(prefix: "authctl-mint")
        defer { directory.remove() }
        let path = try secretFile(directory, mode: mode)
        let result = try runAuthctl(["mint", "--secret-file", path])
        #expect(result.status == 1)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("may be read by others"))
        #expect(result.standardError.contains("chmod 600 \(path)"))
    }

    @Test func aSecretFileOfAnotherUserIsRefused() throws {
        let directory = try TemporaryDirectory(prefix: "authctl-mint")
        defer { directory.remove() }
        let path = try secretFile(directory)
        #expect(chown(path, 65534, 65534) == 0)
        let result = try runAuthctl(["mint", "--secret-file", path])
        #expect(result.status == 1)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains("belongs to uid 65534"))
    }

    @Test(
        arguments: [
            (["--ttl", "0"], "--ttl"), (["--ttl", "7776001"], "--ttl"), (["--id", "novalue"], "KEY=VALUE"),
            (["--id", "=x"], "KEY=VALUE"), (["--id", "a=1", "--id", "a=2"], "twice"), (["--alg", "none"], "alg"),
        ] as [([String], String)])
    func aWrongCommandLineExitsWith2(extra: [String], says: String) throws {
        let directory = try TemporaryDirectory(prefix: "authctl-mint")
        defer { directory.remove() }
        let path = try secretFile(directory)
        let result = try runAuthctl(["mint", "--secret-file", path] + extra)
        #expect(result.status == 2)
        #expect(result.standardOutput.isEmpty)
        #expect(result.standardError.contains(says), "\(result.standardError)")
    }
}
