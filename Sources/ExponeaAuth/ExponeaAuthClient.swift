// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import HTTPTypes
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One app's view of its app group's stream JWT, held by exponea-authd and shared with every app of the
/// group: the Exponea SDK's token API, for a Linux app.
///
/// ```swift
/// let auth = ExponeaAuthClient(group: "shop", integration: .stream(StreamSettings(streamId: "my-stream")))
/// auth.setJwtErrorHandler { context in
///     Task { try await auth.setSdkAuthToken(await backend.fetchJwt(for: context.customerIds)) }
/// }
/// let (response, body) = try await auth.execute(.trackEvents, body: event, transport: send)
/// ```
///
/// The client subscribes to the group's events as soon as it is made and keeps the subscription across
/// daemon restarts. It runs the JWT error handler when the group's token needs refreshing, and, with
/// ``coalescesRefresh`` (the default), only in the one app of the group that claims the refresh (R28).
/// A daemon that stops answering (stopped, hung) is noticed within ``AuthDaemonClient/keepAliveInterval`` plus
/// ``AuthDaemonClient/callTimeout``, and the client subscribes again with backoff, as after a restart.
///
/// Every token set for the group comes on ``tokenRefreshes`` (an `AsyncStream` of ``TokenRefresh``), which
/// replaces the `tokenRefreshedNotification` of `NotificationCenter` that earlier versions posted: the library
/// links only FoundationEssentials, which has no `NotificationCenter`.
public final class ExponeaAuthClient: Sendable {
    /// The app group.
    public let group: String
    /// How the app reaches Bloomreach.
    public let integration: Integration
    /// The daemon's interface, for what this client does not wrap.
    public let daemon: AuthDaemonClient
    /// How long a failed request waits for a new token before its one retry (R19; ends early, R22).
    public let retryWait: Duration

    private let state = Mutex(State())
    private let allEvents = Broadcast<AuthEvent>(buffer: 256)
    private let refreshes = Broadcast<TokenRefresh>(buffer: 64)
    private let logger: Logger

    private struct State {
        var jwtErrorHandler: JwtErrorHandler?
        var flushHandler: (@Sendable () async -> Void)?
        var customerTokenProvider: (@Sendable () async -> String?)?
        var coalescesRefresh = true
        var reportedMissingProvider = false
        var subscription: Task<Void, Never>?
        /// The last jwtError of the group, while no newer token came, and whether a handler was given it:
        /// a handler registered later gets it then (the same replay a late subscription gets from the
        /// daemon).
        var pendingJwtError: (event: AuthEvent, handled: Bool)?
        /// The last generation the subscription told of (its state, a new token, a clear); nil before the first
        /// subscription. A subscription made again compares the group's generation with it.
        var heard: UInt64?
        /// The refresh claim this app holds, while its handler fetches.
        var claim: RefreshClaim?
        /// The generations this app's handler is still working on: the app does not claim them again.
        var refreshing: Set<UInt64> = []
    }

    /// A registered JWT error handler, and whether its return means the fetch has ended.
    private struct JwtErrorHandler {
        var run: @Sendable (JwtErrorContext) async -> Void
        /// The handler awaits its fetch: when it returns without a token, the claim is released at once.
        var awaitsFetch: Bool
    }

