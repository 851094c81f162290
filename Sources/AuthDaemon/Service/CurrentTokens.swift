// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Synchronization

/// Each group's token and generation, readable from any thread without waiting for the service's actor:
/// GetToken is answered from here on the connection's event loop. Only the actor writes, in the same turn as it
/// changes the group, so a reader never sees a token the actor has not committed.
final class CurrentTokens: Sendable {
    struct Entry: Sendable {
        var token: StreamJWT?
        var generation: UInt64
    }

    private let entries = Mutex<[AppGroup: Entry]>([:])

    init(_ initial: [AppGroup: Entry] = [:]) { entries.withLock { $0 = initial } }

    subscript(group: AppGroup) -> Entry? { entries.withLock { $0[group] } }

    func set(_ group: AppGroup, token: StreamJWT?, generation: UInt64) {
        entries.withLock { $0[group] = Entry(token: token, generation: generation) }
    }
}
