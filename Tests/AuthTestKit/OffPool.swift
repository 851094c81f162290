// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Runs blocking work (a socket read, a wait) on a thread of its own and awaits it, so that an async test
/// never holds one of the concurrency pool's few threads while a server in the same process needs them.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}
