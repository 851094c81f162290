// SPDX-License-Identifier: Apache-2.0
import AuthDaemon
import AuthTestKit
import Foundation
import Testing

/// One version everywhere: the Debian package's (debian/changelog, which names the .deb), the daemon's
/// (`Daemon.version`, in GetInfo and `--version`) and authctl's.
@Suite("One version", .offPool)
struct VersionTests {
    /// The version of the newest entry of debian/changelog: `exponea-authd (0.1.0) unstable; ...`.
    static func packageVersion() throws -> String {
        let changelog = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("debian/changelog")
        let firstLine = try String(contentsOf: changelog, encoding: .utf8).prefix { $0 != "\n" }
        let version = firstLine.split(separator: "(", maxSplits: 1).last?.prefix { $0 != ")" }
        return String(try #require(version))
    }

    @Test func theDaemonAndAuthctlSayThePackageVersion() throws {
        let version = try Self.packageVersion()
        #expect(Daemon.version == version)
        let daemon = try ChildProcess.run(BuildProducts.executable("exponea-authd"), ["--version"])
        #expect(daemon.standardOutput == version + "\n")
        let authctl = try ChildProcess.run(BuildProducts.executable("authctl"), ["--version"])
        #expect(authctl.standardOutput == version + "\n")
    }
}
