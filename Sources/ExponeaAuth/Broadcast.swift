// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Hands each value to every AsyncStream made from it, until ``finish()``.
final class Broadcast<Element: Sendable>: Sendable {
    private struct State {
        var streams: [UInt64: AsyncStream<Element>.Continuation] = [:]
        var nextID: UInt64 = 0
        var finished = false
    }

    private let state = Mutex(State())
    private let buffer: Int

    /// - Parameter buffer: How many values a slow reader may have unread; older ones give way to newer.
    init(buffer: Int) { self.buffer = buffer }

    /// The values from now on; an already finished broadcast gives an empty stream.
    func stream() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: .bufferingNewest(buffer))
        let id: UInt64? = state.withLock { state in
            guard !state.finished else { return nil }
            state.nextID += 1
            state.streams[state.nextID] = continuation
            return state.nextID
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
        }
        return stream
    }

    func yield(_ value: Element) {
        for stream in state.withLock({ $0.streams.values }) { stream.yield(value) }
    }

    /// Ends every stream, and the ones made later.
    func finish() {
        let streams = state.withLock { state in
            state.finished = true
            defer { state.streams = [:] }
            return state.streams.values
        }
        for stream in streams { stream.finish() }
    }
}
