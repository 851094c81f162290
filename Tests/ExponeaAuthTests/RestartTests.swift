// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// Calls made at once from four tasks keep several idle connections; after each daemon restart they are all
/// stale, and every call made once the new daemon serves must succeed (issue 38, as for libexponea-auth).
@Suite("ExponeaAuth across daemon restarts", .offPool)
struct RestartTests {
    @Test func callsFromFourTasksSucceedAcrossEightRestarts() async throws {
        let daemon = try DaemonUnderTest()
        let client = AuthDaemonClient(socketPath: daemon.socketPath)
        let token = TestJWT().token(expiringIn: 3600)
        _ = try await client.setToken(token, group: "shop")
        /// One call from each of four tasks at once: nil for success, or the error's code.
        func round() async -> [String?] {
            await withTaskGroup(of: (Int, String?).self) { group in
                for index in 0..<4 {
                    group.addTask {
                        do {
                            if index % 2 == 0 {
                                _ = try await client.getToken(group: "shop")
                            } else {
                                _ = try await client.setToken(token, group: "shop")
                            }
                            return (index, nil)
                        } catch {
                            return (index, "\(error)")
                        }
                    }
                }
                var results = [String?](repeating: nil, count: 4)
                for await (index, result) in group { results[index] = result }
                return results
            }
        }
        #expect(await round() == [nil, nil, nil, nil])
        for restart in 1...8 {
            daemon.stop(signal: SIGTERM)
            try daemon.start()
            let results = await round()
            #expect(results == [nil, nil, nil, nil], "after restart \(restart)")
        }
    }
}

/// A token set while the app's subscription is down reaches its `tokenRefreshes` (R6; issue 38): the token is set
/// during the gap through a second daemon on the same store and another socket, which the app never sees.
@Suite("ExponeaAuth: a token set while the subscription is down", .offPool)
struct ResubscribeTests {
    @Test func theAppHearsATokenSetWhileItWasAway() async throws {
        let daemon = try DaemonUnderTest()
        let auth = daemon.client()
        defer { auth.close() }
        let refreshes = Recorder<TokenRefresh>()
        let listening = Task { for await refresh in auth.tokenRefreshes { refreshes.append(refresh) } }
        defer { listening.cancel() }
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.setSdkAuthToken(TestJWT().token(expiringIn: 3600))
        #expect(await refreshes.waitFor(count: 1))

        daemon.stop(signal: SIGTERM)
        let other = try DaemonUnderTest(stateDirectory: daemon.stateDirectory)
        _ = try await AuthDaemonClient(socketPath: other.socketPath)
            .setToken(TestJWT().token(expiringIn: 3600), group: "shop")
        other.stop(signal: SIGTERM)
        try daemon.start()
        #expect(await refreshes.waitFor(count: 2))
        #expect(refreshes.all.map(\.generation) == [1, 2])
    }
}