    /// Connects to the daemon and subscribes to `group`'s events.
    ///
    /// - Parameters:
    ///   - socketPath: The daemon's socket; `$EXPONEA_AUTHD_SOCKET` or the default when nil
    ///     (``AuthDaemonClient/defaultSocketPath(environment:uid:exists:)``).
    ///   - unavailableBound: How long a call waits for a daemon that is away before it fails with
    ///     ``AuthClientError/Code/daemonUnavailable``.
    ///   - callTimeout: How long connecting and each call may take before they fail with
    ///     ``AuthClientError/Code/timedOut`` (``AuthDaemonClient/defaultCallTimeout``, 5 s).
    ///   - keepAliveInterval: How long the subscription may be silent before the client checks that the daemon
    ///     still answers (``AuthDaemonClient/defaultKeepAliveInterval``, 30 s).
    public init(
        group: String,
        integration: Integration,
        socketPath: String? = nil,
        unavailableBound: Duration = .seconds(2),
        callTimeout: Duration = AuthDaemonClient.defaultCallTimeout,
        keepAliveInterval: Duration = AuthDaemonClient.defaultKeepAliveInterval,
        retryWait: Duration = .seconds(1),
        logger: Logger = Logger(label: "ExponeaAuth")
    ) {
        self.group = group
        self.integration = integration
        self.daemon = AuthDaemonClient(
            socketPath: socketPath, unavailableBound: unavailableBound, callTimeout: callTimeout,
            keepAliveInterval: keepAliveInterval)
        self.retryWait = retryWait
        self.logger = logger
        let forward: @Sendable (AuthEvent) async -> Void = { [weak self] event in await self?.handle(event) }
        let dropped: @Sendable () async -> Void = { [weak self] in self?.endClaim(before: .max) }
        let subscription = Task { [daemon, group, logger] in
            await Self.followEvents(of: group, from: daemon, logger: logger, forward, dropped: dropped)
        }
        state.withLock { $0.subscription = subscription }
    }

    deinit { close() }

    /// Ends the subscription and the event sequences. Calls made afterwards still reach the daemon.
    public func close() {
        state.withLock { $0.subscription }?.cancel()
        allEvents.finish()
        refreshes.finish()
    }

    // MARK: The SDK's operations

    /// Stores the stream JWT for the whole group; every app hears `tokenRefreshed`, even when it has already
    /// expired (R4, R6). Ignored in project mode (R5).
    ///
    /// - Throws: ``AuthClientError`` with ``AuthClientError/Code/malformedToken`` (nothing stored) and the
    ///   like.
    public func setSdkAuthToken(_ token: String) async throws(AuthClientError) {
        guard case .stream = integration else {
            logger.debug("setSdkAuthToken ignored: the integration is a project, not a stream")
            return
        }
        _ = try await daemon.setToken(token, group: group)
    }

    /// Registers the handler that fetches a new token, called on the main actor (R10, R12). Register it
    /// before setting the first token so the proactive timer can reach it.
    ///
    /// A handler that starts its fetch in a task of its own returns before the token is set: the app keeps
    /// the refresh claim until a token is set, the app exits, or the daemon's lease runs out. Register with
    /// ``setAsyncJwtErrorHandler(_:)`` instead to let the claim go as soon as a fetch fails. A jwtError that
    /// came before the handler was registered is handed to it at once.
    public func setJwtErrorHandler(_ handler: @escaping @MainActor @Sendable (JwtErrorContext) -> Void) {
        register(JwtErrorHandler(run: { context in await handler(context) }, awaitsFetch: false))
    }

    /// Registers the handler that fetches a new token and sets it before it returns, called on the main
    /// actor (R10, R12). When it returns without a token having been set (the fetch failed), the app gives
    /// up its refresh claim at once, so that the next jwtError is claimed without waiting for the lease.
    ///
    /// ```swift
    /// auth.setAsyncJwtErrorHandler { context in
    ///     guard let token = try? await backend.fetchJwt(for: context.customerIds) else { return }
    ///     try? await auth.setSdkAuthToken(token)
    /// }
    /// ```
    public func setAsyncJwtErrorHandler(_ handler: @escaping @MainActor @Sendable (JwtErrorContext) async -> Void) {
        register(JwtErrorHandler(run: { context in await handler(context) }, awaitsFetch: true))
    }

    /// Registers the handler that fetches a new token, called isolated to `actor` (for example one with the
    /// executor of the app's own event loop) (R10, R12).
    public func setJwtErrorHandler<Isolation: Actor>(
        on actor: Isolation,
        _ handler: @escaping @Sendable (isolated Isolation, JwtErrorContext) -> Void
    ) {
        register(JwtErrorHandler(run: { context in await handler(actor, context) }, awaitsFetch: false))
    }

