// SPDX-License-Identifier: Apache-2.0
import CSystemd
import CSystemdShim

#if canImport(Glibc)
    import Glibc
#endif

/// A connection to a D-Bus bus through sd-bus (`sd-bus(3)`): request a name, export an object with signals,
/// emit signals.
///
/// sd-bus objects are not thread-safe: a connection belongs to the one thread that opened it, which drives it
/// with ``process()`` and ``wait(timeout:)`` (or polls ``fileDescriptor`` for ``events`` until ``timeout``).
/// That is why this class is not `Sendable`.
///
/// ```swift
/// let bus = try BusConnection(address: address)
/// try bus.requestName("com.exponea.AuthD1")
/// let object = try bus.exportObject(path: "/com/exponea/AuthD1", interface: "com.exponea.AuthD1.Manager",
///                                   signals: [BusSignal(member: "Cleared", signature: "ss",
///                                                       parameterNames: ["group", "cause"])])
/// try bus.emitSignal(path: "/com/exponea/AuthD1", interface: "com.exponea.AuthD1.Manager",
///                    member: "Cleared", arguments: [.string("shop"), .string("anonymize")])
/// try bus.flush()
/// ```
public final class BusConnection {
    let bus: OpaquePointer
    /// The handlers of ``requestName(_:then:)`` and ``onDisconnect(_:)``, kept as long as the connection.
    private var callbacks: [BusCallback] = []
    private var slots: [OpaquePointer] = []

    /// Connects to the bus at `address` (such as `unix:path=/run/dbus/system_bus_socket`).
    public convenience init(address: String) throws(SystemdError) {
        var bus: OpaquePointer?
        try Self.check(sd_bus_new(&bus), "sd_bus_new", .busConnection, "cannot create a bus connection")
        guard let bus else {
            throw SystemdError(code: .busConnection, function: "sd_bus_new", errno: ENOMEM, context: "no bus")
        }
        do {
            try Self.check(
                sd_bus_set_address(bus, address),
                "sd_bus_set_address",
                .invalidArgument,
                "the bus address '\(address)' is not valid"
            )
            try Self.check(sd_bus_set_bus_client(bus, 1), "sd_bus_set_bus_client", .busConnection, "bus client")
            try Self.check(sd_bus_start(bus), "sd_bus_start", .busConnection, "cannot connect to the bus at \(address)")
        } catch {
            sd_bus_unref(bus)
            throw error
        }
        self.init(bus)
    }

    /// Connects to the system bus (`$DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`).
    public static func system() throws(SystemdError) -> BusConnection {
        try open(sd_bus_open_system, "sd_bus_open_system", "cannot connect to the system bus")
    }

    /// Connects to the user bus of the current user (`$DBUS_SESSION_BUS_ADDRESS`, else
    /// `$XDG_RUNTIME_DIR/bus`).
    public static func user() throws(SystemdError) -> BusConnection {
        try open(sd_bus_open_user, "sd_bus_open_user", "cannot connect to the user bus")
    }

    private init(_ bus: OpaquePointer) {
        self.bus = bus
    }

    deinit {
        for slot in slots { sd_bus_slot_unref(slot) }
        sd_bus_flush_close_unref(bus)
    }

    /// This connection's unique name on the bus, such as `:1.42`.
    public var uniqueName: String {
        var name: UnsafePointer<CChar>?
        guard sd_bus_get_unique_name(bus, &name) >= 0, let name else { return "" }
        return String(cString: name)
    }

    /// Takes the well-known `name` for this connection.
    ///
    /// - Throws: ``SystemdError`` when the bus refuses (another owner, or a policy without `<allow own=…>`).
    public func requestName(_ name: String) throws(SystemdError) {
        try Self.check(
            sd_bus_request_name(bus, name, 0),
            "sd_bus_request_name",
            .busCall,
            "cannot own the bus name \(name); is another instance running, or does the D-Bus policy not allow it?"
        )
    }

