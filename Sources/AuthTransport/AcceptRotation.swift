// SPDX-License-Identifier: Apache-2.0
internal import NIOCore
import Synchronization

/// Which event loop accepts the next connection: one loop at a time, the one that serves the fewest.
///
/// The server listens with a server channel on every event loop, all on the one socket, and a connection stays on
/// the loop that accepted it. So a one-shot connection (`authctl get`, an app's first call) is answered by the
/// thread that woke to accept it; NIO's bootstrap, handing each connection to the next loop of a group, woke a
/// second thread for half of them: 70-100 µs of a C one-shot client's 0.9-1.0 ms on the test machine. Only one
/// channel reads the socket at a time: every loop polling it would wake them all for each connection.
///
/// The accepting loop moves when it serves two more connections than another, not one: a one-shot connection
/// on an idle server then never moves it, and long connections still spread evenly.
struct AcceptChoice: Equatable {
    /// The connections each loop serves.
    private(set) var open: [Int]
    /// The loop whose server channel reads the socket.
    private(set) var accepting = 0

    init(loops: Int) {
        open = Array(repeating: 0, count: max(1, loops))
    }

    /// A connection opened on `loop`. Returns the loop that accepts from now on when that changed.
    mutating func opened(on loop: Int) -> Int? {
        open[loop] += 1
        return rebalance()
    }

    /// A connection on `loop` closed. Returns the loop that accepts from now on when that changed.
    mutating func closed(on loop: Int) -> Int? {
        open[loop] = max(0, open[loop] - 1)
        return rebalance()
    }

    private mutating func rebalance() -> Int? {
        var least = 0
        for loop in open.indices where open[loop] < open[least] { least = loop }
        guard open[accepting] > open[least] + 1 else { return nil }
        accepting = least
        return least
    }
}

/// Applies ``AcceptChoice`` to the server channels: at most one reads the socket at any moment.
///
/// Never two at once, not even while the choice moves: NIO takes a readable event for a promise that accept(2)
/// finds a connection (a debug build asserts it), and of two loops woken for one connection, one finds none.
/// So the channel that reads stops first, on its own loop, and only then is the chosen one started, on its loop;
/// in between, a connection waits in the listening queue for a few microseconds. Each step runs on the channel's
/// own loop and does what the choice is when it runs, so choices that follow each other quickly end in the last.
final class AcceptRotation: Sendable {
    private struct State {
        var choice: AcceptChoice
        var servers: [any Channel] = []
        /// The loop whose server channel reads now (its reading was turned on and not yet off).
        var reading: Int? = 0
    }

    private let state: Mutex<State>

    init(loops: Int) {
        state = Mutex(State(choice: AcceptChoice(loops: loops)))
    }

    /// The server channels, one per loop in order, once all are bound. Until then only the first reads (it is
    /// bound reading; the others are bound not reading).
    func serve(_ servers: [any Channel]) {
        step(
            state.withLock { state in
                state.servers = servers
                return state.reading ?? state.choice.accepting
            })
    }

    /// Whether `loop`'s server channel is the one that reads (for the accept back-off, which pauses it).
    func isReading(_ loop: Int) -> Bool { state.withLock { $0.reading == loop } }

    /// A connection opened on `loop`.
    func opened(on loop: Int) { change { $0.opened(on: loop) } }

    /// A connection on `loop` closed.
    func closed(on loop: Int) { change { $0.closed(on: loop) } }

    private func change(_ body: (inout AcceptChoice) -> Int?) {
        let first = state.withLock { state -> Int? in
            guard body(&state.choice) != nil else { return nil }
            return state.reading ?? state.choice.accepting
        }
        if let first { step(first) }
    }

    /// On `loop`'s event loop, as the choice is then: stops its channel reading if another is chosen and goes on
    /// to that one's loop; starts it if it is chosen and none reads; goes on to the chosen one's loop if none
    /// reads. (When another reads, the step that a change of the choice posted for that one does the rest.)
    private func step(_ loop: Int) {
        guard let server = state.withLock({ $0.servers.indices.contains(loop) ? $0.servers[loop] : nil }) else {
            return
        }
        server.eventLoop.execute { [self] in
            let next = state.withLock { state -> Int? in
                let chosen = state.choice.accepting
                if state.reading == loop && chosen != loop {
                    try? server.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
                    state.reading = nil
                    return chosen
                }
                guard state.reading == nil else { return nil }
                guard chosen == loop else { return chosen }
                try? server.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
                state.reading = loop
                return nil
            }
            if let next { step(next) }
        }
    }
}
