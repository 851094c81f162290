// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Systemd
import Testing

@Suite("Socket activation (sd_listen_fds)", .offPool)
struct ListenedSocketTests {
    @Test func takesTheSocketsSystemdSocketActivatePasses() throws {
        let directory = try TemporaryDirectory(prefix: "authd-activate")
        defer { directory.remove() }
        let path = directory.appending("io.socket")
        let activator = try BackgroundProcess(
            "/usr/bin/systemd-socket-activate",
            ["--listen=\(path)", "--fdname=varlink", try BuildProducts.executable("authd-listen-probe")]
        )
        defer { activator.stop() }
        // systemd-socket-activate starts the service on the first connection, as systemd does.
        #expect(activator.waitForOutput { $0.contains("Listening on \(path) ") })
        let client = try UnixClient(path: path)
        defer { client.close() }

        #expect(activator.waitForOutput { $0.contains("environment left") })
        let lines = activator.output.split(separator: "\n").filter {
            !$0.hasPrefix("Listening on") && !$0.hasPrefix("Communication attempt") && !$0.hasPrefix("Execing")
        }
        #expect(lines == ["socket fd=3 name=varlink unixStream=true", "environment left: []"])
    }

    @Test func withoutActivationThereAreNoSockets() throws {
        unsetenv("LISTEN_FDS")
        #expect(try ListenedSocket.takeAll().isEmpty)
    }
}
