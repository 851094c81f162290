// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The library as the devices run it: built for arm64 and armhf with Debian's cross compilers, run under qemu-user
/// against the native daemon (issue 38, part 3). The restart, resubscribe and refresh-error tests run there too
/// (their suites take an ``Architecture``); ThreadSanitizer does not run under qemu-user, so the thread test runs
/// here without it, for what it checks besides races: every call from eight threads beside the loop thread
/// succeeds, and the loop thread hears every token they set.
@Suite("libexponea-auth on arm64 and armhf, under qemu-user", .offPool)
struct CrossArchitectureTests {
    @Test(arguments: Architecture.cross)
    func callsFromEightThreadsBesideTheLoopThreadSucceed(on architecture: Architecture) throws {
        let daemon = try DaemonUnderTest()
        let program = try CLibrary.testProgram("threads", for: architecture)
        let run = try ChildProcess.run(
            program.executable, program.arguments([daemon.socketPath, "shop"]),
            input: TestJWT().token(expiringIn: 3600) + "\n")
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput == "ok refreshed=6\n", "\(run.standardOutput)")
    }
}
