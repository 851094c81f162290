// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// A client used from several threads keeps several idle connections; when the daemon restarts, each of them is
/// closed. The calls made after the new daemon serves must all succeed: the library finds the stale connections
/// and connects again (issue 38). On each architecture: arm64 and armhf under qemu-user, against the native daemon.
@Suite("libexponea-auth across daemon restarts", .offPool)
struct RestartTests {
    @Test(arguments: Architecture.allCases)
    func callsFromFourThreadsSucceedAcrossEightRestarts(on architecture: Architecture) throws {
        let daemon = try DaemonUnderTest()
        let program = try InteractiveProcess(
            try CLibrary.testProgram("restart", for: architecture), [daemon.socketPath, "shop"])
        defer { program.stop() }
        try program.send(TestJWT().token(expiringIn: 3600))
        #expect(try program.turn() == "round 0: 0 0 0 0")
        for restart in 1...8 {
            daemon.stop(signal: SIGTERM)
            try daemon.start()
            let line = try program.turn()
            #expect(line == "round \(restart): 0 0 0 0", "after restart \(restart)")
        }
    }
}
