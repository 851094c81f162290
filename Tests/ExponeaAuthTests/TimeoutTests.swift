// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// Every wait of the library is bounded (issue 17.5): against the real daemon, stopped with SIGSTOP (it keeps
/// its socket and accepts connections, but answers nothing), continued with SIGCONT at the end whatever happens.
@Suite("The library's waits are bounded", .offPool)
struct TimeoutTests {
    /// Stops the daemon until released (or 30 s pass).
    func stop(_ daemon: DaemonUnderTest) throws -> StoppedProcess {
        try StoppedProcess(try #require(daemon.pid))
    }

    @Test func aCallToAStoppedDaemonThrowsTimedOutNamingTheSocket() async throws {
        let daemon = try DaemonUnderTest()
        let client = AuthDaemonClient(socketPath: daemon.socketPath, callTimeout: .seconds(1))
        _ = try await client.getToken(group: "shop")  // a pooled connection, and a fresh one below
        let stopped = try stop(daemon)
        defer { stopped.resume() }
        for attempt in ["pooled connection", "new connection"] {
            do {
                _ = try await client.getToken(group: "shop")
                Issue.record("\(attempt): a stopped daemon answered")
            } catch {
                #expect(error.code == .timedOut, "\(attempt): \(error)")
                #expect(error.message.contains(daemon.socketPath), "\(attempt): \(error.message)")
                #expect(error.parameters["socket"] == daemon.socketPath)
            }
        }
        stopped.resume()
        // The daemon answers again: so does the client, on a new connection.
        #expect(try await client.getToken(group: "shop").generation == 0)
    }

    /// A timeout too long to count in nanoseconds (the library keeps its deadlines so) bounds nothing, and traps
    /// nowhere.
    @Test func aTimeoutTooLongToCountIsNoBound() async throws {
        let daemon = try DaemonUnderTest()
        let client = AuthDaemonClient(socketPath: daemon.socketPath, callTimeout: .seconds(Int64.max))
        #expect(try await client.getToken(group: "shop").generation == 0)
        #expect(try await client.getToken(group: "shop").generation == 0)
    }

    @Test func aSubscriptionEndsWithTimedOutWhenTheDaemonStopsAnswering() async throws {
        let daemon = try DaemonUnderTest()
        let client = AuthDaemonClient(
            socketPath: daemon.socketPath, callTimeout: .seconds(1), keepAliveInterval: .milliseconds(500))
        var events = client.events(group: "shop").makeAsyncIterator()
        #expect(try await events.next()?.kind == .state)  // subscribed
        let stopped = try stop(daemon)
        defer { stopped.resume() }
        do {
            let event = try await events.next()
            Issue.record("the subscription went on without the daemon: \(String(describing: event))")
        } catch let error as AuthClientError {
            #expect(error.code == .timedOut, "\(error)")
            #expect(error.message.contains(daemon.socketPath))
        }
    }

    @Test func theClientSubscribesAgainAfterTheDaemonWasStoppedAndContinued() async throws {
        let daemon = try DaemonUnderTest()
        let app = try await SubscribedApp(on: daemon)
        defer { app.close() }

        let stopped = try stop(daemon)
        defer { stopped.resume() }
        #expect(await app.lostItsEvents(), "\(app.logs.entries)")
        stopped.resume()
        #expect(
            await app.logs.waitForEntry { $0.message.contains("Subscribed again") })
        #expect(try await daemon.waitForSubscribers(1))

        let other = AuthDaemonClient(socketPath: daemon.socketPath)
        _ = try await other.setToken(TestJWT().token(expiringIn: 3600), group: "shop")
        #expect(await app.refreshes.waitFor(count: 1))
    }

    @Test func theClientSubscribesAgainAfterAStoppedDaemonIsRestarted() async throws {
        let daemon = try DaemonUnderTest()
        let app = try await SubscribedApp(on: daemon)
        defer { app.close() }

        let stopped = try stop(daemon)
        #expect(await app.lostItsEvents(), "\(app.logs.entries)")
        _ = daemon.stop()  // SIGKILL, stopped or not
        stopped.resume()
        try daemon.start()
        #expect(try await daemon.waitForSubscribers(1))
        let other = AuthDaemonClient(socketPath: daemon.socketPath)
        _ = try await other.setToken(TestJWT().token(expiringIn: 3600), group: "shop")
        #expect(await app.refreshes.waitFor(count: 1))
    }

    /// An app of the group "shop" with short bounds (the daemon unavailable after 0.5 s, calls answered within
    /// 1 s, a keep-alive after 0.5 s of silence), subscribed; the test reads its log and its token refreshes.
    struct SubscribedApp {
        let auth: ExponeaAuthClient
        let logs = LogCapture()
        let refreshes = Recorder<TokenRefresh>()
        let task: Task<Void, Never>

        init(on daemon: DaemonUnderTest) async throws {
            let auth = ExponeaAuthClient(
                group: "shop", integration: .stream(StreamSettings(streamId: "stream-1")),
                socketPath: daemon.socketPath, unavailableBound: .milliseconds(500), callTimeout: .seconds(1),
                keepAliveInterval: .milliseconds(500), logger: logs.logger())
            let refreshes = refreshes
            self.auth = auth
            task = Task { for await refresh in auth.tokenRefreshes { refreshes.append(refresh) } }
            #expect(try await daemon.waitForSubscribers(1))
        }

        func close() {
            task.cancel()
            auth.close()
        }

        /// Waits (20 s at most) until the app logs that its subscription lost the daemon: a call not answered
        /// within its timeout.
        func lostItsEvents() async -> Bool {
            await logs.waitForEntry {
                $0.message.contains("Lost the app group's events") && $0.description.contains("did not answer within")
            }
        }
    }
}
