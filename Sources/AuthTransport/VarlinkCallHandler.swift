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

/// A call's work that runs later, in the connection's task: on the loop, in the task's isolation (no hop to
/// another executor and back).
public typealias VarlinkWork = nonisolated(nonsending) @Sendable (VarlinkReplies) async -> Void

/// What becomes of a call, decided once, when its turn comes.
public enum VarlinkDispatch: Sendable {
    /// Answered in the turn that read it: the whole framed reply, or nil for a call that wants none (`oneway`).
    case answered([UInt8]?)
    /// Runs later, in the connection's task, after the calls before it: it sends its replies (none, one, or
    /// several for `more`) through the ``VarlinkReplies`` it is given, which it may hand on until it returns.
    case later(VarlinkWork)
}

/// Handles the calls that arrive on a connection, one after another, in order.
public protocol VarlinkCallHandler: Sendable {
    /// Dispatches `call`, made by `caller` on `connection`, once: answers it now (a read of state held in memory,
    /// an error) or returns the work that answers it later. Called on the connection's loop when the call's turn
    /// comes (no earlier call of the connection runs), so replies keep their order; it must not block.
    func dispatch(_ call: VarlinkCall, from caller: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch

    /// `connection` is closed and none of its calls runs any more: called once, after its last call returned,
    /// so that what the connection held (a refresh claim) ends with it. The default does nothing.
    func connectionClosed(_ connection: VarlinkConnectionID) async
}

extension VarlinkCallHandler {
    public func connectionClosed(_ connection: VarlinkConnectionID) async {}
}

extension VarlinkDispatch {
    /// A call's error, answered now; nothing for a `oneway` call.
    public static func error(_ error: VarlinkError, to call: VarlinkCall) -> VarlinkDispatch {
        .answered(call.oneway ? nil : VarlinkReplyEncoder.error(error))
    }

    /// A call's reply, answered now; nothing for a `oneway` call.
    public static func reply(_ reply: [UInt8], to call: VarlinkCall) -> VarlinkDispatch {
        .answered(call.oneway ? nil : reply)
    }
}

/// Answers `org.varlink.service` (GetInfo, GetInterfaceDescription) for the interfaces it serves, refuses
/// unknown interfaces and `upgrade`, and passes every other call on to the interface's handler.
public struct VarlinkServiceHandler: VarlinkCallHandler {
    private let info: VarlinkService.Info
    private let descriptions: [String: String]
    /// Each interface's name and a dot, matched against the method's bytes: a call's interface is found without
    /// making a string of either.
    private let prefixes: [[UInt8]]
    /// What answers the calls of the interface of the same index in ``prefixes``.
    private let answerers: [Answerer]
    /// The handlers told when a connection closes.
    private let handlers: [any VarlinkCallHandler]

    /// What answers an interface's calls.
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
        var descriptions: [String: String] = [:]
        for interface in interfaces { descriptions[interface.name] = interface.description }
        self.descriptions = descriptions
        self.prefixes = (interfaces.map(\.name) + [VarlinkService.name]).map { Array(($0 + ".").utf8) }
        self.answerers = interfaces.map { .interface($0.handler) } + [.service]
        self.handlers = interfaces.map(\.handler)
        self.info = VarlinkService.Info(
            vendor: vendor,
            product: product,
            version: version,
            url: url,
            interfaces: [VarlinkService.name] + interfaces.map(\.name)
        )
    }

    public func dispatch(_ call: VarlinkCall, from caller: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch {
        guard !call.upgrade else { return .error(.methodNotImplemented(call.method), to: call) }
        // The interface whose name is all of the method's up to its last dot, as `call.interface` says: compared
        // with memcmp and memchr over the bytes, as this runs for every call.
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
        guard let matched else { return .error(.interfaceNotFound(call.interface ?? call.method), to: call) }
        switch answerers[matched] {
        case .interface(let handler):
            return handler.dispatch(call, from: caller, connection: connection)
        case .service:
            // What this handler holds: a client's first call (`authctl status` asks GetInfo) needs no task.
            do {
                return .reply(try serviceReply(call), to: call)
            } catch let error as VarlinkError {
                return .error(error, to: call)
            } catch {
                return .error(.invalidParameter("parameters"), to: call)
            }
        }
    }

    public func connectionClosed(_ connection: VarlinkConnectionID) async {
        for handler in handlers { await handler.connectionClosed(connection) }
    }

    /// The reply to an `org.varlink.service` call.
    private func serviceReply(_ call: VarlinkCall) throws -> [UInt8] {
        switch call.method {
        case "org.varlink.service.GetInfo":
            _ = try call.parameters(EmptyPayload.self)  // refuses a parameter, as every method does
            return try VarlinkReplyEncoder.reply(info)
        case "org.varlink.service.GetInterfaceDescription":
            let name = try call.parameters(VarlinkService.DescriptionParameters.self).interface
            let description = name == VarlinkService.name ? VarlinkService.description : descriptions[name]
            guard let description else { throw VarlinkError.interfaceNotFound(name) }
            return try VarlinkReplyEncoder.reply(VarlinkService.DescriptionResult(description: description))
        default:
            throw VarlinkError.methodNotFound(call.method)
        }
    }
}
