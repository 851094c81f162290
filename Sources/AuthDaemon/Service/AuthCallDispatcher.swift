// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthTransport
import Logging
import Systemd

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Turns `com.exponea.Auth` calls into the service's operations: validates parameters and group names,
/// checks the caller's access, runs the method and encodes its replies. Knows nothing of sockets: the
/// transport hands it each call with the caller's credentials and the connection's replies.
///
/// An actor on the service's loop: what it keeps of the connections (their refresh claims), its throttle of refusals' log lines and its counts of calls are its own state, which the loop's
/// callbacks reach in their own turn (``dispatch(_:from:connection:)``), and the calls that run later reach from
/// the connection's task on the loop (``onLoop(_:)``), so none of it needs a lock.
public actor AuthCallDispatcher: VarlinkCallHandler {
    /// Bounds on what a caller may pass.
    public enum Limits {
        /// Customer id keys per identity.
        public static let maximumCustomerIds = 32
        /// Bytes in one customer id key or value.
        public static let maximumCustomerIdLength = 512
    }

    private let service: AuthService
    /// Who may use which group, replaced by a reload.
    private var access: AccessControl
    private let logger: Logger
    /// The connections that claimed a refresh at some point, so that only their closing goes to the service:
    /// most connections never claim.
    private var claimants: Set<VarlinkConnectionID> = []
    /// One "Permission denied" line per user per interval, with a count: a flood of refused calls must not
    /// become a flood of log lines.
    private let deniedLog = LogThrottle(now: { ContinuousClock.now })
    /// The calls answered, by method and result.
    private let calls = CallCounters()

    public init(service: AuthService, access: AccessControl, logger: Logger) {
        self.service = service
        self.access = access
        self.logger = logger
    }

    public nonisolated var unownedExecutor: UnownedSerialExecutor { service.unownedExecutor }

    /// Who may use which group now.
    public var currentAccess: AccessControl { access }

    /// Replaces the access policy (a reload): the next call of every connection is decided by it.
    public func replaceAccessPolicy(with policy: AccessPolicy) { access.replace(with: policy) }

    /// The calls answered so far, by method and result: each pair counted at least once.
    func callCounts() -> [(method: CallCounters.Method, result: CallCounters.Result, count: UInt64)] {
        calls.nonZero()
    }

    /// Dispatches one call of the `com.exponea.Auth` interface, its method found once from its bytes: GetToken,
    /// and CountGroups of a caller who may use every group, are answered now (they read the service's state in
    /// this turn: its actor runs on the loop) and never wait; every other call runs later, in the connection's
    /// task. Called on the loop. A `oneway` call runs and sends nothing.
    public nonisolated func dispatch(
        _ call: VarlinkCall, from caller: Caller, connection: VarlinkConnectionID
    ) -> VarlinkDispatch {
        // Not through onLoop(_:): its closure captures, and withoutActuallyEscaping allocates a context for it on
        // each call. This one captures nothing, so it is a plain function, cast as onLoop casts.
        service.executor.checkIsolated()
        typealias Isolated = (isolated AuthCallDispatcher, VarlinkCall, Caller, VarlinkConnectionID) -> VarlinkDispatch
        typealias Plain = (AuthCallDispatcher, VarlinkCall, Caller, VarlinkConnectionID) -> VarlinkDispatch
        let inTurn: Isolated = { $0.dispatchInTurn($1, $2, $3) }
        return unsafeBitCast(inTurn, to: Plain.self)(self, call, caller, connection)
    }

    /// Runs `body` in the actor's isolation, synchronously, on the loop's thread; traps on another, as
    /// ``AuthService/onLoop(_:)`` does. The calls that run later run their nonisolated code on the loop (the
    /// connection's task prefers its executor), and enter here for the dispatcher's state without a hop.
    nonisolated func onLoop<T>(_ body: (isolated AuthCallDispatcher) throws -> T) rethrows -> T {
        try service.executor.enter(self, body)
    }

    private func dispatchInTurn(
        _ call: VarlinkCall, _ caller: Caller, _ connection: VarlinkConnectionID
    ) -> VarlinkDispatch {
        guard let method = Self.method(of: call) else {
            calls.count(nil, .methodNotFound)
            return .error(.methodNotFound(call.method), to: call)
        }
        if !call.oneway {
            do {
                switch method {
                case .getToken:
                    let reply = try getToken(call, caller)
                    calls.count(.getToken, .ok)
                    return .answered(reply)
                case .countGroups:
                    if let reply = try everyGroupCounted(call, caller) {
                        calls.count(.countGroups, .ok)
                        return .answered(reply)
                    }
                default:
                    break
                }
            } catch let error as VarlinkError {
                calls.count(method, CallCounters.Result(error))
                return .error(error, to: call)
            } catch {
                // A reply that could not be encoded: the call runs later, where it is answered or logged.
            }
        }
        return .later { replies in await self.run(method, call, caller, connection, replies) }
    }

    /// Runs one call later, in the connection's task, and sends its replies.
    private nonisolated(nonsending) func run(
        _ method: AuthInterface.Method, _ call: VarlinkCall, _ caller: Caller, _ connection: VarlinkConnectionID,
        _ replies: VarlinkReplies
    ) async {
        let reply = call.oneway ? VarlinkReplies.discarded : replies
        do {
            try await perform(method, call, caller, connection, reply)
            onLoop { $0.calls.count(method, .ok) }
        } catch let error as VarlinkError {
            onLoop { $0.calls.count(method, CallCounters.Result(error)) }
            try? reply.send(VarlinkReplyEncoder.error(error))
        } catch {
            // The connection is gone (a send failed): nothing to answer.
            logger.debug(
                "Reply not delivered", metadata: ["authd.method": "\(call.method)", "authd.error": "\(error)"])
        }
    }

    /// The interface's methods by their qualified names' bytes, GetToken first: found without making a string.
    private static let methods = ([.getToken] + AuthInterface.Method.allCases.filter { $0 != .getToken }).map {
        (name: Array($0.qualifiedName.utf8), method: $0)
    }

    private static func method(of call: VarlinkCall) -> AuthInterface.Method? {
        methods.first { call.hasMethod($0.name) }?.method
    }

    /// The refresh claims `connection` holds end with it (the app exited or crashed inside its fetch).
    public func connectionClosed(_ connection: VarlinkConnectionID) async {
        guard claimants.remove(connection) != nil else { return }
        await service.connectionClosed(connection.rawValue)
    }

    private nonisolated(nonsending) func perform(
        _ method: AuthInterface.Method, _ call: VarlinkCall, _ caller: Caller, _ connection: VarlinkConnectionID,
        _ replies: VarlinkReplies
    ) async throws {
        switch method {
        case .setToken:
            // The two strings read from the message's bytes: as SetTokenParameters, without decoding a tree.
            let (groupName, token) = try call.stringParameters("group", "token")
            let group = try checked(groupName, caller)
            // Decoded here, once: the reply shows the header and claims that parsing read.
            let (generation, decoded) = try await mapped { () async throws(AuthServiceError) in
                let decoded: StreamJWT.Decoded
                do throws(StreamJWTError) {
                    decoded = try StreamJWT.decode(token)
                } catch {
                    throw .malformedToken(error)
                }
                return (try await service.setToken(decoded.token, for: group), decoded)
            }
            // The reply first: the caller waits for it, not for the operator's log line (which follows even when
            // the reply cannot be sent, as the token is set).
            defer { logTokenSet(group, generation, decoded.token, caller) }
            try replies.send(
                VarlinkReplyEncoder.reply(
                    SetTokenResult(
                        generation: generation, claims: ClaimsPayload(header: decoded.header, claims: decoded.claims))))

        case .getToken:
            let group = try checked(call.stringParameter("group"), caller)
            try replies.send(await service.getTokenReply(for: group, encode: Self.getTokenReply))

        case .preflight:
            let group = try checked(call.stringParameter("group"), caller)
            try replies.send(VarlinkReplyEncoder.reply(await service.preflight(group)))

        case .reportAuthFailure:
            let parameters = try call.parameters(ReportAuthFailureParameters.self)
            guard (100...599).contains(parameters.status) else { throw VarlinkError.invalidParameter("status") }
            let group = try checked(parameters.group, caller)
            let decision = await service.reportAuthFailure(
                group,
                status: parameters.status,
                sentGeneration: parameters.generation,
                serverSaysExpired: parameters.tokenExpired ?? false
            )
            try replies.send(VarlinkReplyEncoder.reply(ReportAuthFailureResult(decision)))

        case .waitForToken:
            let parameters = try call.parameters(WaitForTokenParameters.self)
            guard (0...WaitForTokenParameters.maximumTimeoutMs).contains(parameters.timeoutMs) else {
                throw VarlinkError.invalidParameter("timeoutMs")
            }
            let group = try checked(parameters.group, caller)
            let (token, generation) = await service.waitForToken(
                group,
                after: parameters.after,
                timeout: .milliseconds(parameters.timeoutMs)
            )
            let result = WaitForTokenResult(token: token.map { CompactToken($0.compact) }, generation: generation)
            try replies.send(VarlinkReplyEncoder.reply(result))

        case .identifyCustomer:
            let parameters = try call.parameters(IdentifyCustomerParameters.self)
            let ids = parameters.customerIds
            guard ids.count <= Limits.maximumCustomerIds,
                ids.allSatisfy({
                    $0.key.utf8.count <= Limits.maximumCustomerIdLength
                        && $0.value.utf8.count <= Limits.maximumCustomerIdLength
                })
            else { throw VarlinkError.invalidParameter("customerIds") }
            let group = try checked(parameters.group, caller)
            let generation = try await mapped { () async throws(AuthServiceError) in
                try await service.identifyCustomer(group, customerIds: ids, token: parameters.token?.value)
            }
            if parameters.token != nil {
                logTokenSet(group, generation, await service.token(for: group).token, caller)
            }
            try replies.send(VarlinkReplyEncoder.reply(GenerationResult(generation: generation)))

        case .anonymize, .stopIntegration:
            let group = try checked(call.stringParameter("group"), caller)
            let cause: AuthService.ClearCause = method == .anonymize ? .anonymize : .stopIntegration
            let result = try await mapped { () async throws(AuthServiceError) in
                try await service.clear(group, cause: cause)
            }
            logCleared(group, cause, caller)
            try replies.send(VarlinkReplyEncoder.reply(result))

        case .clearLocalCustomerData:
            // R9: the wipe; nothing is flushed.
            let group = try checked(call.stringParameter("group"), caller)
            _ = try await mapped { () async throws(AuthServiceError) in
                try await service.clear(group, cause: .clearLocalCustomerData)
            }
            logCleared(group, .clearLocalCustomerData, caller)
            try replies.send(VarlinkReplyEncoder.reply(EmptyPayload()))

        case .subscribe:
            guard call.more else { throw VarlinkError.expectedMore }
            let group = try checked(call.stringParameter("group"), caller)
            // The service hands each event straight to the connection; this call only waits for the end: the
            // connection is gone (a subscriber that does not read is closed by its connection's bound).
            let sink = ConnectionEventSink(replies: replies)
            guard let subscription = await service.subscribe(group, pid: caller.pid, sink: sink) else {
                throw VarlinkError.tooManySubscribers(group: group.name)
            }
            _ = await sink.end()
            await service.unsubscribe(group, subscription: subscription)

        case .acknowledgeFlush:
            let parameters = try call.parameters(AcknowledgeFlushParameters.self)
            let group = try checked(parameters.group, caller)
            await service.acknowledgeFlush(group, flushId: parameters.flushId)
            try replies.send(VarlinkReplyEncoder.reply(EmptyPayload()))

        case .claimRefresh:
            let parameters = try call.parameters(ClaimRefreshParameters.self)
            let group = try checked(parameters.group, caller)
            // Noted before the claim, so that a close racing the grant still ends it.
            _ = onLoop { $0.claimants.insert(connection) }
            let lease = onLoop { $0.access.refreshLease(for: group) } ?? service.refreshLease
            let granted = await service.claimRefresh(
                group, generation: parameters.generation, holder: connection.rawValue,
                renew: parameters.renew ?? false, lease: lease)
            let leaseMs = granted ? Int((lease * 1000).rounded()) : nil
            try replies.send(VarlinkReplyEncoder.reply(ClaimRefreshResult(granted: granted, leaseMs: leaseMs)))

        case .releaseRefresh:
            let parameters = try call.parameters(ReleaseRefreshParameters.self)
            let group = try checked(parameters.group, caller)
            let released = await service.releaseRefresh(
                group, generation: parameters.generation, holder: connection.rawValue)
            try replies.send(VarlinkReplyEncoder.reply(ReleaseRefreshResult(released: released)))

        case .listGroups:
            _ = try call.parameters(EmptyPayload.self)
            let access = onLoop { $0.access }
            let visible = await service.summaries().filter { summary in
                (try? AppGroup(summary.name)).map { access.allows(caller, $0) } ?? false
            }
            try replies.send(VarlinkReplyEncoder.reply(ListGroupsResult(groups: visible)))

        case .countGroups:
            _ = try call.parameters(EmptyPayload.self)
            let access = onLoop { $0.access }
            if access.allowsEveryGroup(caller) {
                try replies.send(Self.countGroupsReply(await service.groupCounts()))
                return
            }
            let visible = await service.summaries().filter { summary in
                (try? AppGroup(summary.name)).map { access.allows(caller, $0) } ?? false
            }
            let (groups, withToken) = (visible.count, visible.count(where: \.hasToken))
            try replies.send(VarlinkReplyEncoder.reply(CountGroupsResult(groups: groups, withToken: withToken)))

        case .whoAmI:
            _ = try call.parameters(EmptyPayload.self)
            let access = onLoop { $0.access }
            let grants = access.grants(for: caller)
            let result = WhoAmIResult(
                pid: caller.pid, uid: caller.uid, gid: caller.gid, gids: caller.groups, unit: access.unit(of: caller),
                everyGroup: grants.everyGroup,
                appGroups: grants.groups.map { GroupAccess(name: $0.group.name, rules: $0.rules) })
            try replies.send(VarlinkReplyEncoder.reply(result))
        }
    }

    /// CountGroups' reply from the counts the service keeps, for a caller who may use every group; nil for
    /// another, whose count is of the groups it may use. On the loop.
    private func everyGroupCounted(_ call: VarlinkCall, _ caller: Caller) throws -> [UInt8]? {
        _ = try call.parameters(EmptyPayload.self)
        guard access.allowsEveryGroup(caller) else { return nil }
        return try Self.countGroupsReply(service.onLoop { $0.groupCounts() })
    }

    /// GetToken's reply, read on the loop.
    private func getToken(_ call: VarlinkCall, _ caller: Caller) throws -> [UInt8] {
        let group = try permitted(call.stringParameter("group"), caller)
        return try service.getTokenReplyOnLoop(for: group, encode: Self.getTokenReply)
    }

    private static func getTokenReply(_ token: StreamJWT?, _ generation: UInt64) throws -> [UInt8] {
        try VarlinkReplyEncoder.reply(
            GetTokenResult(
                token: token.map { CompactToken($0.compact) }, claims: token.map(ClaimsPayload.init),
                generation: generation))
    }

    private static func countGroupsReply(_ counts: (groups: Int, withToken: Int)) throws -> [UInt8] {
        try VarlinkReplyEncoder.reply(CountGroupsResult(groups: counts.groups, withToken: counts.withToken))
    }

    /// ``permitted(_:_:)`` from a call that runs later, on the loop.
    private nonisolated func checked(_ name: String, _ caller: Caller) throws -> AppGroup {
        try onLoop { try $0.permitted(name, caller) }
    }

    /// The validated group, if `caller` may use it.
    private func permitted(_ name: String, _ caller: Caller) throws(VarlinkError) -> AppGroup {
        let group = try AppGroup(wire: name)
        guard access.allows(caller, group) else {
            if let count = deniedLog.admit("denied", uid: caller.uid) {
                var metadata = operatorMetadata(.accessDenied, group, caller: caller)
                metadata["count"] = "\(count)"
                logger.notice("Permission denied\(LogThrottle.suffix(count))", metadata: metadata)
            }
            throw .permissionDenied(group: group.name)
        }
        return group
    }

    /// The operator's "Token set": which group, at which generation, by whom (never the token).
    private nonisolated func logTokenSet(
        _ group: AppGroup, _ generation: UInt64, _ jwt: StreamJWT?, _ caller: Caller
    ) {
        var metadata = onLoop {
            $0.operatorMetadata(.tokenSet, group, generation: generation, caller: caller)
        }
        metadata["state"] = "\(TokenState(jwt, at: Date()))"
        logger.info("Token set", metadata: metadata)
    }

    /// The operator's "Cleared app group": which group, why, by whom.
    private nonisolated func logCleared(
        _ group: AppGroup, _ cause: AuthService.ClearCause, _ caller: Caller
    ) {
        logger.notice(
            "Cleared app group",
            metadata: onLoop {
                $0.operatorMetadata(.cleared, group, reason: cause.rawValue, caller: caller)
            })
    }

    /// An operator event's metadata about a call: the event's fields and the caller's, with the caller's unit
    /// (`CALLER_UNIT=`, found once when it connected).
    private func operatorMetadata(
        _ event: OperatorEvent, _ group: AppGroup, generation: UInt64? = nil, reason: String? = nil, caller: Caller
    ) -> Logger.Metadata {
        var metadata = event.metadata(
            group: group.name, generation: generation, reason: reason, callerUID: caller.uid, callerPID: caller.pid
        ) { Logger.MetadataValue.string($0) }
        if let unit = access.unit(of: caller) { metadata["caller_unit"] = "\(unit)" }
        return metadata
    }

    /// Runs a service operation, turning its errors into the interface's.
    private nonisolated(nonsending) func mapped<T>(
        _ body: nonisolated(nonsending) () async throws(AuthServiceError) -> T
    ) async throws(VarlinkError) -> T {
        do {
            return try await body()
        } catch {
            switch error {
            case .malformedToken(let problem):
                throw .malformedToken(code: problem.code, message: problem.description)
            case .storeFailure:
                throw .storeFailure(message: "the token store could not be written; the previous state is kept")
            }
        }
    }
}
