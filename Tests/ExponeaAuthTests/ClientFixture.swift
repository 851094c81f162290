// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Synchronization

/// Collects values from handlers and sequences, for async tests to wait on without sleeping (the test kit's
/// ``Arrivals``: a waiter wakes when the value comes).
final class Recorder<Value: Sendable>: Sendable {
    private let arrivals = Arrivals<Value>()

    func append(_ value: Value) { arrivals.append(value) }

    var all: [Value] { arrivals.all }

    /// Whether `count` values arrive within `timeout`.
    func waitFor(count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        await arrivals.waitFor(count: count, timeout: timeout)
    }
}

extension DaemonUnderTest {
    /// A client for `group` on this daemon, with short bounds.
    func client(group: String = "shop", integration: Integration? = nil) -> ExponeaAuthClient {
        ExponeaAuthClient(
            group: group,
            integration: integration ?? .stream(StreamSettings(streamId: "stream-1")),
            socketPath: socketPath,
            unavailableBound: .milliseconds(500)
        )
    }

    /// Waits until the group has `count` subscribers, so no event is missed.
    func waitForSubscribers(_ count: Int, group: String = "shop") async throws -> Bool {
        waitForSubscribers(group, count: count)
    }
}
