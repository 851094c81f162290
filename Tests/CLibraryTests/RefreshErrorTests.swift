// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// A token the refresh handler supplies (EXPONEA_AUTH_REFRESH_SUPPLIED) is set by the library after the handler
/// has returned, so the handler cannot see that set fail; `exponea_auth_get_refresh_error` tells the app
/// afterwards (issue 38, part 2). `tests/refresh-error.c` has its handler supply a malformed token, which the
/// daemon refuses, then a valid one for an expired token. On each architecture: arm64 and armhf under qemu-user,
/// against the native daemon.
@Suite("libexponea-auth: the set of a token a refresh handler supplied", .offPool)
struct RefreshErrorTests {
    @Test(arguments: Architecture.allCases)
    func theAppLearnsThatTheTokenItsHandlerSuppliedWasNotStored(on architecture: Architecture) throws {
        let daemon = try DaemonUnderTest()
        let jwt = TestJWT()
        let valid = jwt.token(expiringIn: 3600)
        let program = try CLibrary.testProgram("refresh-error", for: architecture)
        let run = try ChildProcess.run(
            program.executable, program.arguments([daemon.socketPath, "shop"]),
            input: jwt.token(expiringIn: -60) + "\n" + valid + "\n")
        #expect(run.status == 0, "\(run.standardError)")
        let lines = run.standardOutput.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                // Before any handler supplied a token.
                "error 0 generation -1",
                // "not.a-jwt" for the empty group (generation 0): refused, nothing stored.
                "error \(-EBADMSG) generation 0",
                "token \(-ENOKEY)",
                // The valid token for the expired one (generation 1): stored.
                "error 0 generation 1",
                "token \(valid.utf8.count)",
            ], "\(run.standardOutput)\(run.standardError)")
    }
}
