// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import HTTPTypes
import Logging
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The SDK's request policy end to end: the real daemon, and a real HTTP server scripted to answer
/// 401/403/200 that records every request it sees.
@Suite("ExponeaAuth request policy against a scripted HTTP server", .offPool)
struct RequestPolicyTests {
    /// The stand-in for the Bloomreach API.
    final class ScriptedServer {
        static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/scripted-http-server.py").path
        let process: BackgroundProcess
        let baseURL: URL

        struct Seen: Decodable, Equatable {
            var path: String
            var authorization: String?
            var contentType: String?
            var accept: String?
        }

        init(_ responses: String...) throws {
            process = try BackgroundProcess("/usr/bin/env", ["python3", Self.script] + responses)
            let process = process
            guard process.waitForOutput({ $0.hasPrefix("port ") }),
                let line = process.output.split(separator: "\n").first,
                let port = Int(line.dropFirst("port ".count))
            else { throw POSIXError(.ETIMEDOUT) }
            baseURL = URL(string: "http://127.0.0.1:\(port)")!
        }

        deinit { process.stop() }

        /// The requests seen, once `count` of them have been logged (the log reaches the test a moment after
        /// the response does), or all seen when that takes over 5 s.
        func seen(_ count: Int) async -> [Seen] {
            _ = process.waitForOutput(timeout: .seconds(5)) { Self.seen(in: $0).count >= count }
            return seen
        }

        /// The method and path of the requests seen, once `count` of them have been logged.
        func methodsAndPaths(_ count: Int) async -> [String] {
            _ = process.waitForOutput(timeout: .seconds(5)) { Self.seen(in: $0).count >= count }
            struct Line: Decodable {
                var method: String
                var path: String
            }
            return process.output.split(separator: "\n").dropFirst().compactMap {
                (try? JSONDecoder().decode(Line.self, from: Data($0.utf8))).map { "\($0.method) \($0.path)" }
            }
        }

        /// The requests seen so far.
        var seen: [Seen] { Self.seen(in: process.output) }

        static func seen(in output: String) -> [Seen] {
            output.split(separator: "\n").dropFirst().compactMap {
                try? JSONDecoder().decode(Seen.self, from: Data($0.utf8))
            }
        }
    }

    /// The app's HTTP client: URLSession.
    static let transport: HTTPTransport = { request, body in
        var urlRequest = URLRequest(url: URL(string: "\(request.scheme!)://\(request.authority!)\(request.path!)")!)
        urlRequest.httpMethod = request.method.rawValue
        for field in request.headerFields { urlRequest.addValue(field.value, forHTTPHeaderField: field.name.rawName) }
        if request.method == .post { urlRequest.httpBody = body ?? Data("{}".utf8) }
        let (data, response) = try await URLSession.shared.data(for: urlRequest)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        return (HTTPResponse(status: HTTPResponse.Status(code: status)), data)
    }

    func streamClient(_ daemon: DaemonUnderTest, _ server: ScriptedServer, retryWait: Duration = .seconds(1))
        -> ExponeaAuthClient
    {
        ExponeaAuthClient(
            group: "shop",
            integration: .stream(StreamSettings(streamId: "stream-1", baseURL: server.baseURL)),
            socketPath: daemon.socketPath,
            unavailableBound: .milliseconds(500),
            retryWait: retryWait
        )
    }

    @Test func aValidTokenGoesOutOnceAsABearerWithJSONHeaders() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let auth = streamClient(daemon, server)
        defer { auth.close() }
        let token = TestJWT().token(expiringIn: 3600)
        try await auth.setSdkAuthToken(token)

        let (response, _) = try await auth.execute(
            .trackEvents, body: Data(#"{"type":"x"}"#.utf8), transport: Self.transport)
        #expect(response.status == .ok)
        #expect(
            await server.seen(1) == [
                .init(
                    path: "/track/u/v1/customers/events?stream_id=stream-1", authorization: "Bearer \(token)",
                    contentType: "application/json", accept: "application/json")
            ])
    }