    private func register(_ handler: JwtErrorHandler) {
        let missed = state.withLock { state -> AuthEvent? in
            state.jwtErrorHandler = handler
            guard let pending = state.pendingJwtError, !pending.handled else { return nil }
            state.pendingJwtError?.handled = true
            return pending.event
        }
        guard let missed else { return }
        Task { [weak self] in await self?.runJwtErrorHandler(for: missed, handler) }
    }

    /// Extends the refresh claim this app holds by another lease, for a fetch from a backend slow by
    /// nature; call it from the handler while the fetch runs.
    ///
    /// - Returns: Whether the app held the claim and it was extended.
    public func renewRefreshClaim() async throws(AuthClientError) -> Bool {
        guard let claim = state.withLock({ $0.claim }) else { return false }
        return try await claim.renew()
    }

    /// Gives up the refresh claim this app holds (its fetch failed), so that the next jwtError is claimed at
    /// once by whichever app hears it. A handler registered with ``setAsyncJwtErrorHandler(_:)`` need not:
    /// the claim is released when it returns.
    public func releaseRefreshClaim() async {
        let claim = state.withLock { state -> RefreshClaim? in
            defer { state.claim = nil }
            return state.claim
        }
        await claim?.release()
    }

    /// Whether, when the group's token needs refreshing, only the app that claims the refresh runs its
    /// handler (R28). On by default; when off, every app with a handler runs it.
    public var coalescesRefresh: Bool {
        get { state.withLock { $0.coalescesRefresh } }
        set { state.withLock { $0.coalescesRefresh = newValue } }
    }

    /// Registers what the app does when the group is about to be cleared: flush its pending events with the
    /// current token (R8, R9). The daemon is told once it returns. Without one, the app agrees at once.
    public func setFlushHandler(_ handler: @escaping @Sendable () async -> Void) {
        state.withLock { $0.flushHandler = handler }
    }

    /// Registers the customer-token provider of project mode's advanced authorization, asked on every App
    /// Inbox request (R26).
    public func setCustomerTokenProvider(_ provider: @escaping @Sendable () async -> String?) {
        state.withLock { $0.customerTokenProvider = provider }
    }

    /// Stores the customer's ids and token together; without a token the stored one is cleared (R7). In
    /// project mode the stored token is kept.
    public func identifyCustomer(_ identity: CustomerIdentity) async throws(AuthClientError) {
        var token = identity.jwtToken
        if case .project = integration { token = try await daemon.getToken(group: group).token?.value }
        _ = try await daemon.identifyCustomer(group: group, customerIds: identity.customerIds, token: token)
    }

    /// Lets every app of the group flush, then clears token and identity; returns when both are done (R8).
    ///
    /// - Returns: How many apps were asked to flush, and which did not confirm within the daemon's bound
    ///   (``ClearResult/confirmed`` is false then). The token is cleared either way.
    @discardableResult
    public func anonymize() async throws(AuthClientError) -> ClearResult {
        try await daemon.anonymize(group: group)
    }

    /// As ``anonymize()``, when the integration stops (R8).
    @discardableResult
    public func stopIntegration() async throws(AuthClientError) -> ClearResult {
        try await daemon.stopIntegration(group: group)
    }

    /// The wipe: clears the whole group's local customer data at once, without a flush, telling every app of
    /// it to drop its own, unsent events included; returns when done (R9).
    public func clearLocalCustomerData() async throws(AuthClientError) {
        try await daemon.clearLocalCustomerData(group: group)
    }

    /// The check before a stream request (R15-R17): the token to send, even an expired one, and its state.
    /// When the state calls for it, the group's handler runs.
    nonisolated(nonsending) public func preflight() async throws(AuthClientError) -> PreflightResult {
        try await daemon.preflight(group: group)
    }

    /// The raw token for a request, in the shape of R27.
    public var authenticator: StreamAuthenticator { StreamAuthenticator(client: self) }

