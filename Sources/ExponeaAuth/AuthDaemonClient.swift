// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Foundation

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
/// ```swift
/// let daemon = AuthDaemonClient()
/// let current = try await daemon.getToken(group: "shop")
/// ```
public actor AuthDaemonClient {
    /// The socket this client connects to.
    public nonisolated let socketPath: String
    /// How long a call waits for a daemon that is away before it fails.
    public nonisolated let unavailableBound: Duration

    /// Connections without a call in flight, for the next calls.
    private var idle: [VarlinkConnection] = []
    /// How many idle connections are kept.
    private static let maximumIdleConnections = 4

    /// Who may serve ``socketPath`` (checked with `SO_PEERCRED` before anything is sent).
    private nonisolated let trusted: TrustedServer

    /// - Parameters:
    ///   - socketPath: The daemon's socket; ``defaultSocketPath(environment:uid:exists:)`` when nil.
    ///   - unavailableBound: How long a call waits for a daemon that is away before it fails.
    ///
    /// Every connection checks, before it sends anything, that the process listening on the socket runs as
    /// root, as the system daemon's user `exponea-authd` (for the system socket or a socket given here or in
    /// `$EXPONEA_AUTHD_SOCKET`), or as this process's user (for the user daemon's socket or a socket given);
    /// otherwise the call fails with ``AuthClientError/Code/untrustedServer``.
    public init(socketPath: String? = nil, unavailableBound: Duration = .seconds(2)) {
        let (path, trusted) =
            socketPath.map { ($0, TrustedServer.eitherDaemon) }
            ?? Self.defaultSocket(
                environment: ProcessInfo.processInfo.environment, uid: getuid(), exists: Self.socketExists)
        self.socketPath = path
        self.trusted = trusted
        self.unavailableBound = unavailableBound
    }

    deinit {
        for connection in idle { connection.close() }
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
    public func setToken(_ token: String, group: String) async throws(AuthClientError) -> SetTokenResult {
        try await call("SetToken", SetTokenParameters(group: group, token: CompactToken(token)))
    }

    /// The group's token, claims and generation, without side effects.
    public func getToken(group: String) async throws(AuthClientError) -> GetTokenResult {
        try await call("GetToken", GroupParameters(group: group))
    }

    /// The check before a stream request (R15-R17); when it has a reason, the group's apps hear `jwtError`.
    public func preflight(group: String) async throws(AuthClientError) -> PreflightResult {
        try await call("Preflight", GroupParameters(group: group))
    }

    /// Reports a stream request that failed with `status` and asks whether to retry (R19-R21).
    ///
    /// - Parameters:
    ///   - generation: The generation of the token the request carried; nil when it carried none.
    ///   - tokenExpired: The 401 body's `token_expired` flag.
    public func reportAuthFailure(
        group: String, status: Int, generation: UInt64?, tokenExpired: Bool? = nil
    ) async throws(AuthClientError) -> ReportAuthFailureResult {
        try await call(
            "ReportAuthFailure",
            ReportAuthFailureParameters(
                group: group, status: status, generation: generation, tokenExpired: tokenExpired)
        )
    }

    /// Returns as soon as the group's generation is newer than `after`, or after `timeout` (at most 5 s).
    public func waitForToken(group: String, after: UInt64, timeout: Duration) async throws(AuthClientError)
        -> WaitForTokenResult
    {
        let milliseconds = min(max(0, Int(timeout / .milliseconds(1))), WaitForTokenParameters.maximumTimeoutMs)
        return try await call(
            "WaitForToken", WaitForTokenParameters(group: group, after: after, timeoutMs: milliseconds))
    }

    /// Stores the customer ids and, when given, the token; without a token the stored one is cleared (R7).
    /// Returns the new generation.
    public func identifyCustomer(group: String, customerIds: [String: String], token: String?)
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
    public func anonymize(group: String) async throws(AuthClientError) -> ClearResult {
        try await call("Anonymize", GroupParameters(group: group))
    }

    /// As ``anonymize(group:)``, when the integration stops (R8).
    @discardableResult
    public func stopIntegration(group: String) async throws(AuthClientError) -> ClearResult {
        try await call("StopIntegration", GroupParameters(group: group))
    }

    /// The wipe: clears the whole group's local customer data at once, without a flush, telling every app of
    /// it to drop its own, unsent events included; returns when done (R9).
    public func clearLocalCustomerData(group: String) async throws(AuthClientError) {
        let _: EmptyPayload = try await call("ClearLocalCustomerData", GroupParameters(group: group))
    }

    /// Tells the daemon this process has flushed for `flushId` (R9).
    public func acknowledgeFlush(group: String, flushId: String) async throws(AuthClientError) {
        let _: EmptyPayload = try await call(
            "AcknowledgeFlush", AcknowledgeFlushParameters(group: group, flushId: flushId))
    }

    /// Asks to be the one app that refreshes the group's token of `generation` (R28).
    ///
    /// The claim belongs to the connection the call went on, one of this client's pool: it ends when that
    /// connection closes. Use ``holdRefreshClaim(group:generation:)`` to hold a claim for a fetch.
    public func claimRefresh(group: String, generation: UInt64) async throws(AuthClientError) -> Bool {
        let result: ClaimRefreshResult = try await call(
            "ClaimRefresh", ClaimRefreshParameters(group: group, generation: generation))
        return result.granted
    }

    /// Asks to be the one app that refreshes the group's token of `generation` (R28), on a connection of the
    /// claim's own that lives as long as the claim: if this process exits or crashes, the daemon ends the
    /// claim at once and another app refreshes.
    ///
    /// - Returns: The claim, or nil when another app holds it or the generation was already refreshed.
    public nonisolated func holdRefreshClaim(group: String, generation: UInt64) async throws(AuthClientError)
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
    public func listGroups() async throws(AuthClientError) -> [GroupSummary] {
        let result: ListGroupsResult = try await call("ListGroups", EmptyPayload())
        return result.groups
    }

    /// How many groups this user may use, and how many of them have a token: ``listGroups()``'s count,
    /// without the list.
    public func countGroups() async throws(AuthClientError) -> CountGroupsResult {
        try await call("CountGroups", EmptyPayload())
    }

    /// What the daemon says about itself (`org.varlink.service.GetInfo`).
    public func info() async throws(AuthClientError) -> DaemonInfo {
        try await call("GetInfo", EmptyPayload(), interface: "org.varlink.service")
    }

    // MARK: Events

    /// The group's events as they happen, on a connection of their own. The sequence throws
    /// ``AuthClientError`` when the daemon cannot be reached or the connection is lost; subscribe again
    /// to go on (``ExponeaAuthClient`` does so by itself).
    public nonisolated func events(group: String) -> AsyncThrowingStream<AuthEvent, any Error> {
        let (events, continuation) = AsyncThrowingStream.makeStream(of: AuthEvent.self)
        let task = Task {
            do {
                let connection = try await self.connectWithinBound()
                defer { connection.close() }
                let message = try Self.encode("com.exponea.Auth.Subscribe", GroupParameters(group: group), more: true)
                for try await reply in connection.stream(message) {
                    let result: SubscribeResult = try Self.decode(reply)
                    continuation.yield(result.event)
                }
                continuation.finish(throwing: AuthClientError(.connectionLost, "The daemon ended the subscription"))
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return events
    }

    // MARK: Calls

    private func call<Parameters: Encodable, Result: Decodable>(
        _ method: String, _ parameters: Parameters, interface: String = "com.exponea.Auth"
    ) async throws(AuthClientError) -> Result {
        let message = try Self.encode("\(interface).\(method)", parameters)
        var (connection, reused) = try await checkOut()
        let reply: [UInt8]
        do {
            reply = try await connection.call(message)
        } catch  where reused && error.code == .connectionLost {
            // An idle connection the daemon closed (it restarted) before this side noticed: once more, anew.
            connection = try await connectWithinBound()
            reply = try await connection.call(message)
        }
        checkIn(connection)
        return try Self.decode(reply)
    }

    private func checkOut() async throws(AuthClientError) -> (VarlinkConnection, reused: Bool) {
        while let connection = idle.popLast() {
            if connection.isActive { return (connection, true) }
        }
        return (try await connectWithinBound(), false)
    }

    private func checkIn(_ connection: VarlinkConnection) {
        guard connection.isActive, idle.count < Self.maximumIdleConnections else { return connection.close() }
        idle.append(connection)
    }

    private nonisolated func connectWithinBound() async throws(AuthClientError) -> VarlinkConnection {
        let deadline = ContinuousClock.now + unavailableBound
        while true {
            do {
                return try await VarlinkConnection.connect(to: socketPath, trusting: trusted)
            } catch  where error.code == .daemonUnavailable && ContinuousClock.now < deadline {
                do {
                    try await Task.sleep(for: .milliseconds(100))
                } catch {
                    throw AuthClientError(.daemonUnavailable, "Cancelled while waiting for exponea-authd")
                }
            }
        }
    }

    private struct Call<Parameters: Encodable>: Encodable {
        var method: String
        var parameters: Parameters
        var more: Bool?
    }

    /// A reply, read once: its parameters, or the error it names with that error's parameters.
    private struct Reply<Parameters: Decodable>: Decodable {
        var outcome: Swift.Result<Parameters, AuthClientError>

        enum CodingKeys: String, CodingKey { case error, parameters }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            if let error = try container.decodeIfPresent(String.self, forKey: .error) {
                let parameters = try? container.decodeIfPresent([String: LenientString].self, forKey: .parameters)
                outcome = .failure(AuthClientError(reply: error, parameters: (parameters ?? [:]).mapValues(\.value)))
            } else if let empty = EmptyPayload() as? Parameters, !container.contains(.parameters) {
                outcome = .success(empty)  // `{}`: a method without results may leave parameters out
            } else {
                outcome = .success(try container.decode(Parameters.self, forKey: .parameters))
            }
        }
    }

    /// A parameter value as text, whatever its JSON type, so any error reply can be read.
    private struct LenientString: Decodable {
        var value: String
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let string = try? container.decode(String.self) {
                value = string
            } else if let number = try? container.decode(Double.self) {
                value = "\(number)"
            } else if let bool = try? container.decode(Bool.self) {
                value = "\(bool)"
            } else {
                value = ""
            }
        }
    }

    static func encode<Parameters: Encodable>(_ method: String, _ parameters: Parameters, more: Bool = false)
        throws(AuthClientError) -> [UInt8]
    {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes]
            return Array(try encoder.encode(Call(method: method, parameters: parameters, more: more ? true : nil)))
        } catch {
            throw AuthClientError(.protocolError, "Cannot encode the call to \(method): \(error)")
        }
    }

    static func decode<Result: Decodable>(_ reply: [UInt8]) throws(AuthClientError) -> Result {
        let decoded: Reply<Result>
        do {
            decoded = try JSONDecoder().decode(Reply<Result>.self, from: Data(reply))
        } catch {
            throw AuthClientError(.protocolError, "The daemon's reply could not be read: \(error)")
        }
        return try decoded.outcome.get()
    }
}
