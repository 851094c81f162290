// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One accepted connection, told apart from every other the server accepts while the process runs: what a
/// handler keys state by that lives as long as the connection (a refresh claim), so that
/// ``VarlinkCallHandler/connectionClosed(_:)`` can end it.
public struct VarlinkConnectionID: Hashable, Sendable, CustomStringConvertible {
    /// A number no other connection of this process has had.
    public let rawValue: UInt64

    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// A new identity, never handed out before in this process.
    public static func next() -> VarlinkConnectionID {
        VarlinkConnectionID(rawValue: counter.add(1, ordering: .relaxed).newValue)
    }

    private static let counter = Atomic<UInt64>(0)

    public var description: String { "connection \(rawValue)" }
}

/// Handles the calls that arrive on a connection, one after another, in order.
public protocol VarlinkCallHandler: Sendable {
    /// Handles one call: sends no reply (`oneway`), one, or several (`more`) through `replies`, which may be
    /// kept and used from elsewhere until the call returns.
    func handle(_ call: VarlinkCall, from peer: Caller, replies: VarlinkReplies) async

    /// Handles one call made on `connection`. The server calls this one; the default passes the call on to
    /// ``handle(_:from:replies:)``, for handlers that keep nothing per connection.
    func handle(
        _ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID, replies: VarlinkReplies
    ) async

    /// `connection` is closed and none of its calls runs any more: called once, after its last call returned,
    /// so that what the connection held (a refresh claim) ends with it. The default does nothing.
    func connectionClosed(_ connection: VarlinkConnectionID) async

    /// The whole reply to `call` when it can be given at once without waiting (a read of state held in
    /// memory), or nil to have the call go through ``handle(_:from:send:)``. Called on the connection's event
    /// loop, only when no earlier call of the connection is still running, so replies keep their order; it
    /// must not block.
    func answerImmediately(_ call: VarlinkCall, from peer: Caller) -> [UInt8]?
}

extension VarlinkCallHandler {
    public func answerImmediately(_ call: VarlinkCall, from peer: Caller) -> [UInt8]? { nil }

    public func handle(
        _ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID, replies: VarlinkReplies
    ) async {
        await handle(call, from: peer, replies: replies)
    }

    public func connectionClosed(_ connection: VarlinkConnectionID) async {}

    /// Handles one call whose replies go to `send`, each a framed message.
    public func handle(_ call: VarlinkCall, from peer: Caller, send: @escaping VarlinkSend) async {
        await handle(call, from: peer, replies: VarlinkReplies(send: send))
    }
}

/// Answers `org.varlink.service` (GetInfo, GetInterfaceDescription) for the interfaces it serves, refuses
/// unknown interfaces and `upgrade`, and passes every other call on to the interface's handler.
public struct VarlinkServiceHandler: VarlinkCallHandler {
    private let info: VarlinkService.Info
    private let interfaces: [String: (description: String, handler: any VarlinkCallHandler)]
    /// Each interface's name and a dot, with what answers its calls at once, for ``answerImmediately(_:from:)``:
    /// matching the method's bytes against these costs less than making its interface a string and hashing it.
    private let prefixes: [[UInt8]]
    /// What answers the calls of the interface of the same index in ``prefixes``.
    private let answerers: [Answerer]

    /// What answers an interface's calls at once.
    private enum Answerer {
        /// `org.varlink.service`: this handler, from what it holds.
        case service
        case interface(any VarlinkCallHandler)
    }

    /// - Parameter interfaces: Each served interface's name, description and handler.
    public init(
        vendor: String,
        product: String,
        version: String,
        url: String,
        interfaces: [(name: String, description: String, handler: any VarlinkCallHandler)]
    ) {
        var served: [String: (String, any VarlinkCallHandler)] = [:]
        for interface in interfaces { served[interface.name] = (interface.description, interface.handler) }
        self.interfaces = served
        self.prefixes = (interfaces.map(\.name) + [VarlinkService.name]).map { Array(($0 + ".").utf8) }
        self.answerers = interfaces.map { .interface($0.handler) } + [.service]
        self.info = VarlinkService.Info(
            vendor: vendor,
            product: product,
            version: version,
            url: url,
            interfaces: [VarlinkService.name] + interfaces.map(\.name)
        )
    }

    public func handle(_ call: VarlinkCall, from peer: Caller, replies: VarlinkReplies) async {
        await handle(call, from: peer, connection: .next(), replies: replies)
    }

    public func handle(
        _ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID, replies: VarlinkReplies
    ) async {
        let reply = call.oneway ? VarlinkReplies.discarded : replies
        do {
            guard !call.upgrade else { throw VarlinkError.methodNotImplemented(call.method) }
            guard let interface = call.interface else { throw VarlinkError.interfaceNotFound(call.method) }
            if interface == VarlinkService.name {
                try reply.send(serviceReply(call))
            } else if let served = interfaces[interface] {
                await served.handler.handle(call, from: peer, connection: connection, replies: replies)
            } else {
                throw VarlinkError.interfaceNotFound(interface)
            }
        } catch let error as VarlinkError {
            try? reply.send(VarlinkReplyEncoder.error(error))
        } catch {
            // The connection is gone.
        }
    }

    public func connectionClosed(_ connection: VarlinkConnectionID) async {
        for served in interfaces.values { await served.handler.connectionClosed(connection) }
    }

    public func answerImmediately(_ call: VarlinkCall, from peer: Caller) -> [UInt8]? {
        guard !call.upgrade else { return nil }
        // The interface whose name is all of the method's up to its last dot, as `call.interface` says: compared
        // with memcmp and memchr over the bytes, as this runs for every call, with no string made of either.
        let prefixes = prefixes  // the closure takes the array alone, not a copy of the handler
        let matched = call.withMethod { method -> Int? in
            guard let base = method.baseAddress else { return nil }
            for index in prefixes.indices {
                let matches = prefixes[index].withUnsafeBytes { prefix in
                    method.count >= prefix.count && memcmp(base, prefix.baseAddress!, prefix.count) == 0
                        && memchr(base + prefix.count, Int32(UInt8(ascii: ".")), method.count - prefix.count) == nil
                }
                if matches { return index }
            }
            return nil
        }
        guard let matched else { return nil }
        switch answerers[matched] {
        case .interface(let handler): return handler.answerImmediately(call, from: peer)
        case .service where !call.oneway:
            // What this handler holds: a client's first call (`authctl status` asks GetInfo) needs no other thread.
            do {
                return try serviceReply(call)
            } catch let error as VarlinkError {
                return VarlinkReplyEncoder.error(error)
            } catch {
                return nil
            }
        case .service: return nil
        }
    }

    /// The reply to an `org.varlink.service` call.
    private func serviceReply(_ call: VarlinkCall) throws -> [UInt8] {
        switch call.method {
        case "org.varlink.service.GetInfo":
            _ = try call.parameters(EmptyPayload.self)  // refuses a parameter, as every method does
            return try VarlinkReplyEncoder.reply(info)
        case "org.varlink.service.GetInterfaceDescription":
            let name = try call.parameters(VarlinkService.DescriptionParameters.self).interface
            let description =
                name == VarlinkService.name ? VarlinkService.description : interfaces[name]?.description
            guard let description else { throw VarlinkError.interfaceNotFound(name) }
            return try VarlinkReplyEncoder.reply(VarlinkService.DescriptionResult(description: description))
        default:
            throw VarlinkError.methodNotFound(call.method)
        }
    }
}