    /// Sends `request` through `transport` with the SDK's policy: pre-flight, `Authorization`, one retry
    /// after a 401 or a 403 without a token, with the token set meanwhile, no retry after a 403 with a valid
    /// one (R15-R24); in project mode, `Authorization: Token …` (R25, R26).
    ///
    /// App Inbox requests that cannot have a token are answered here with a 401 and never sent (R24, R26).
    public func execute(_ request: StreamRequest, body: Data? = nil, transport: HTTPTransport) async throws
        -> (HTTPResponse, Data)
    {
        let executor = RequestExecutor(
            daemon: daemon,
            group: group,
            integration: integration,
            retryWait: retryWait,
            customerTokenProvider: state.withLock { $0.customerTokenProvider },
            reportMissingProvider: { [self] in
                // R26: the documented line, once per client, not once per request.
                let first = state.withLock { state in
                    defer { state.reportedMissingProvider = true }
                    return !state.reportedMissingProvider
                }
                if first { logger.error("Advanced authorization flag has been enabled without provider") }
            }
        )
        return try await executor.execute(request, body: body, transport: transport)
    }

    // MARK: Events

    /// Every event of the group from now on, until ``close()``.
    public var events: AsyncStream<AuthEvent> { allEvents.stream() }

    /// Every token set for the group from now on, even an expired one (R6), until ``close()``. A token set while
    /// the subscription was down (the daemon restarted) comes when it is made again, with the group's generation
    /// then.
    ///
    /// This replaces `tokenRefreshedNotification` (`NotificationCenter`, `userInfo` `group` and `generation`):
    ///
    /// ```swift
    /// Task { for await refresh in auth.tokenRefreshes { print("token", refresh.generation, "for", refresh.group) } }
    /// ```
    public var tokenRefreshes: AsyncStream<TokenRefresh> { refreshes.stream() }

