// SPDX-License-Identifier: Apache-2.0
import CSystemd
import CSystemdShim

#if canImport(Glibc)
    import Glibc
#endif

/// A method an exported interface offers to unprivileged peers, handled on the connection's thread.
///
/// ```swift
/// let watch = BusMethod(member: "Watch", signature: "s", parameterNames: ["group"]) { call in
///     guard let group = call.string(), let (uid, _, _) = call.senderCredentials() else { return .error(…) }
///     return .empty
/// }
/// ```
public struct BusMethod {
    /// The member name, such as `Watch`.
    public var member: String
    /// The D-Bus signature of its arguments, such as `s`.
    public var signature: String
    /// The D-Bus signature of its results (empty: none).
    public var result: String
    /// The arguments' names, then the results' names.
    public var parameterNames: [String]
    /// Answers a call; runs on the connection's thread, inside ``BusConnection/process()``.
    public var handler: (BusMethodCall) -> BusMethodReply

    public init(
        member: String, signature: String, result: String = "", parameterNames: [String],
        handler: @escaping (BusMethodCall) -> BusMethodReply
    ) {
        self.member = member
        self.signature = signature
        self.result = result
        self.parameterNames = parameterNames
        self.handler = handler
    }
}

/// What a ``BusMethod`` answers.
public enum BusMethodReply {
    /// An empty method return.
    case empty
    /// A D-Bus error, such as `org.freedesktop.DBus.Error.AccessDenied`, with a message for a person.
    case error(name: String, message: String)
    /// The answer comes later, through the ``BusDeferredReply`` the handler took (``BusMethodCall/replyLater()``).
    case later
}

/// The reply to a method call that its handler answers later (after a call of its own to the bus), once.
public final class BusDeferredReply {
    private var call: OpaquePointer?

    fileprivate init(call: OpaquePointer) { self.call = sd_bus_message_ref(call) }

    deinit { if let call { sd_bus_message_unref(call) } }

    /// Sends `reply` (``BusMethodReply/empty`` or an error); a second send does nothing.
    public func send(_ reply: BusMethodReply) {
        guard let call else { return }
        defer {
            sd_bus_message_unref(call)
            self.call = nil
        }
        var message: OpaquePointer?
        switch reply {
        case .empty, .later:
            guard sd_bus_message_new_method_return(call, &message) >= 0 else { return }
        case .error(let name, let text):
            var error = sd_bus_error()
            defer { sd_bus_error_free(&error) }
            sd_bus_error_set(&error, name, text)
            guard sd_bus_message_new_method_error(call, &message, &error) >= 0 else { return }
        }
        defer { sd_bus_message_unref(message) }
        _ = sd_bus_send(nil, message, nil)
    }
}

/// One incoming method call, valid while its handler runs.
public struct BusMethodCall {
    fileprivate let message: OpaquePointer

    /// Takes the reply over: the handler returns ``BusMethodReply/later`` and sends it through this.
    public func replyLater() -> BusDeferredReply { BusDeferredReply(call: message) }

    /// The caller's unique bus name, such as `:1.42`.
    public var sender: String {
        guard let name = sd_bus_message_get_sender(message) else { return "" }
        return String(cString: name)
    }

    /// Reads the next argument as a string; nil when it is not one.
    public func string() -> String? {
        var value: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &value) > 0, let value else {
            return nil
        }
        return String(cString: value)
    }

    /// Who the caller is, as the bus vouches for it (`GetConnectionCredentials`: the kernel's `SO_PEERCRED` and
    /// `SO_PEERGROUPS` of the caller's connection to the bus), or nil when the bus does not say its uid. The
    /// primary group is nil when the bus does not give it (dbus-daemon gives the groups as one list).
    public func senderCredentials() -> (uid: UInt32, gid: UInt32?, groups: [UInt32])? {
        var credentials: OpaquePointer?
        let mask =
            UInt64(SD_BUS_CREDS_EUID) | UInt64(SD_BUS_CREDS_UID) | UInt64(SD_BUS_CREDS_EGID)
            | UInt64(SD_BUS_CREDS_SUPPLEMENTARY_GIDS)
        guard sd_bus_query_sender_creds(message, mask, &credentials) >= 0, let credentials else { return nil }
        defer { sd_bus_creds_unref(credentials) }
        var uid = uid_t()
        guard sd_bus_creds_get_euid(credentials, &uid) >= 0 || sd_bus_creds_get_uid(credentials, &uid) >= 0 else {
            return nil
        }
        var gid = gid_t()
        let primary: UInt32? = sd_bus_creds_get_egid(credentials, &gid) >= 0 ? gid : nil
        var list: UnsafePointer<gid_t>?
        let count = sd_bus_creds_get_supplementary_gids(credentials, &list)
        let groups = count > 0 && list != nil ? Array(UnsafeBufferPointer(start: list, count: Int(count))) : []
        return (uid, primary, groups.sorted())
    }
}

/// Dispatches sd-bus method calls to the ``BusMethod`` handlers of one registration.
func exauthdMethodHandler(
    _ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?, _ error: UnsafeMutablePointer<sd_bus_error>?
) -> Int32 {
    guard let message, let userdata else { return -EINVAL }
    let registration = Unmanaged<BusObjectRegistration>.fromOpaque(userdata).takeUnretainedValue()
    let member = sd_bus_message_get_member(message).map { String(cString: $0) } ?? ""
    guard let method = registration.methods.first(where: { $0.member == member }) else { return 0 }
    switch method.handler(BusMethodCall(message: message)) {
    case .empty:
        var reply: OpaquePointer?
        let created = sd_bus_message_new_method_return(message, &reply)
        guard created >= 0 else { return created }
        defer { sd_bus_message_unref(reply) }
        return sd_bus_send(nil, reply, nil)
    case .error(let name, let text):
        return sd_bus_error_set(error, name, text)
    case .later:
        return 1
    }
}

/// Calls its handler, on the connection's thread, when the peer it tracks leaves the bus; see
/// ``BusConnection/track(_:onGone:)``. Stops tracking when released.
public final class BusPeerTrack {
    fileprivate var track: OpaquePointer?
    fileprivate let onGone: () -> Void

    fileprivate init(onGone: @escaping () -> Void) { self.onGone = onGone }

    deinit {
        if let track { sd_bus_track_unref(track) }
    }
}

extension BusConnection {
    /// Calls `onGone` (from ``process()``) once `peer`, a unique name such as `:1.42`, has left the bus.
    ///
    /// - Returns: The tracking; release it to stop.
    public func track(_ peer: String, onGone: @escaping () -> Void) throws(SystemdError) -> BusPeerTrack {
        let tracking = BusPeerTrack(onGone: onGone)
        var track: OpaquePointer?
        let context = Unmanaged.passUnretained(tracking).toOpaque()
        let created = sd_bus_track_new(
            bus, &track,
            { _, userdata in
                Unmanaged<BusPeerTrack>.fromOpaque(userdata!).takeUnretainedValue().onGone()
                return 0
            }, context)
        guard created >= 0, let track else {
            throw SystemdError(
                code: .busCall, function: "sd_bus_track_new", returned: created, context: "cannot track \(peer)")
        }
        tracking.track = track
        let added = sd_bus_track_add_name(track, peer)
        guard added >= 0 else {
            throw SystemdError(
                code: .busCall, function: "sd_bus_track_add_name", returned: added, context: "cannot track \(peer)")
        }
        return tracking
    }
}