    /// Asks for the well-known `name` without waiting: `completion` gets nil once the connection owns it, or
    /// the reason it does not, from the dispatch that reads the reply (``process()``, or the ``MainLoop`` the
    /// connection is attached to).
    public func requestName(_ name: String, then completion: @escaping (SystemdError?) -> Void) throws(SystemdError) {
        let callback = BusCallback { message in
            var error = sd_bus_error()
            defer { sd_bus_error_free(&error) }
            if sd_bus_message_is_method_error(message, nil) > 0 {
                let code = sd_bus_message_get_errno(message)
                completion(
                    SystemdError(
                        code: .busCall, function: "sd_bus_request_name_async", errno: code == 0 ? EIO : code,
                        context: "cannot own the bus name \(name); does the D-Bus policy allow it?"))
                return
            }
            var reply: UInt32 = 0
            let read = sd_bus_message_read_basic(message, CChar(UInt8(ascii: "u")), &reply)
            // 1: the primary owner now; 4: already was. 2 (queued) and 3 (exists) mean another owner has it.
            completion(
                read >= 0 && (reply == 1 || reply == 4)
                    ? nil
                    : SystemdError(
                        code: .busCall, function: "sd_bus_request_name_async", errno: EEXIST,
                        context: "cannot own the bus name \(name); is another instance running?"))
        }
        var slot: OpaquePointer?
        // The sd-bus flag 0 asks the bus not to queue the request behind another owner.
        try Self.check(
            sd_bus_request_name_async(
                bus, &slot, name, 0, { message, userdata, _ in BusCallback.handle(message, userdata) },
                callback.userdata),
            "sd_bus_request_name_async", .busCall, "cannot ask for the bus name \(name)")
        keep(callback, slot)
    }

    /// What the bus says of a peer (`GetConnectionCredentials`): what the kernel said of the peer's connection to
    /// the bus.
    public struct PeerCredentials: Sendable {
        /// `UnixGroupIDs` (`SO_PEERGROUPS`), ascending; nil when the bus does not say.
        public var groups: [UInt32]?
        /// `ProcessID` (`SO_PEERCRED`); nil when the bus does not say.
        public var pid: Int32?
    }

    /// Asks the bus about `peer`, a unique name such as `:1.42`, without waiting: `GetConnectionCredentials`'
    /// `UnixGroupIDs` and `ProcessID`. `completion` gets them from the dispatch that reads the reply, or nil when
    /// the bus does not say (an error, or no reply within 5 s).
    public func credentials(
        of peer: String, then completion: @escaping (PeerCredentials?) -> Void
    ) throws(SystemdError) {
        var call: OpaquePointer?
        try Self.check(
            sd_bus_message_new_method_call(
                bus, &call, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                "GetConnectionCredentials"),
            "sd_bus_message_new_method_call", .busCall, "cannot ask the bus who \(peer) is")
        defer { sd_bus_message_unref(call) }
        _ = peer.withCString { sd_bus_message_append_basic(call, CChar(UInt8(ascii: "s")), $0) }
        // Retained until its one reply; the slot is the bus's (floating), freed after the callback.
        let callback = Unmanaged.passRetained(BusCallback { completion(Self.peerCredentials(in: $0)) })
        let result = sd_bus_call_async(
            bus, nil, call,
            { message, userdata, _ in
                guard let userdata else { return 0 }
                Unmanaged<BusCallback>.fromOpaque(userdata).takeRetainedValue().body(message)
                return 0
            }, callback.toOpaque(), 5_000_000)
        if result < 0 {
            callback.release()
            try Self.check(result, "sd_bus_call_async", .busCall, "cannot ask the bus who \(peer) is")
        }
    }