    /// Follows the group's events for as long as the task runs, subscribing again, with backoff (100 ms doubling
    /// to 2 s), after the daemon went away or stopped answering.
    private static func followEvents(
        of group: String, from daemon: AuthDaemonClient, logger: Logger,
        _ handle: @Sendable (AuthEvent) async -> Void, dropped: @Sendable () async -> Void
    ) async {
        var backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(2))
        var warned = false
        while !Task.isCancelled {
            do {
                for try await event in daemon.events(group: group) {
                    if warned {
                        logger.notice("Subscribed again to the app group's events", metadata: ["group": "\(group)"])
                    }
                    warned = false
                    backoff.reset()
                    await handle(event)
                }
            } catch {
                // The subscription dropped: a claim this app holds goes with it, for another app to take.
                await dropped()
                if !warned && !Task.isCancelled {
                    logger.warning(
                        "Lost the app group's events; subscribing again",
                        metadata: ["group": "\(group)", "error": "\(error)"])
                    warned = true
                }
            }
            try? await Task.sleep(for: backoff.next())
        }
    }

    private func handle(_ event: AuthEvent) async {
        allEvents.yield(event)
        // A subscription's first event is the group's state. After a subscription made again (the daemon
        // restarted, or the connection was lost), a newer generation with a token is one set while this app was
        // away: every app hears every new token (R6), so it is told as a refresh.
        let missed = state.withLock { state -> Bool in
            let heard = state.heard
            guard event.kind == .state || event.kind == .tokenRefreshed || event.kind == .cleared else { return false }
            state.heard = event.generation
            guard event.kind == .state, let heard else { return false }
            return event.generation > heard && event.tokenState != nil && event.tokenState != .notProvided
        }
        if missed || event.kind == .tokenRefreshed || event.kind == .cleared {
            // A newer token (or none): the claim on an older one has ended, and so has the error.
            endClaim(before: event.generation)
            state.withLock { state in
                if let pending = state.pendingJwtError, pending.event.generation < event.generation {
                    state.pendingJwtError = nil
                }
            }
        }
        if missed { refreshes.yield(TokenRefresh(group: event.group, generation: event.generation)) }
        switch event.kind {
        case .tokenRefreshed:
            let refresh = TokenRefresh(group: event.group, generation: event.generation)
            refreshes.yield(refresh)
        case .jwtError:
            let handler = state.withLock { state in
                state.pendingJwtError = (event, state.jwtErrorHandler != nil)
                return state.jwtErrorHandler
            }
            if let handler { await runJwtErrorHandler(for: event, handler) }
        case .flushRequested:
            guard let flushId = event.flushId else { return }
            let handler = state.withLock { $0.flushHandler }
            Task { [daemon, group, logger] in
                await handler?()
                do {
                    try await daemon.acknowledgeFlush(group: group, flushId: flushId)
                } catch {
                    logger.warning("Could not acknowledge the flush", metadata: ["error": "\(error)"])
                }
            }
        default:
            break
        }
    }

    /// Runs the handler for a jwtError in this app, when it claims the refresh (R28). An app whose handler is
    /// still at work on the same generation does not run it again: if its claim ended meanwhile (its lease
    /// ran out), another app refreshes, and this app's requests take whichever token comes first (R22).
    private func runJwtErrorHandler(for event: AuthEvent, _ handler: JwtErrorHandler) async {
        guard let reason = event.reason else { return }
        let generation = event.generation
        let (coalesces, started) = state.withLock { ($0.coalescesRefresh, $0.refreshing.insert(generation).inserted) }
        guard started else { return }
        var claim: RefreshClaim?
        if coalesces {
            do {
                claim = try await daemon.holdRefreshClaim(group: group, generation: generation)
                guard claim != nil else {
                    _ = state.withLock { $0.refreshing.remove(generation) }
                    return
                }
            } catch {
                // Better a second refresh than none.
                logger.warning("Could not claim the refresh; running the handler", metadata: ["error": "\(error)"])
            }
        }
        let replaced = state.withLock { state in
            defer { state.claim = claim }
            return state.claim
        }
        replaced?.close()
        let context = JwtErrorContext(reason: reason, customerIds: event.customerIds ?? [:])
        Task { [weak self] in
            await handler.run(context)
            guard let self else { return }
            let mine = self.state.withLock { state -> RefreshClaim? in
                state.refreshing.remove(generation)
                guard handler.awaitsFetch, let held = state.claim, held === claim else { return nil }
                state.claim = nil
                return held
            }
            // The fetch is over; without a token it failed: let the next claim be granted at once.
            await mine?.release()
        }
    }

    /// Closes the claim this app holds on a generation older than `generation`: a newer token ended it (or,
    /// with `.max`, the subscription dropped and the claim goes with it).
    private func endClaim(before generation: UInt64) {
        let ended = state.withLock { state -> RefreshClaim? in
            guard let claim = state.claim, claim.generation < generation else { return nil }
            state.claim = nil
            return claim
        }
        ended?.close()
    }
}

/// Returns the raw stream JWT for a request, never with a `Bearer ` prefix (R27). Coalescing is the
/// daemon's: however many callers and apps ask at once, the group's handler runs once.
public struct StreamAuthenticator: Sendable {
    let client: ExponeaAuthClient

    /// The group's token when it is usable; otherwise waits (up to the client's retry wait) for the one the
    /// JWT error handler sets.
    ///
    /// - Throws: ``AuthClientError/Code/tokenUnavailable`` when no usable token came.
    nonisolated(nonsending) public func getAuthHeader() async throws(AuthClientError) -> String {
        let preflight = try await client.preflight()
        if let token = preflight.token, preflight.state == .valid || preflight.state == .expiredSoon {
            return token.value
        }
        let waited = try await client.daemon.waitForToken(
            group: client.group, after: preflight.generation, timeout: client.retryWait)
        if let token = waited.token, (try? StreamJWT(parsing: token.value))?.expiresAt ?? .distantPast > Date() {
            return token.value
        }
        throw AuthClientError(
            .tokenUnavailable,
            "No valid stream JWT for app group '\(client.group)': the JWT error handler set none in time")
    }
}
