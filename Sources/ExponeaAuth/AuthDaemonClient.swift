// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The daemon's `com.exponea.Auth` interface, one method a call: what ``ExponeaAuthClient`` and `authctl`
/// are built on.
///
/// Calls may overlap: each takes an idle connection or opens one, so a long call (`WaitForToken`, a clear
/// waiting for the apps' flushes) never holds up a short one; a few idle connections are kept for the next
/// calls. When the daemon is away (not started yet, restarting) a call
/// keeps trying to connect for ``unavailableBound`` and then fails with
/// ``AuthClientError/Code/daemonUnavailable``; a call cut off by a restart fails with
/// ``AuthClientError/Code/connectionLost`` and the next call connects again.
///
/// Every wait is bounded: a daemon that accepts the connection but does not answer (stopped, hung, overloaded)
/// fails a call after ``callTimeout`` (5 s by default; more for a call that waits by design, `waitForToken`'s
/// own timeout, a clear's ``flushWait``) with ``AuthClientError/Code/timedOut``, whose message names the socket
/// (``AuthClientError/timedOut(socket:after:)``).
///
/// A call runs on its caller's thread, over a plain blocking Unix socket, as a C client's would: it writes the
/// call and reads the reply, which the daemon gives in tens of microseconds, with no thread switch. A reply that
/// takes more than 2 ms is awaited on a thread of its own, so a slow daemon never holds the caller's executor.
///
/// ```swift
/// let daemon = AuthDaemonClient()
/// let current = try await daemon.getToken(group: "shop")
/// ```
public final class AuthDaemonClient: Sendable {
    /// The socket this client connects to.
    public let socketPath: String
    /// How long a call waits for a daemon that is away before it fails.
    public let unavailableBound: Duration
    /// How long connecting and each call may take before they fail with ``AuthClientError/Code/timedOut``.
    public let callTimeout: Duration
    /// How long an event subscription may stay silent before the client checks, with a call bounded by
    /// ``callTimeout`` on another connection, that the daemon still answers.
    public let keepAliveInterval: Duration
    /// How long `anonymize` and `stopIntegration` may wait for the apps' flushes, on top of ``callTimeout``
    /// (the daemon's `--flush-timeout` is 2 s by default).
    public let flushWait: Duration

    /// The default ``callTimeout``: 5 s, far above what any call takes from a daemon that runs.
    public static let defaultCallTimeout = Duration.seconds(5)
    /// The default ``keepAliveInterval``: 30 s, so a quiet subscription costs the daemon one call per 30 s.
    public static let defaultKeepAliveInterval = Duration.seconds(30)

    /// Connections without a call in flight, for the next calls.
    private let idle = Mutex(IdleConnections())

    /// Who may serve ``socketPath`` (checked with `SO_PEERCRED` before anything is sent).
    let trusted: TrustedServer

    /// - Parameters:
    ///   - socketPath: The daemon's socket; ``defaultSocketPath(environment:uid:exists:)`` when nil.
    ///   - unavailableBound: How long a call waits for a daemon that is away before it fails.
    ///   - callTimeout: How long connecting and each call may take (``defaultCallTimeout``, 5 s).
    ///   - keepAliveInterval: How long a subscription may be silent before the daemon is checked
    ///     (``defaultKeepAliveInterval``, 30 s).
    ///   - flushWait: How much longer than `callTimeout` a clear may wait for the apps' flushes (30 s).
    ///
    /// Every connection checks, before it sends anything, that the process listening on the socket runs as
    /// root, as the system daemon's user `exponea-authd` (for the system socket or a socket given here or in
    /// `$EXPONEA_AUTHD_SOCKET`), or as this process's user (for the user daemon's socket or a socket given);
    /// otherwise the call fails with ``AuthClientError/Code/untrustedServer``.
    public init(
        socketPath: String? = nil,
        unavailableBound: Duration = .seconds(2),
        callTimeout: Duration = defaultCallTimeout,
        keepAliveInterval: Duration = defaultKeepAliveInterval,
        flushWait: Duration = .seconds(30)
    ) {
        let (path, trusted) =
            socketPath.map { ($0, TrustedServer.eitherDaemon) }
            ?? Self.defaultSocket(environment: Self.socketEnvironment(), uid: getuid(), exists: Self.socketExists)
        self.socketPath = path
        self.trusted = trusted
        self.unavailableBound = unavailableBound
        self.callTimeout = callTimeout
        self.keepAliveInterval = keepAliveInterval
        self.flushWait = flushWait
    }