    /// `UnixGroupIDs` and `ProcessID` of a `GetConnectionCredentials` reply (`a{sv}`).
    private static func peerCredentials(in reply: OpaquePointer?) -> PeerCredentials? {
        guard let reply, sd_bus_message_is_method_error(reply, nil) == 0,
            sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "a")), "{sv}") > 0
        else { return nil }
        var found = PeerCredentials()
        while sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "e")), "sv") > 0 {
            var key: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "s")), &key) > 0, let key else { return found }
            if strcmp(key, "UnixGroupIDs") == 0,
                sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "v")), "au") > 0
            {
                var gids: [UInt32] = []
                if sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "a")), "u") > 0 {
                    var gid: UInt32 = 0
                    while sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &gid) > 0 { gids.append(gid) }
                    sd_bus_message_exit_container(reply)
                }
                sd_bus_message_exit_container(reply)
                found.groups = gids.sorted()
            } else if strcmp(key, "ProcessID") == 0,
                sd_bus_message_enter_container(reply, CChar(UInt8(ascii: "v")), "u") > 0
            {
                var pid: UInt32 = 0
                if sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &pid) > 0, pid > 0, pid <= Int32.max {
                    found.pid = Int32(pid)
                }
                sd_bus_message_exit_container(reply)
            } else {
                sd_bus_message_skip(reply, "v")
            }
            sd_bus_message_exit_container(reply)
        }
        return found
    }

    /// Calls `handler` once the connection is lost (the bus went away or closed it), from the dispatch that
    /// notices it.
    public func onDisconnect(_ handler: @escaping () -> Void) throws(SystemdError) {
        let callback = BusCallback { message in
            if sd_bus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") > 0 { handler() }
        }
        var slot: OpaquePointer?
        try Self.check(
            sd_bus_add_filter(
                bus, &slot, { message, userdata, _ in BusCallback.handle(message, userdata) }, callback.userdata),
            "sd_bus_add_filter", .busCall,
            "cannot watch the bus connection")
        keep(callback, slot)
    }

    private func keep(_ callback: BusCallback, _ slot: OpaquePointer?) {
        callbacks.append(callback)
        if let slot { slots.append(slot) }
    }

    /// Exports an object at `path` with `interface` declaring `signals`, so that `busctl introspect` lists
    /// them. The object stays exported as long as the returned registration lives.
    public func exportObject(
        path: String, interface: String, methods: [BusMethod] = [], signals: [BusSignal]
    ) throws(SystemdError) -> BusObjectRegistration {
        let registration = BusObjectRegistration(methods: methods, signals: signals)
        guard let vtable = registration.vtable else {
            throw SystemdError(code: .busCall, function: "exauthd_bus_vtable_new", errno: ENOMEM, context: "vtable")
        }
        var slot: OpaquePointer?
        try Self.check(
            sd_bus_add_object_vtable(
                bus, &slot, path, interface, vtable, Unmanaged.passUnretained(registration).toOpaque()),
            "sd_bus_add_object_vtable",
            .busCall,
            "cannot export \(interface) at \(path)"
        )
        registration.slot = slot
        return registration
    }

    /// Queues a signal; ``flush()`` or the next ``process()`` sends it. With a `destination` (a unique name
    /// such as `:1.42`) only that peer receives it; without, every peer whose match rules select it.
    public func emitSignal(
        path: String, interface: String, member: String, arguments: [BusValue], destination: String? = nil
    ) throws(SystemdError) {
        var message: OpaquePointer?
        try Self.check(
            sd_bus_message_new_signal(bus, &message, path, interface, member),
            "sd_bus_message_new_signal",
            .busCall,
            "cannot create the signal \(interface).\(member)"
        )
        defer { sd_bus_message_unref(message) }
        if let destination {
            try Self.check(
                sd_bus_message_set_destination(message, destination),
                "sd_bus_message_set_destination",
                .busCall,
                "cannot address \(interface).\(member) to \(destination)"
            )
        }
        for argument in arguments {
            try Self.check(
                Self.append(argument, to: message),
                "sd_bus_message_append_basic",
                .busCall,
                "cannot add an argument to \(interface).\(member)"
            )
        }
        try Self.check(sd_bus_send(bus, message, nil), "sd_bus_send", .busCall, "cannot send \(interface).\(member)")
    }

    /// Does one step of pending work (reads, dispatches, writes).
    ///
    /// - Returns: Whether more work may be pending; call again before waiting.
    @discardableResult
    public func process() throws(SystemdError) -> Bool {
        let result = sd_bus_process(bus, nil)
        try Self.check(result, "sd_bus_process", .busConnection, "the bus connection failed")
        return result > 0
    }

    /// Waits until there is work for ``process()``, at most `timeout` (nil: as long as the bus needs).
    public func wait(timeout: Duration?) throws(SystemdError) {
        let microseconds = timeout.map { UInt64(max(0, $0 / .microseconds(1))) } ?? UInt64.max
        let result = sd_bus_wait(bus, microseconds)
        if result == -EINTR { return }
        try Self.check(result, "sd_bus_wait", .busConnection, "cannot wait on the bus")
    }

    /// Closes the connection at once, dropping what is queued (releasing it would first wait to send it).
    public func close() {
        sd_bus_close(bus)
    }

    /// Sends everything queued.
    public func flush() throws(SystemdError) {
        try Self.check(sd_bus_flush(bus), "sd_bus_flush", .busConnection, "cannot send to the bus")
    }

    /// The file descriptor to poll, for a caller with its own event loop.
    public var fileDescriptor: Int32 { sd_bus_get_fd(bus) }

    /// The `poll(2)` events to wait for on ``fileDescriptor``.
    public var events: Int16 { Int16(truncatingIfNeeded: sd_bus_get_events(bus)) }

    /// How long a poll may wait before ``process()`` must run anyway, or nil for no limit.
    public var timeout: Duration? {
        var deadline: UInt64 = 0
        guard sd_bus_get_timeout(bus, &deadline) >= 0, deadline != UInt64.max else { return nil }
        // The deadline is absolute CLOCK_MONOTONIC microseconds (0: process at once).
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
        return .microseconds(Int64(clamping: deadline > nowMicroseconds ? deadline - nowMicroseconds : 0))
    }

    // MARK: Helpers

    private static func open(
        _ opener: (UnsafeMutablePointer<OpaquePointer?>?) -> Int32,
        _ function: String,
        _ context: String
    ) throws(SystemdError) -> BusConnection {
        var bus: OpaquePointer?
        try check(opener(&bus), function, .busConnection, context)
        guard let bus else {
            throw SystemdError(code: .busConnection, function: function, errno: ENOMEM, context: context)
        }
        return BusConnection(bus)
    }

    private static func check(_ result: Int32, _ function: String, _ code: SystemdError.Code, _ context: String)
        throws(SystemdError)
    {
        if result < 0 { throw SystemdError(code: code, function: function, returned: result, context: context) }
    }

    private static func append(_ value: BusValue, to message: OpaquePointer?) -> Int32 {
        let type = CChar(UInt8(ascii: value.typeCode.unicodeScalars.first!))
        switch value {
        case .string(let text), .objectPath(let text):
            // For string types sd-bus takes the string itself, not a pointer to it.
            return text.withCString { sd_bus_message_append_basic(message, type, $0) }
        case .bool(let flag):
            var number: Int32 = flag ? 1 : 0  // D-Bus booleans are 32-bit
            return sd_bus_message_append_basic(message, type, &number)
        case .int32(var number): return sd_bus_message_append_basic(message, type, &number)
        case .uint32(var number): return sd_bus_message_append_basic(message, type, &number)
        case .int64(var number): return sd_bus_message_append_basic(message, type, &number)
        case .uint64(var number): return sd_bus_message_append_basic(message, type, &number)
        case .double(var number): return sd_bus_message_append_basic(message, type, &number)
        }
    }
}