    @Test func a401IsRetriedOnceWithTheTokenTheHandlerSetsMeanwhile() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer(#"401:{"token_expired":true}"#, "200")
        // A long wait: only the new token can end it early (R22).
        let auth = streamClient(daemon, server, retryWait: .seconds(4))
        defer { auth.close() }
        let old = TestJWT().token(expiringIn: 3600, ids: ["registered": "eve"])
        let new = TestJWT().token(expiringIn: 7200, ids: ["registered": "eve"])
        let reasons = Recorder<JwtErrorContext>()
        auth.setJwtErrorHandler { context in
            reasons.append(context)
            Task { try await auth.setSdkAuthToken(new) }
        }
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.setSdkAuthToken(old)

        let (response, _) = try await auth.execute(.appInboxFetch, transport: Self.transport)
        #expect(response.status == .ok)
        #expect(await server.seen(2).map(\.authorization) == ["Bearer \(old)", "Bearer \(new)"])
        #expect(
            await server.seen(2).map(\.path) == Array(repeating: "/webxp/streams/stream-1/appinbox/fetch", count: 2))
        #expect(reasons.all == [JwtErrorContext(reason: .expired, customerIds: ["registered": "eve"])])
    }

    @Test func a401ThatNobodyFixesIsRetriedOnceAndThenFails() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("401")
        let auth = streamClient(daemon, server, retryWait: .milliseconds(300))
        defer { auth.close() }
        let reasons = Recorder<JwtErrorReason>()
        auth.setJwtErrorHandler { reasons.append($0.reason) }
        #expect(try await daemon.waitForSubscribers(1))
        let token = TestJWT().token(expiringIn: 3600)
        try await auth.setSdkAuthToken(token)

        let (response, _) = try await auth.execute(.trackCustomer, transport: Self.transport)
        #expect(response.status == .unauthorized)
        #expect(await server.seen(2).map(\.authorization) == ["Bearer \(token)", "Bearer \(token)"])
        #expect(await reasons.waitFor(count: 1))
        #expect(reasons.all == [.invalid])
    }

    @Test func a403WithAValidTokenFailsAtOnceWithoutTheHandler() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("403", "200")
        let auth = streamClient(daemon, server)
        defer { auth.close() }
        let reasons = Recorder<JwtErrorReason>()
        auth.setJwtErrorHandler { reasons.append($0.reason) }
        #expect(try await daemon.waitForSubscribers(1))
        try await auth.setSdkAuthToken(TestJWT().token(expiringIn: 3600))

        let (response, _) = try await auth.execute(.inAppMessages, transport: Self.transport)
        #expect(response.status == .forbidden)
        #expect(await server.seen(1).count == 1)
        // A handler run would come as an event; a later set's event proves none came before it. The stream is
        // taken before the set: it has every refresh from then on.
        let refreshes = auth.tokenRefreshes
        let refreshed = Task { () -> Bool in
            for await _ in refreshes { return true }
            return false
        }
        try await auth.setSdkAuthToken(TestJWT().token(expiringIn: 3600))
        #expect(await refreshed.value)
        await MainActor.run {}  // the handler runs on the main actor: let one that was started run
        #expect(reasons.all.isEmpty)
    }

    @Test func a403WithoutATokenAsksTheHandlerAndRetriesWithItsToken() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("403", "200")
        let auth = streamClient(daemon, server, retryWait: .seconds(4))
        defer { auth.close() }
        let token = TestJWT().token(expiringIn: 3600)
        let reasons = Recorder<JwtErrorReason>()
        auth.setJwtErrorHandler { context in
            reasons.append(context.reason)
            Task { try await auth.setSdkAuthToken(token) }
        }
        #expect(try await daemon.waitForSubscribers(1))

        let (response, _) = try await auth.execute(.recommendations, transport: Self.transport)
        #expect(response.status == .ok)
        #expect(await server.seen(2).map(\.authorization) == [nil, "Bearer \(token)"])
        #expect(reasons.all == [.notProvided])
    }

    @Test func appInboxWithoutATokenAsksTheHandlerOnceAndNeverReachesTheServer() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let auth = streamClient(daemon, server, retryWait: .milliseconds(300))
        defer { auth.close() }
        let reasons = Recorder<JwtErrorReason>()
        auth.setJwtErrorHandler { reasons.append($0.reason) }
        #expect(try await daemon.waitForSubscribers(1))

        let (response, _) = try await auth.execute(.appInboxMarkAsRead, transport: Self.transport)
        #expect(response.status == .unauthorized)
        #expect(server.seen.isEmpty)
        #expect(await reasons.waitFor(count: 1))
        // A second handler call would come from a second event; a later set's event proves none came before it.
        let refreshes = auth.tokenRefreshes
        let refreshed = Task { () -> Bool in
            for await _ in refreshes { return true }
            return false
        }
        try await auth.setSdkAuthToken(TestJWT().token(expiringIn: 3600))
        #expect(await refreshed.value)
        await MainActor.run {}
        #expect(reasons.all == [.notProvided])
    }

    @Test func appInboxGoesOutWithTheTokenTheHandlerSets() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let auth = streamClient(daemon, server, retryWait: .seconds(4))
        defer { auth.close() }
        let token = TestJWT().token(expiringIn: 3600)
        auth.setJwtErrorHandler { _ in Task { try await auth.setSdkAuthToken(token) } }
        #expect(try await daemon.waitForSubscribers(1))

        let (response, _) = try await auth.execute(.appInboxFetch, transport: Self.transport)
        #expect(response.status == .ok)
        #expect(await server.seen(1).map(\.authorization) == ["Bearer \(token)"])
    }

    @Test func theAuthenticatorReturnsTheRawToken() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let auth = streamClient(daemon, server, retryWait: .milliseconds(200))
        defer { auth.close() }
        await #expect {
            try await auth.authenticator.getAuthHeader()
        } throws: { ($0 as? AuthClientError)?.code == .tokenUnavailable }
        let token = TestJWT().token(expiringIn: 3600)
        try await auth.setSdkAuthToken(token)
        #expect(try await auth.authenticator.getAuthHeader() == token)
    }

    @Test func projectModeSendsTheAPITokenAndAsksTheProviderForAppInbox() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let logs = LogCapture()
        let settings = ProjectSettings(
            projectToken: "project-1", authorization: "api-key", advancedAuthEnabled: true, baseURL: server.baseURL)
        let auth = ExponeaAuthClient(
            group: "shop", integration: .project(settings), socketPath: daemon.socketPath, logger: logs.logger())
        defer { auth.close() }

        _ = try await auth.execute(.trackCustomer, transport: Self.transport)
        // Advanced authorization without a provider: the documented line, and no request.
        let (unauthorized, _) = try await auth.execute(.appInboxFetch, transport: Self.transport)
        #expect(unauthorized.status == .unauthorized)
        let (again, _) = try await auth.execute(.appInboxMarkAsRead, transport: Self.transport)
        #expect(again.status == .unauthorized)
        // R26: logged once for the configuration, not once per request.
        #expect(
            logs.entries.filter { $0.message == "Advanced authorization flag has been enabled without provider" }
                .count == 1)

        let asked = Recorder<Int>()
        auth.setCustomerTokenProvider {
            asked.append(1)
            return "customer-token"
        }
        _ = try await auth.execute(.appInboxFetch, transport: Self.transport)
        _ = try await auth.execute(.appInboxMarkAsRead, transport: Self.transport)
        #expect(asked.all.count == 2)  // every request, nothing cached
        #expect(
            await server.seen(3) == [
                .init(
                    path: "/track/v2/projects/project-1/customers", authorization: "Token api-key",
                    contentType: "application/json", accept: "application/json"),
                .init(
                    path: "/webxp/projects/project-1/appinbox/fetch", authorization: "Bearer customer-token",
                    contentType: "application/json", accept: "application/json"),
                .init(
                    path: "/webxp/projects/project-1/appinbox/markasread", authorization: "Bearer customer-token",
                    contentType: "application/json", accept: "application/json"),
            ])
    }

    /// R23 and R25 in one table: each request's method, path and query in both modes, or none.
    @Test(
        arguments: [
            (
                StreamRequest.trackCustomer, "POST /track/u/v1/customers?stream_id=s%201",
                "POST /track/v2/projects/p%2F1/customers"
            ),
            (
                .trackEvents, "POST /track/u/v1/customers/events?stream_id=s%201",
                "POST /track/v2/projects/p%2F1/customers/events"
            ),
            (
                .campaignClick, "POST /track/u/v1/campaigns/clicks?stream_id=s%201",
                "POST /track/v2/projects/p%2F1/campaigns/clicks"
            ),
            (
                .consentCategories, "GET /data/v2/streams/s%201/consent/categories",
                "POST /data/v2/projects/p%2F1/consent/categories"
            ),
            (.customerAttributes, nil, "POST /data/v2/projects/p%2F1/customers/attributes"),
            (
                .inAppMessages, "POST /webxp/streams/s%201/inappmessages?compatibility=3",
                "POST /webxp/s/p%2F1/inappmessages?v=1"
            ),
            (.inAppContentBlocks, "POST /webxp/streams/s%201/inappcontentblocks?v=2", nil),
            (.segments(cookie: "c/1"), "GET /webxp/streams/s%201/segments?cookie=c%2F1", nil),
            (.linkIds(cookie: "c/1"), "POST /webxp/streams/s%201/cookies/c%2F1/link-ids", nil),
            (.staticBundle(platform: "ios"), "GET /wxstatic/streams/s%201/bundle-ios.json?v=2", nil),
            (.appInboxFetch, "POST /webxp/streams/s%201/appinbox/fetch", "POST /webxp/projects/p%2F1/appinbox/fetch"),
            (
                .appInboxMarkAsRead, "POST /webxp/streams/s%201/appinbox/markasread",
                "POST /webxp/projects/p%2F1/appinbox/markasread"
            ),
            (.recommendations, "POST /optimization/streams/s%201/recommend/user", nil),
            (
                .selfCheck, "POST /campaigns/streams/s%201/send-self-check-notification",
                "POST /campaigns/send-self-check-notification?project_id=p%2F1"
            ),
        ] as [(StreamRequest, String?, String?)])
    func everyRequestHasItsEndpointInEachMode(request: StreamRequest, stream: String?, project: String?) {
        func line(_ integration: Integration) -> String? {
            request.endpoint(for: integration).map { "\($0.method.rawValue) \($0.pathAndQuery)" }
        }
        #expect(line(.stream(StreamSettings(streamId: "s 1"))) == stream)
        #expect(line(.project(ProjectSettings(projectToken: "p/1", authorization: nil))) == project)
    }

    @Test func aGETRequestGoesOutAsAGETWithTheBearerAndNoBody() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let auth = streamClient(daemon, server)
        defer { auth.close() }
        let token = TestJWT().token(expiringIn: 3600)
        try await auth.setSdkAuthToken(token)

        _ = try await auth.execute(.consentCategories, body: Data("{}".utf8), transport: Self.transport)
        _ = try await auth.execute(.staticBundle(platform: "linux"), transport: Self.transport)
        #expect(
            await server.methodsAndPaths(2) == [
                "GET /data/v2/streams/stream-1/consent/categories",
                "GET /wxstatic/streams/stream-1/bundle-linux.json?v=2",
            ])
        #expect(await server.seen(2).map(\.authorization) == ["Bearer \(token)", "Bearer \(token)"])
    }

    @Test func aRequestTheModeDoesNotHaveIsRefusedBeforeAnythingIsSent() async throws {
        let daemon = try DaemonUnderTest()
        let server = try ScriptedServer("200")
        let settings = ProjectSettings(projectToken: "project-1", authorization: "api-key", baseURL: server.baseURL)
        let auth = ExponeaAuthClient(group: "shop", integration: .project(settings), socketPath: daemon.socketPath)
        defer { auth.close() }
        await #expect {
            try await auth.execute(.recommendations, transport: Self.transport)
        } throws: { ($0 as? AuthClientError)?.code == .unsupportedRequest }
        _ = try await auth.execute(.trackEvents, transport: Self.transport)
        #expect(await server.methodsAndPaths(1) == ["POST /track/v2/projects/project-1/customers/events"])
    }

    /// R25: a key given with its `Token ` prefix goes out as `Token <key>`, never `Token Token <key>`.
    @Test(arguments: ["api-key", "Token api-key", "token api-key", "  Token   api-key "])
    func projectModeSendsTheKeyPrefixedOnce(key: String) {
        let settings = ProjectSettings(projectToken: "p", authorization: key)
        #expect(settings.authorizationHeader == "Token api-key")
    }
}
