// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTestKit
import Foundation
import Logging
import Synchronization
import Testing

@testable import AuthTransport

/// The handler learns which connection made each call, and hears once when that connection is closed, after
/// its last call returned: what a refresh claim needs to end with its claimant.
@Suite("Varlink server: connection identity and close")
struct ConnectionIdentityTests {
    /// Answers test.Who with nothing, recording the connection of each call; test.Hold waits until cancelled.
    final class RecordingHandler: VarlinkCallHandler {
        let calls = Arrivals<VarlinkConnectionID>()
        let closed = Arrivals<VarlinkConnectionID>()
        /// Connections whose last call had returned when their close was heard.
        let closedAfterCalls = Mutex<[VarlinkConnectionID]>([])
        let running = Mutex<Set<VarlinkConnectionID>>([])

        func dispatch(_ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch {
            .later { [self] replies in await handle(call, connection: connection, replies: replies) }
        }

        func handle(_ call: VarlinkCall, connection: VarlinkConnectionID, replies: VarlinkReplies) async {
            calls.append(connection)
            running.withLock { _ = $0.insert(connection) }
            defer { running.withLock { _ = $0.remove(connection) } }
            if call.method == "test.Hold" {
                // Held until the connection's close cancels it: a sleep ends at once when its task is cancelled.
                try? await Task.sleep(for: .seconds(86_400))
                return
            }
            try? replies.send(VarlinkReplyEncoder.reply(EmptyPayload()))
        }

        func connectionClosed(_ connection: VarlinkConnectionID) async {
            closed.append(connection)
            if !running.withLock({ $0.contains(connection) }) { closedAfterCalls.withLock { $0.append(connection) } }
        }
    }

    @Test func eachCallCarriesItsConnectionAndTheCloseComesOnceAfterTheLastCall() async throws {
        let handler = RecordingHandler()
        try await ServerFixture.with(handler: handler) { fixture in
            try await check(handler, path: fixture.path)
            try await fixture.stop()
            #expect(handler.closed.all.count == 2)  // once each
        }
    }

    private func check(_ handler: RecordingHandler, path: String) async throws {
        let first = try UnixClient(path: path)
        let second = try UnixClient(path: path)
        try await offPool { [first, second] in
            _ = try first.exchange(#"{"method":"test.Who"}"#)
            _ = try first.exchange(#"{"method":"test.Who"}"#)
            _ = try second.exchange(#"{"method":"test.Who"}"#)
            try second.send(#"{"method":"test.Hold"}"#)  // a call still running when the peer goes away
        }
        #expect(await handler.calls.waitFor(count: 4))
        let calls = handler.calls.all
        #expect(calls[0] == calls[1])  // one connection, one identity
        #expect(calls[2] != calls[0] && calls[3] == calls[2])
        #expect(handler.closed.all.isEmpty)

        first.close()
        second.close()
        #expect(await handler.closed.waitFor(count: 2))
        #expect(Set(handler.closed.all) == [calls[0], calls[2]])
        // The held call was cancelled and returned before its connection's close was heard.
        #expect(Set(handler.closedAfterCalls.withLock { $0 }) == [calls[0], calls[2]])
    }
}
