// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// The library checks who listens on the socket before it sends anything: another user's server gets not one
/// byte, and a `/tmp` fallback directory that is not the user's own is not used.
@Suite("ExponeaAuth and another user's planted socket", .offPool)
struct TrustedServerTests {
    static let bob: UInt32 = 4243

    /// A socket path longer than a Unix socket address holds is refused as such, never cut to another path.
    @Test func aSocketPathTooLongForAnAddressIsRefused() async throws {
        let path = "/tmp/" + String(repeating: "d", count: 120) + "/io.socket"
        let client = AuthDaemonClient(socketPath: path, unavailableBound: .milliseconds(200))
        await #expect {
            _ = try await client.getToken(group: "shop")
        } throws: { error in
            let error = error as? AuthClientError
            return error?.code == .daemonUnavailable && error?.message.contains("too long for a Unix socket") == true
        }
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run a server as another user"))
    func aServerOfAnotherUserIsSentNothing() async throws {
        let directory = try TemporaryDirectory(prefix: "authd-planted")
        defer { directory.remove() }
        #expect(chown(directory.path, Self.bob, Self.bob) == 0 && chmod(directory.path, 0o755) == 0)
        let server = try PlantedServer(path: directory.appending("io.socket"), uid: Self.bob)
        defer { server.stop() }
        let token = TestJWT().token(expiringIn: 3600)

        let client = AuthDaemonClient(socketPath: server.path, unavailableBound: .milliseconds(200))
        await #expect {
            try await client.setToken(token, group: "shop")
        } throws: { error in
            let error = error as? AuthClientError
            guard let error, error.code == .untrustedServer else { return false }
            // Who would have been trusted: exponea-authd too where the system has that user.
            let trusted = [
                "this user (uid \(geteuid())), root or exponea-authd (uid ", "this user (uid \(geteuid())) or root:",
            ]
            return error.message.contains("runs as uid \(Self.bob), not as ") && error.message.contains(server.path)
                && trusted.contains { error.message.contains("not as " + $0) }
        }
        await #expect(throws: AuthClientError.self) { try await client.getToken(group: "shop") }
        let events = ExponeaAuthClient(
            group: "shop", integration: .stream(StreamSettings(streamId: "s")), socketPath: server.path,
            unavailableBound: .milliseconds(200))
        await #expect(throws: AuthClientError.self) { try await events.setSdkAuthToken(token) }
        #expect(server.waitForClosedConnections(atLeast: 3))
        #expect(server.received.allSatisfy { $0 == 0 }, "\(server.received)")

        // The positive twin: the real daemon (run by root) is trusted.
        let daemon = try DaemonUnderTest()
        let real = AuthDaemonClient(socketPath: daemon.socketPath)
        #expect(try await real.setToken(token, group: "shop").generation == 1)
        #expect(try await real.getToken(group: "shop").token?.value == token)
    }

    @Test(.enabled(if: getuid() == 0, "needs root to create a directory for another user"))
    func theTmpFallbackIsUsedOnlyWhenItIsTheUsersOwn() throws {
        let uid: UInt32 = 4244
        let fallback = "/tmp/exponea-authd-\(uid)"
        try? FileManager.default.removeItem(atPath: fallback)
        defer { try? FileManager.default.removeItem(atPath: fallback) }
        let system = "/run/exponea-authd/io.socket"
        func chosen() -> String {
            AuthDaemonClient.defaultSocketPath(environment: [:], uid: uid, exists: { _ in true })
        }

        #expect(mkdir(fallback, 0o700) == 0)
        #expect(chown(fallback, Self.bob, Self.bob) == 0)
        #expect(chosen() == system)  // bob's
        #expect(chown(fallback, uid, uid) == 0 && chmod(fallback, 0o755) == 0)
        #expect(chosen() == system)  // open to others
        #expect(chmod(fallback, 0o700) == 0)
        #expect(chosen() == fallback + "/io.socket")  // the user's own

        #expect(rmdir(fallback) == 0)
        #expect(symlink(NSTemporaryDirectory(), fallback) == 0)
        #expect(chosen() == system)  // a link
    }
}
