// SPDX-License-Identifier: Apache-2.0
import CEpoll
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// The connections' readiness, gathered in one epoll set that is itself one I/O source of the loop.
///
/// sd-event re-polls with `epoll_wait(…, 0)` before dispatching each pending source and walks every ready
/// descriptor each time: with one source per connection, a turn in which N connections are ready costs N² events
/// (measured: 32 busy clients got 0.5x the floor's GetTokens per second, 128 clients 0.2x). Here one dispatch of
/// the loop serves up to ``batch`` ready connections, each once, and the loop polls its other sources (signals,
/// timers, the bus, the executor) between two batches.
///
/// Confined to the loop's thread, as the connections are (see ``ServerConnection``): its properties are
/// `@exclusivity(unchecked)`.
final class ConnectionPoller {
    /// The most connections one dispatch serves.
    static let batch = 64

    private let descriptor: Int32
    @exclusivity(unchecked) private var source: EventSource?
    @exclusivity(unchecked) private var connections: [UInt64: ServerConnection] = [:]
    @exclusivity(unchecked) private var ready = [epoll_event](repeating: epoll_event(), count: ConnectionPoller.batch)

    /// An empty set, watched by `loop`.
    init(loop: MainLoop) throws(VarlinkServerError) {
        descriptor = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard descriptor >= 0 else {
            throw VarlinkServerError(message: "cannot create an epoll set: \(String(cString: strerror(errno)))")
        }
        do {
            source = try loop.onReadable(descriptor) { [unowned self] in dispatch() }
        } catch {
            close(descriptor)
            throw VarlinkServerError(message: "cannot watch the connections: \(error)")
        }
    }

    deinit {
        source?.cancel()
        close(descriptor)
    }

    /// Watches `connection`'s socket for `events` (EPOLLHUP and EPOLLERR always).
    func add(_ connection: ServerConnection, events: UInt32) throws(VarlinkServerError) {
        var event = epoll_event(events: events, data: epoll_data_t(u64: connection.identity.rawValue))
        guard epoll_ctl(descriptor, EPOLL_CTL_ADD, connection.descriptor, &event) == 0 else {
            throw VarlinkServerError(message: "cannot watch a connection: \(String(cString: strerror(errno)))")
        }
        connections[connection.identity.rawValue] = connection
    }

    /// Changes what `connection`'s socket is watched for.
    func modify(_ connection: ServerConnection, events: UInt32) {
        var event = epoll_event(events: events, data: epoll_data_t(u64: connection.identity.rawValue))
        _ = epoll_ctl(descriptor, EPOLL_CTL_MOD, connection.descriptor, &event)
    }

    /// Stops watching `connection`; call it before its socket is closed.
    func remove(_ connection: ServerConnection) {
        var unused = epoll_event()
        _ = epoll_ctl(descriptor, EPOLL_CTL_DEL, connection.descriptor, &unused)
        connections[connection.identity.rawValue] = nil
    }

    /// Serves the connections ready now, each once.
    private func dispatch() {
        let count = epoll_wait(descriptor, &ready, Int32(ready.count), 0)
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            // Looked up, not carried as a pointer: a connection served earlier in the batch may have closed.
            connections[ready[index].data.u64]?.ready(ready[index].events)
        }
    }
}