/// A message handler of sd-bus (a reply or a filter), handed to it as unretained userdata; the connection keeps
/// it alive.
private final class BusCallback {
    let body: (OpaquePointer?) -> Void

    init(_ body: @escaping (OpaquePointer?) -> Void) { self.body = body }

    var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    static func handle(_ message: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) -> Int32 {
        guard let userdata else { return 0 }
        let callback = Unmanaged<BusCallback>.fromOpaque(userdata).takeUnretainedValue()
        callback.body(message)
        return 0  // a filter that returns 0 lets the other handlers see the message too
    }
}

/// An object exported with ``BusConnection/exportObject(path:interface:signals:)``; unexported when released
/// or cancelled. Owns the vtable and the strings it points to.
public final class BusObjectRegistration {
    fileprivate var slot: OpaquePointer?
    fileprivate let vtable: UnsafeMutablePointer<sd_bus_vtable>?
    private var strings: [UnsafeMutablePointer<CChar>] = []

    /// The methods, looked up by member when a call comes.
    let methods: [BusMethod]

    fileprivate init(methods: [BusMethod], signals: [BusSignal]) {
        self.methods = methods
        var methodSpecs: [exauthd_bus_method] = []
        for method in methods {
            let member = strdup(method.member)!
            let signature = strdup(method.signature)!
            let result = strdup(method.result)!
            let names = Self.names(method.parameterNames)
            strings += [member, signature, result, names]
            methodSpecs.append(
                exauthd_bus_method(
                    member: member, signature: signature, result: result, names: names,
                    handler: exauthdMethodHandler))
        }
        var specs: [exauthd_bus_signal] = []
        for signal in signals {
            let member = strdup(signal.member)!
            let signature = strdup(signal.signature)!
            // "a\0b\0" plus the terminating NUL, as SD_BUS_PARAM concatenates them.
            let buffer = Self.names(signal.parameterNames)
            strings += [member, signature, buffer]
            specs.append(exauthd_bus_signal(member: member, signature: signature, names: buffer))
        }
        vtable = exauthd_bus_vtable_new_with_methods(methodSpecs, methodSpecs.count, specs, specs.count)
    }

    /// "a\0b\0" plus the terminating NUL, as SD_BUS_PARAM concatenates them; the caller frees it.
    private static func names(_ names: [String]) -> UnsafeMutablePointer<CChar> {
        let joined = Array(names.map { Array($0.utf8CString) }.joined())
        let buffer = malloc(joined.count + 1)!.bindMemory(to: CChar.self, capacity: joined.count + 1)
        buffer.initialize(from: joined + [0], count: joined.count + 1)
        return buffer
    }

    /// Unexports the object.
    public func cancel() {
        if let slot { sd_bus_slot_unref(slot) }
        slot = nil
    }

    deinit {
        cancel()
        free(vtable)
        for string in strings { free(string) }
    }
}