    deinit { closeIdleConnections() }

    /// Closes every idle connection.
    private func closeIdleConnections() {
        while let connection = idle.withLock({ $0.take() }) { connection.close() }
    }

    /// The two variables the default socket depends on, read without building the whole environment.
    private static func socketEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        for name in ["EXPONEA_AUTHD_SOCKET", "XDG_RUNTIME_DIR"] {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return environment
    }

    /// The socket to use when none is given: `$EXPONEA_AUTHD_SOCKET`; else the user daemon's socket
    /// (`$XDG_RUNTIME_DIR/exponea-authd/io.socket`, or `/tmp/exponea-authd-UID/io.socket` without
    /// `XDG_RUNTIME_DIR`) when it exists; else the system daemon's, `/run/exponea-authd/io.socket`.
    ///
    /// The `/tmp` fallback is used only when its directory is this user's own: a real directory (not a
    /// symbolic link), owned by `uid`, that nobody else may enter (mode 0700). Anyone can create that name
    /// first, so a directory that fails the check is ignored.
    public static func defaultSocketPath(
        environment: [String: String] = ProcessInfo.processInfo.environment,
        uid: UInt32 = getuid(),
        exists: (String) -> Bool = socketExists
    ) -> String {
        defaultSocket(environment: environment, uid: uid, exists: exists).path
    }

    /// The system daemon's socket.
    static let systemSocketPath = "/run/exponea-authd/io.socket"

