// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import HTTPTypes
import Synchronization
import Testing

/// The README's example, its lines in order with checks between them, and a backend, a tracker and an HTTP
/// client made up for the test.
@Suite("The README's example", .offPool)
struct ReadmeExampleTests {
    struct Backend {
        let token: String
        func fetchJwt(for customerIds: [String: String]) async -> String { token }
    }

    final class Tracker: Sendable {
        let flushes = Mutex(0)
        func flush() async { flushes.withLock { $0 += 1 } }
    }

    final class HTTPClient: Sendable {
        let authorizations = Mutex<[String?]>([])
        func send(_ request: HTTPRequest, _ body: Data?) async throws -> (HTTPResponse, Data) {
            authorizations.withLock { $0.append(request.headerFields[.authorization]) }
            return (HTTPResponse(status: .ok), Data())
        }
    }

    @Test func runsAsWritten() async throws {
        let daemon = try DaemonUnderTest()
        let backend = Backend(token: TestJWT().token(expiringIn: 3600))
        let tracker = Tracker()
        let http = HTTPClient()
        let event = Data(#"{"type":"page_view"}"#.utf8)

        // From the README:
        let auth = ExponeaAuthClient(
            group: "shop", integration: .stream(StreamSettings(streamId: "my-stream")), socketPath: daemon.socketPath)
        auth.setAsyncJwtErrorHandler { context in  // on the main actor, in one app of the group only (R28)
            try? await auth.setSdkAuthToken(await backend.fetchJwt(for: context.customerIds))
        }  // returning without a token gives the refresh up at once; an app that exits gives it up too
        auth.setFlushHandler { await tracker.flush() }  // runs before anonymize or stop empties the group
        #expect(try await daemon.waitForSubscribers(1))
        let (response, _) = try await auth.execute(.trackEvents, body: event, transport: http.send)  // R15-R24

        // No token at first: the request went out without one (the 200 needed no retry), and the pre-flight
        // asked the handler, which stores the backend's token.
        #expect(response.status == .ok)
        #expect(http.authorizations.withLock { $0 } == [nil])
        #expect(daemon.waitForOutput { $0.contains("info: Token set") })
        #expect(try await auth.daemon.getToken(group: "shop").token?.value == backend.token)

        let flush = try await auth.anonymize()  // apps flush, token gone; flush.unconfirmed lists who did not
        #expect(tracker.flushes.withLock { $0 } == 1)
        #expect(flush.confirmed)
        #expect(try await auth.daemon.getToken(group: "shop").token == nil)
        auth.close()
    }
}
