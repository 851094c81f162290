// SPDX-License-Identifier: Apache-2.0
import CEpoll
import Systemd

#if canImport(Glibc)
    import Glibc
#endif

/// Watches the connections' sockets for the loop: the first ``directLimit`` each as a source of the loop, as
/// sd-varlink watches its connections, the others gathered in one epoll set that is itself one source.
///
/// sd-event re-polls with `epoll_wait(…, 0)` before dispatching each pending source and walks every ready
/// descriptor each time: with one source per connection, a turn in which N connections are ready costs N² events
/// (`authd-bench --only throughput` shows it with many busy clients). The set's one dispatch
/// serves up to ``batch`` ready connections, each once, and the loop polls its other sources (signals, timers, the
/// bus, the executor) between two batches; but reaching a connection through it costs a second `epoll_wait` and
/// a second wake-up in the kernel. So a connection is a source of its own while fewer than ``directLimit`` are,
/// which bounds the re-polling to that many, and joins the set otherwise: where it is watched is decided once,
/// when it is added.
///
/// Confined to the loop's thread, as the connections are (see ``ServerConnection``): its properties are
/// `@exclusivity(unchecked)`.
final class ConnectionPoller {
    /// How one connection is watched.
    private enum Watch {
        /// As a source of the loop of its own.
        case source(EventSource)
        /// In the epoll set, at this slot.
        case slot(Int)
    }

    /// The most connections one dispatch serves.
    static let batch = 64
    /// The most connections watched as sources of their own.
    static let directLimit = 8

    private unowned let loop: MainLoop
    private let descriptor: Int32
    @exclusivity(unchecked) private var source: EventSource?
    /// How each connection is watched.
    @exclusivity(unchecked) private var watches: [ObjectIdentifier: Watch] = [:]
    /// How many connections are sources of their own.
    @exclusivity(unchecked) private var ownSources = 0
    /// The connections in the set, each in a slot whose index and the connection's identity are its events' data.
    @exclusivity(unchecked) private var slots: [ServerConnection?] = []
    /// Slots left empty by connections that closed.
    @exclusivity(unchecked) private var freeSlots: [Int] = []
    @exclusivity(unchecked) private var ready = [epoll_event](repeating: epoll_event(), count: ConnectionPoller.batch)

    /// An empty set, watched by `loop`.
    init(loop: MainLoop) throws(VarlinkServerError) {
        self.loop = loop
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
        if ownSources < Self.directLimit {
            do {
                let source = try loop.watch(connection.descriptor, events: events) {
                    [unowned connection] in connection.ready($0)
                }
                watches[ObjectIdentifier(connection)] = .source(source)
                ownSources += 1
                return
            } catch {
                throw VarlinkServerError(message: "cannot watch a connection: \(error)")
            }
        }
        let slot = freeSlots.popLast() ?? slots.count
        var event = epoll_event(events: events, data: epoll_data_t(u64: Self.data(slot, connection)))
        guard epoll_ctl(descriptor, EPOLL_CTL_ADD, connection.descriptor, &event) == 0 else {
            if slot < slots.count { freeSlots.append(slot) }
            throw VarlinkServerError(message: "cannot watch a connection: \(String(cString: strerror(errno)))")
        }
        if slot == slots.count { slots.append(connection) } else { slots[slot] = connection }
        watches[ObjectIdentifier(connection)] = .slot(slot)
    }

    /// Changes what `connection`'s socket is watched for.
    func modify(_ connection: ServerConnection, events: UInt32) {
        switch watches[ObjectIdentifier(connection)] {
        case .source(let source)?: source.setEvents(events)
        case .slot(let slot)?:
            var event = epoll_event(events: events, data: epoll_data_t(u64: Self.data(slot, connection)))
            _ = epoll_ctl(descriptor, EPOLL_CTL_MOD, connection.descriptor, &event)
        case nil: break
        }
    }

    /// Stops watching `connection`; call it before its socket is closed.
    func remove(_ connection: ServerConnection) {
        switch watches.removeValue(forKey: ObjectIdentifier(connection)) {
        case .source(let source)?:
            source.cancel()
            ownSources -= 1
        case .slot(let slot)?:
            var unused = epoll_event()
            _ = epoll_ctl(descriptor, EPOLL_CTL_DEL, connection.descriptor, &unused)
            slots[slot] = nil
            freeSlots.append(slot)
        case nil: break
        }
    }

    /// An event's data: the slot in the low half, the connection's identity (its low half) in the high half, so
    /// that an event of a connection that closed earlier in a batch never reaches one that took its slot.
    private static func data(_ slot: Int, _ connection: ServerConnection) -> UInt64 {
        UInt64(UInt32(truncatingIfNeeded: slot)) | connection.identity.rawValue << 32
    }

    /// Serves the connections ready now, each once.
    private func dispatch() {
        let count = epoll_wait(descriptor, &ready, Int32(ready.count), 0)
        guard count > 0 else { return }
        for index in 0..<Int(count) {
            // Looked up, not carried as a pointer: a connection served earlier in the batch may have closed.
            let data = ready[index].data.u64
            let slot = Int(data & 0xFFFF_FFFF)
            guard slot < slots.count, let connection = slots[slot], Self.data(slot, connection) == data else {
                continue
            }
            connection.ready(ready[index].events)
        }
    }
}