    /// The default socket and who may serve it.
    static func defaultSocket(environment: [String: String], uid: UInt32, exists: (String) -> Bool)
        -> (path: String, trusted: TrustedServer)
    {
        if let path = environment["EXPONEA_AUTHD_SOCKET"], !path.isEmpty { return (path, .eitherDaemon) }
        let user: String?
        if let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") {
            user = "\(runtime)/exponea-authd/io.socket"
        } else {
            let directory = "/tmp/exponea-authd-\(uid)"
            user = isPrivateDirectory(directory, owner: uid) ? "\(directory)/io.socket" : nil
        }
        if let user, exists(user) { return (user, .userDaemon) }
        return (systemSocketPath, .systemDaemon)
    }

    /// Whether a file exists at `path` (a link is not followed).
    public static func socketExists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// Whether `path` is a directory (not a link to one) of `owner` that nobody else may enter.
    static func isPrivateDirectory(_ path: String, owner: UInt32) -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        return info.st_mode & S_IFMT == S_IFDIR && info.st_uid == owner && info.st_mode & 0o077 == 0
    }

    // MARK: Tokens

    /// Stores `token` for the group; every app of the group hears `tokenRefreshed` (R4, R6).
    nonisolated(nonsending) public func setToken(_ token: String, group: String) async throws(AuthClientError)
        -> SetTokenResult
    {
        try await call("SetToken", SetTokenParameters(group: group, token: CompactToken(token)))
    }

    /// The group's token, claims and generation, without side effects.
    nonisolated(nonsending) public func getToken(group: String) async throws(AuthClientError) -> GetTokenResult {
        try Self.read(try await exchange(Self.encodeGroupCall("com.exponea.Auth.GetToken", group: group)))
    }

    /// The check before a stream request (R15-R17); when it has a reason, the group's apps hear `jwtError`.
    nonisolated(nonsending) public func preflight(group: String) async throws(AuthClientError) -> PreflightResult {
        try Self.read(try await exchange(Self.encodeGroupCall("com.exponea.Auth.Preflight", group: group)))
    }

    /// Reports a stream request that failed with `status` and asks whether to retry (R19-R21).
    ///
    /// - Parameters:
    ///   - generation: The generation of the token the request carried; nil when it carried none.
    ///   - tokenExpired: The 401 body's `token_expired` flag.
    nonisolated(nonsending) public func reportAuthFailure(
        group: String, status: Int, generation: UInt64?, tokenExpired: Bool? = nil
    ) async throws(AuthClientError) -> ReportAuthFailureResult {
        try await call(
            "ReportAuthFailure",
            ReportAuthFailureParameters(
                group: group, status: status, generation: generation, tokenExpired: tokenExpired)
        )
    }

    /// Returns as soon as the group's generation is newer than `after`, or after `timeout` (at most 5 s).
    nonisolated(nonsending) public func waitForToken(group: String, after: UInt64, timeout: Duration)
        async throws(AuthClientError)
        -> WaitForTokenResult
    {
        let milliseconds = min(max(0, Int(timeout / .milliseconds(1))), WaitForTokenParameters.maximumTimeoutMs)
        return try await call(
            "WaitForToken", WaitForTokenParameters(group: group, after: after, timeoutMs: milliseconds),
            wait: .milliseconds(milliseconds))
    }

    /// Stores the customer ids and, when given, the token; without a token the stored one is cleared (R7).
    /// Returns the new generation.
    nonisolated(nonsending) public func identifyCustomer(group: String, customerIds: [String: String], token: String?)
        async throws(AuthClientError) -> UInt64
    {
        let parameters = IdentifyCustomerParameters(
            group: group, customerIds: customerIds, token: token.map(CompactToken.init))
        let result: GenerationResult = try await call("IdentifyCustomer", parameters)
        return result.generation
    }

    // MARK: Clearing

    /// Asks the group's apps to flush, then clears token and identity; returns when done (R8).
    ///
    /// - Returns: How many apps were asked to flush and which did not confirm within the daemon's bound
    ///   (the group is cleared either way).
    @discardableResult
    nonisolated(nonsending) public func anonymize(group: String) async throws(AuthClientError) -> ClearResult {
        try await call("Anonymize", GroupParameters(group: group), wait: flushWait)
    }

    /// As ``anonymize(group:)``, when the integration stops (R8).
    @discardableResult
    nonisolated(nonsending) public func stopIntegration(group: String) async throws(AuthClientError) -> ClearResult {
        try await call("StopIntegration", GroupParameters(group: group), wait: flushWait)
    }

    /// The wipe: clears the whole group's local customer data at once, without a flush, telling every app of
    /// it to drop its own, unsent events included; returns when done (R9).
    nonisolated(nonsending) public func clearLocalCustomerData(group: String) async throws(AuthClientError) {
        let _: EmptyPayload = try await call("ClearLocalCustomerData", GroupParameters(group: group))
    }

    /// Tells the daemon this process has flushed for `flushId` (R9).
    nonisolated(nonsending) public func acknowledgeFlush(group: String, flushId: String) async throws(AuthClientError) {
        let _: EmptyPayload = try await call(
            "AcknowledgeFlush", AcknowledgeFlushParameters(group: group, flushId: flushId))
    }

    /// Asks to be the one app that refreshes the group's token of `generation` (R28).
    ///
    /// The claim belongs to the connection the call went on, one of this client's pool: it ends when that
    /// connection closes. Use ``holdRefreshClaim(group:generation:)`` to hold a claim for a fetch.
    nonisolated(nonsending) public func claimRefresh(group: String, generation: UInt64) async throws(AuthClientError)
        -> Bool
    {
        let result: ClaimRefreshResult = try await call(
            "ClaimRefresh", ClaimRefreshParameters(group: group, generation: generation))
        return result.granted
    }

    /// Asks to be the one app that refreshes the group's token of `generation` (R28), on a connection of the
    /// claim's own that lives as long as the claim: if this process exits or crashes, the daemon ends the
    /// claim at once and another app refreshes.
    ///
    /// - Returns: The claim, or nil when another app holds it or the generation was already refreshed.
    nonisolated(nonsending) public func holdRefreshClaim(group: String, generation: UInt64)
        async throws(AuthClientError)
        -> RefreshClaim?
    {
        let connection = try await connectWithinBound()
        do {
            let message = try Self.encode(
                "com.exponea.Auth.ClaimRefresh", ClaimRefreshParameters(group: group, generation: generation))
            let result: ClaimRefreshResult = try Self.decode(try await connection.call(message))
            guard result.granted else {
                connection.close()
                return nil
            }
            return RefreshClaim(
                group: group, generation: generation, lease: .milliseconds(result.leaseMs ?? 0),
                connection: connection)
        } catch {
            connection.close()
            throw error
        }
    }

    /// The groups this user may use.
    nonisolated(nonsending) public func listGroups() async throws(AuthClientError) -> [GroupSummary] {
        let result: ListGroupsResult = try await call("ListGroups", EmptyPayload())
        return result.groups
    }

    /// How many groups this user may use, and how many of them have a token: ``listGroups()``'s count,
    /// without the list.
    nonisolated(nonsending) public func countGroups() async throws(AuthClientError) -> CountGroupsResult {
        try Self.read(try await exchange(Self.encodeGroupCall("com.exponea.Auth.CountGroups", group: nil)))
    }

    /// How the daemon sees this process (`WhoAmI`): its uid, gids and unit as the daemon saw them when the
    /// connection was made, and the groups it may use, each with the rules that allow it.
    nonisolated(nonsending) public func whoAmI() async throws(AuthClientError) -> WhoAmIResult {
        try await call("WhoAmI", EmptyPayload())
    }

    /// What the daemon says about itself (`org.varlink.service.GetInfo`).
    nonisolated(nonsending) public func info() async throws(AuthClientError) -> DaemonInfo {
        try Self.read(try await exchange(Self.encodeGroupCall("org.varlink.service.GetInfo", group: nil)))
    }

    // MARK: Events

    /// The group's events as they happen, on a connection of their own, read on a thread of their own. The
    /// sequence throws ``AuthClientError`` when the daemon cannot be reached, when the connection is lost, and
    /// with ``AuthClientError/Code/timedOut`` when the daemon stops answering: the first event (the group's
    /// state) must come within ``callTimeout``, and after ``keepAliveInterval`` of silence a call on another
    /// connection must be answered within ``callTimeout``. Subscribe again to go on (``ExponeaAuthClient`` does
    /// so by itself, with backoff).
    public func events(group: String) -> AsyncThrowingStream<AuthEvent, any Error> {
        let (events, continuation) = AsyncThrowingStream.makeStream(of: AuthEvent.self)
        let subscription = Subscription()
        continuation.onTermination = { _ in subscription.cancel() }
        BlockingThread.start { [self] in
            do {
                try follow(group: group, subscription: subscription) { continuation.yield($0) }
            } catch {
                continuation.finish(throwing: error)
            }
        }
        return events
    }

    /// Reads the group's events until the subscription ends: on the subscription's own thread.
    private func follow(group: String, subscription: Subscription, _ yield: (AuthEvent) -> Void)
        throws(AuthClientError)
    {
        let message = Self.encodeGroupCall("com.exponea.Auth.Subscribe", group: group, more: true)
        let connection = try connectWithinBoundBlocking(subscription)
        try subscription.attach(connection)
        let replies = try connection.stream(message)
        var first = true
        while true {
            let deadline = Deadline.now.adding(first ? callTimeout : keepAliveInterval)
            if let reply = try replies.next(until: deadline) {
                first = false
                let result: SubscribeResult = try Self.decode(reply)
                yield(result.event)
                guard Self.continues(reply) else {
                    throw AuthClientError(.connectionLost, "The daemon ended the subscription")
                }
            } else if first {
                throw AuthClientError.timedOut(socket: socketPath, after: callTimeout)
            } else {
                // Silence: the daemon may have nothing to say, or be stopped. Ask it on another connection.
                try ping()
            }
        }
    }

    /// A call on a connection of its own that the daemon must answer within ``callTimeout``.
    private func ping() throws(AuthClientError) {
        let connection = try VarlinkConnection.connect(to: socketPath, trusting: trusted, timeout: callTimeout)
        defer { connection.close() }
        let _: DaemonInfo = try Self.read(
            try connection.callBlocking(Self.encodeGroupCall("org.varlink.service.GetInfo", group: nil)))
    }

    /// One subscription's connection, for its cancellation to reach the thread that reads it.
    private final class Subscription: Sendable {
        private let state = Mutex<(cancelled: Bool, connection: VarlinkConnection?)>((false, nil))

        var isCancelled: Bool { state.withLock { $0.cancelled } }

        func attach(_ connection: VarlinkConnection) throws(AuthClientError) {
            let cancelled = state.withLock { state in
                state.connection = connection
                return state.cancelled
            }
            if cancelled {
                connection.close()
                throw AuthClientError(.connectionLost, "The subscription was cancelled")
            }
        }

        func cancel() {
            state.withLock { state in
                state.cancelled = true
                return state.connection
            }?.close()
        }
    }

    // MARK: Calls

    nonisolated(nonsending) private func call<Parameters: Encodable, Result: Decodable>(
        _ method: String, _ parameters: Parameters, interface: String = "com.exponea.Auth", wait: Duration = .zero
    ) async throws(AuthClientError) -> Result {
        try Self.decode(try await exchange(try Self.encode("\(interface).\(method)", parameters), wait: wait))
    }

    /// Sends `message` (a call's JSON) on an idle connection or a new one, and returns its reply's JSON.
    nonisolated(nonsending) private func exchange(_ message: [UInt8], wait: Duration = .zero)
        async throws(AuthClientError) -> [UInt8]
    {
        var (connection, reused) = try await checkOut()
        let reply: [UInt8]
        do {
            reply = try await connection.call(message, wait: wait)
        } catch  where reused && error.code == .connectionLost {
            // An idle connection the daemon closed (it restarted) before this side noticed: the other idle ones
            // are as old, so they go too, and the call is made once more, anew.
            closeIdleConnections()
            connection = try await connectWithinBound()
            reply = try await connection.call(message, wait: wait)
        }
        checkIn(connection)
        return reply
    }

    nonisolated(nonsending) private func checkOut() async throws(AuthClientError) -> (
        VarlinkConnection, reused: Bool
    ) {
        while let connection = idle.withLock({ $0.take() }) {
            if connection.isUsable { return (connection, true) }
        }
        return (try await connectWithinBound(), false)
    }

    private func checkIn(_ connection: VarlinkConnection) {
        let kept = connection.isUsable && idle.withLock { $0.keep(connection) }
        if !kept { connection.close() }
    }

    nonisolated(nonsending) private func connectWithinBound() async throws(AuthClientError) -> VarlinkConnection {
        let deadline = ContinuousClock.now + unavailableBound
        while true {
            do {
                return try VarlinkConnection.connect(to: socketPath, trusting: trusted, timeout: callTimeout)
            } catch  where error.code == .daemonUnavailable && ContinuousClock.now < deadline {
                do {
                    try await Task.sleep(for: .milliseconds(100))
                } catch {
                    throw AuthClientError(.daemonUnavailable, "Cancelled while waiting for exponea-authd")
                }
            }
        }
    }

    /// ``connectWithinBound()`` for a thread of the library's own.
    private func connectWithinBoundBlocking(_ subscription: Subscription) throws(AuthClientError)
        -> VarlinkConnection
    {
        let deadline = ContinuousClock.now + unavailableBound
        while true {
            do {
                return try VarlinkConnection.connect(to: socketPath, trusting: trusted, timeout: callTimeout)
            } catch  where error.code == .daemonUnavailable && ContinuousClock.now < deadline {
                guard !subscription.isCancelled else { throw error }
                var pause = timespec(tv_sec: 0, tv_nsec: 100_000_000)
                nanosleep(&pause, nil)
            }
        }
    }

    // MARK: The wire

    /// A call's JSON: `{"method":"…","parameters":{…}}`, with `"more":true` when asked. The calls of every
    /// request (a group's name, or nothing) are written directly; the rest through ``ParameterEncoder``.
    static func encode<Parameters: Encodable>(_ method: String, _ parameters: Parameters, more: Bool = false)
        throws(AuthClientError) -> [UInt8]
    {
        if let parameters = parameters as? GroupParameters {
            return encodeGroupCall(method, group: parameters.group, more: more)
        }
        if parameters is EmptyPayload { return encodeGroupCall(method, group: nil, more: more) }
        var json = JSONWriter(capacity: 256)
        json.raw(#"{"method":"#)
        json.string(method)
        json.raw(#","parameters":"#)
        do {
            try ParameterEncoder.encode(parameters, into: &json)
        } catch {
            throw AuthClientError(.protocolError, "Cannot encode the call to \(method): \(error)")
        }
        json.raw(more ? #","more":true}"# : "}")
        return json.bytes
    }

    /// `{"method":"…","parameters":{"group":"…"}}` (or `{}` without a group), with `"more":true` when asked.
    static func encodeGroupCall(_ method: String, group: String?, more: Bool = false) -> [UInt8] {
        var json = JSONWriter(capacity: 64 + method.utf8.count + (group?.utf8.count ?? 0))
        json.raw(#"{"method":"#)
        json.string(method)
        json.raw(#","parameters":{"#)
        if let group {
            json.raw(#""group":"#)
            json.string(group)
        }
        json.raw(more ? #"},"more":true}"# : "}}")
        return json.bytes
    }

    /// Reads a reply with the project's own parser (`JSONValue`) and the daemon's parameter decoder, leniently
    /// (a member a newer daemon adds is ignored): its parameters, or the error it names.
    static func decode<Result: Decodable>(_ reply: [UInt8]) throws(AuthClientError) -> Result {
        let parameters = try replyParameters(reply)
        do {
            return try ParameterDecoder.decode(Result.self, from: parameters, rejectingUnknownMembers: false)
        } catch {
            let member: String? =
                switch error {
                case .invalid(let name): name
                case .unknown(let name): name
                }
            throw unreadable(member: member)
        }
    }

    /// Reads one of the hot replies by hand (``ReplyReadable``), as leniently as ``decode(_:)`` reads it: member by
    /// member as it is parsed. An error reply, or one that is not as expected, is read again by
    /// ``replyParameters(_:)``, which throws what it says.
    static func read<Result: ReplyReadable>(_ reply: [UInt8]) throws(AuthClientError) -> Result {
        // The last `parameters` member decides, as in a dictionary: read when it is an object, `{}` when it is
        // missing or null. (Not an optional: the compiler destroys one through the runtime's generic
        // witnesses, on every call.)
        var parameters = ReplyRead<Result>.invalid(member: "parameters")
        var parametersRead = false
        var regular = true
        var parametersAreAnObject = true
        let parsed = reply.withUnsafeBufferPointer { bytes in
            JSONValue.readObject(bytes) { name, value throws(JSONSyntaxError) in
                switch name {
                case "error": if case .string = try value.value() { regular = false }
                case "parameters" where value.isObject:
                    parameters = try Result.reading(&value)
                    (parametersRead, parametersAreAnObject) = (true, true)
                case "parameters":
                    parametersRead = false
                    parametersAreAnObject = try value.value() == .null
                default: break
                }
            }
        }
        guard parsed, regular, parametersAreAnObject else {
            _ = try replyParameters(reply)
            throw unreadable(member: nil)  // not reached: replyParameters throws for each of these
        }
        if !parametersRead { parameters = Self.readEmpty() }
        switch parameters {
        case .read(let result): return result
        case .invalid(let member): throw unreadable(member: member)
        }
    }

    /// A reply whose parameters are missing or null, read as `{}`.
    private static func readEmpty<Result: ReplyReadable>() -> ReplyRead<Result> {
        var result = ReplyRead<Result>.invalid(member: "parameters")
        let empty: StaticString = "{}"
        try? JSONValue.read(UnsafeBufferPointer(start: empty.utf8Start, count: empty.utf8CodeUnitCount)) {
            object throws(JSONSyntaxError) in result = try Result.reading(&object)
        }
        return result
    }

    private static func unreadable(member: String?) -> AuthClientError {
        AuthClientError(
            .protocolError,
            "The daemon's reply could not be read"
                + (member.map { " (member '\($0)')" } ?? "") + "; is the daemon of another version?")
    }

    /// A reply's parameters (`{}` when it has none), parsed with the project's own parser (`JSONValue`).
    ///
    /// - Throws: The error the reply names, or ``AuthClientError/Code/protocolError`` when it is not a reply.
    static func replyParameters(_ reply: [UInt8]) throws(AuthClientError) -> [String: JSONValue] {
        guard let value = try? JSONValue(parsing: reply), case .object(let members) = value else {
            throw AuthClientError(.protocolError, "The daemon's reply is not a JSON object")
        }
        if case .string(let name)? = members["error"] {
            var parameters: [String: String] = [:]
            if case .object(let values)? = members["parameters"] {
                for (key, value) in values { parameters[key] = Self.text(value) }
            }
            throw AuthClientError(reply: name, parameters: parameters)
        }
        switch members["parameters"] {
        case nil, .null?: return [:]
        case .object(let object)?: return object
        default: throw AuthClientError(.protocolError, "The daemon's reply has parameters that are not an object")
        }
    }

    /// Whether `reply` says more replies follow (an error reply ends a stream).
    static func continues(_ reply: [UInt8]) -> Bool {
        guard let value = try? JSONValue(parsing: reply), value["error"] == nil else { return false }
        return value["continues"] == .bool(true)
    }

    /// A parameter value as text, whatever its JSON type, so any error reply can be read.
    private static func text(_ value: JSONValue) -> String {
        switch value {
        case .string(let string): string
        case .number(let literal): literal
        case .bool(let bool): "\(bool)"
        default: ""
        }
    }
}
