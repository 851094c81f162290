// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// `--timeout`: authctl does not hang on a daemon that accepts the connection but does not answer (issue 17.5).
@Suite("authctl --timeout", .offPool)
struct AuthctlTimeoutTests {
    @Test func getFromAStoppedDaemonExitsWith69NamingTheSocket() throws {
        let fixture = try DaemonFixture()
        let stopped = try StoppedProcess(try #require(fixture.daemon.pid))
        defer { stopped.resume() }
        let result = try fixture.authctl(["get", "shop", "--timeout", "1"])
        #expect(result.status == 69, "\(result.standardError)")
        #expect(result.standardError.contains(fixture.socketPath), "\(result.standardError)")
        #expect(result.standardError.contains("did not answer within 1 s"), "\(result.standardError)")
        #expect(result.standardOutput.isEmpty)
    }

    @Test(arguments: ["0", "-1", "abc", "7200"])
    func aWrongTimeoutExitsWith2(value: String) throws {
        let result = try runAuthctl(["get", "shop", "--timeout", value])
        #expect(result.status == 2, "\(value): \(result.standardError)")
    }
}
