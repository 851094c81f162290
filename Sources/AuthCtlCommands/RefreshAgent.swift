// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
import Dispatch
import ExponeaAuth

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

extension AuthCtl {
    struct RefreshAgent: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "refresh-agent",
            abstract: "Keep an app group's token fresh by running a command when it needs a new one.",
            usage: "authctl refresh-agent <group> [--command-timeout <seconds>]\n"
                + "                      [--config-directory <path>] [--socket <path>]\n"
                + "                      [-- <command> [<argument> ...]]",
            discussion: """
                Runs until stopped, subscribed to the group. When the group's token is missing, expires \
                within a minute, has expired or was reported invalid (and at start, and after the daemon \
                comes back), the agent asks the daemon to claim the refresh of that token; only when the \
                claim is granted does it run the command, so however many agents and apps meet the same \
                expiry, the command runs once.

                The command gets on standard input one JSON object {"group", "reason", "customerIds"}, \
                and EXPONEA_AUTH_GROUP and EXPONEA_AUTH_REASON in its environment. It prints the token \
                on standard output, alone or as {"token": "...", "expiresIn": SECONDS}, and the agent \
                stores it. Its standard error goes where the agent's goes.

                Without a command after --, the agent runs the group's RefreshCommand= from the [AppGroup] \
                section of authd.conf (and authd.conf.d/*.conf) in --config-directory, with /bin/sh -c.

                A command that exits with a non-zero status, prints nothing usable or runs past \
                --command-timeout (its whole process group is killed) is retried after about 1 s, then \
                2, 4, ... up to 5 minutes, with 20% jitter. Each failure is logged with its reason and \
                exit status; the token never is. When the daemon goes away the agent subscribes again \
                with the same backoff, up to 30 s.
                """
        )

        /// The longest pause between two tries of the command.
        static let maximumBackoff = Duration.seconds(300)
        /// The longest pause between two tries to reach the daemon.
        static let maximumReconnect = Duration.seconds(30)

        @OptionGroup var group: GroupArgument

        @Option(help: ArgumentHelp("How long the command may run (1 to 3600).", valueName: "seconds"))
        var commandTimeout: Int = 30

        @OptionGroup var location: SocketOption

        @Option(
            help: ArgumentHelp(
                "Where authd.conf is, for the group's RefreshCommand= when no command is given.",
                valueName: "path"
            ),
            completion: .directory
        )
        var configDirectory = "/etc/exponea-authd"

        @Argument(parsing: .postTerminator, help: "The command that prints a new token, after --.")
        var command: [String] = []

        func validate() throws {
            guard (1...3600).contains(commandTimeout) else {
                throw ValidationError(
                    "--command-timeout needs a number of seconds from 1 to 3600, not \(commandTimeout)")
            }
        }

        func run() async throws {
            var arguments = command
            if arguments.isEmpty {
                let configured: String?
                do {
                    configured = try RefreshCommand.configured(for: group.group, in: configDirectory)
                } catch {
                    printError("authctl: \(error)")
                    throw AuthCtlExit.failure
                }
                guard let configured else {
                    printError(
                        "authctl: no command: give one after --, or RefreshCommand= in the [AppGroup] of "
                            + "'\(group.group)' in \(configDirectory)/authd.conf")
                    throw AuthCtlExit.usage
                }
                arguments = ["/bin/sh", "-c", configured]
            }
            let agent = Agent(
                group: group.group,
                client: AuthDaemonClient(socketPath: location.socket, unavailableBound: .seconds(2)),
                command: RefreshCommand(arguments: arguments, timeout: .seconds(commandTimeout))
            )
            await agent.run()
        }
    }
}

/// The refresh agent's loop: subscribe, and refresh the token once per claim.
struct Agent: Sendable {
    var group: String
    var client: AuthDaemonClient
    var command: RefreshCommand

    /// The reasons the agent refreshes for (R11): not `insufficient`, which no new token mends.
    static let reasons: Set<JwtErrorReason> = [.notProvided, .invalid, .expired, .expiredSoon]

    /// Runs until the process ends.
    func run() async {
        var reconnect = Backoff(initial: .milliseconds(250), maximum: AuthCtl.RefreshAgent.maximumReconnect)
        AgentLog.info("watching app group '\(group)'")
        while true {
            do {
                // Every subscription starts with where the group stands (a `state` event), then the jwtError it
                // still waits on: at start and after the daemon came back, nothing is missed.
                for try await event in client.events(group: group) {
                    reconnect.reset()
                    guard let (reason, customerIds) = Self.need(in: event) else { continue }
                    try await refresh(reason: reason, generation: event.generation, customerIds: customerIds)
                }
            } catch {
                let delay = reconnect.next()
                AgentLog.warning("lost the daemon (\(error)); trying again in \(Self.seconds(delay))")
                try? await Task.sleep(for: delay)
            }
        }
    }

    /// Why `event` asks for a new token, if it does.
    static func need(in event: AuthEvent) -> (JwtErrorReason, [String: String])? {
        switch event.kind {
        case .jwtError:
            guard let reason = event.reason, reasons.contains(reason) else { return nil }
            return (reason, event.customerIds ?? [:])
        case .state:
            // A claimed refresh is another's to finish; if it fails, the daemon says so again.
            guard event.refreshClaimed != true else { return nil }
            switch event.tokenState {
            case .notProvided?: return (.notProvided, event.customerIds ?? [:])
            case .expired?: return (.expired, event.customerIds ?? [:])
            case .expiredSoon?: return (.expiredSoon, event.customerIds ?? [:])
            case .valid?, nil: return nil
            }
        default:
            return nil
        }
    }

    /// Why the group needs a token now, if it does.
    private func currentNeed() async throws(AuthClientError) -> (JwtErrorReason, UInt64, [String: String])? {
        let current = try await client.getToken(group: group)
        let now = Date()
        let reason: JwtErrorReason
        let state = current.claims.map { TokenState(expiresAt: Date(timeIntervalSince1970: $0.expiresAt), at: now) }
        switch state ?? .notProvided {
        case .valid: return nil
        case .notProvided: reason = .notProvided
        case .expired: reason = .expired
        case .expiredSoon: reason = .expiredSoon
        }
        return (reason, current.generation, current.claims?.customerIds ?? [:])
    }

    /// Claims the refresh of `generation` and, when granted, runs the command until it yields a token that is
    /// stored, or another app or agent sets one.
    private func refresh(reason: JwtErrorReason, generation: UInt64, customerIds: [String: String])
        async throws(AuthClientError)
    {
        var backoff = Backoff(initial: .seconds(1), maximum: AuthCtl.RefreshAgent.maximumBackoff)
        var need = (reason: reason, generation: generation, customerIds: customerIds)
        while true {
            if let claim = try await client.holdRefreshClaim(group: group, generation: need.generation) {
                AgentLog.info("refreshing app group '\(group)' (\(need.reason), generation \(need.generation))")
                let failure = try await runCommand(reason: need.reason, customerIds: need.customerIds, claim: claim)
                guard let failure else {
                    claim.close()
                    return
                }
                AgentLog.warning("the refresh command failed: \(failure)")
                // At once, so that another agent or app need not wait out the lease.
                await claim.release()
            } else if backoff.attempts == 0 {
                // Another app or agent has it (or the token was set meanwhile); if it fails, the daemon says so.
                AgentLog.info("another app or agent refreshes app group '\(group)' (generation \(need.generation))")
                return
            }
            let delay = backoff.next()
            AgentLog.notice("trying again in \(Self.seconds(delay))")
            try? await Task.sleep(for: delay)
            guard let current = try await currentNeed() else {
                AgentLog.info("app group '\(group)' has a fresh token")
                return
            }
            need = current
        }
    }

    /// Runs the command once, renewing the claim's lease while it runs, and stores its token.
    ///
    /// - Returns: Why no token was stored, or nil when one was.
    private func runCommand(reason: JwtErrorReason, customerIds: [String: String], claim: RefreshClaim)
        async throws(AuthClientError) -> String?
    {
        let ids = customerIds.sorted { $0.key < $1.key }.map { "\(jsonString($0.key)):\(jsonString($0.value))" }
        let request =
            #"{"group":\#(jsonString(group)),"reason":\#(jsonString(reason.rawValue)),"#
            + #""customerIds":{\#(ids.joined(separator: ","))}}"#
        let environment = ["EXPONEA_AUTH_GROUP": group, "EXPONEA_AUTH_REASON": reason.rawValue]
        let command = command
        // A backend may take longer than the lease: renew it at half its length while the command runs.
        let renewing = Task {
            guard claim.lease > .zero else { return }
            while !Task.isCancelled {
                try await Task.sleep(for: claim.lease / 2)
                guard try await claim.renew() else { return }
            }
        }
        defer { renewing.cancel() }
        // The command blocks for up to its timeout: off the concurrency pool.
        let outcome = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    returning: command.run(input: Array(request.utf8) + [0x0A], environment: environment))
            }
        }
        switch outcome {
        case .token(let token):
            do {
                let stored = try await client.setToken(token, group: group)
                AgentLog.info(
                    "stored a new token for app group '\(group)' (generation \(stored.generation), expires at "
                        + "\(Int(stored.claims.expiresAt)))")
                return nil
            } catch let error where error.code == .malformedToken {
                // The message says what is wrong without the token.
                return "it printed something that is not a stream JWT: \(error.message)"
            }
        case .unusableOutput(let why): return "exit status 0, but \(why)"
        case .failed(let status): return "exit status \(status)"
        case .killed(let signal): return "killed by signal \(signal)"
        case .timedOut: return "it ran past \(Self.seconds(command.timeout)) and was killed"
        case .cannotStart(let why): return "cannot start it: \(why)"
        }
    }

    static func seconds(_ duration: Duration) -> String {
        let value = duration / .seconds(1)
        return value < 10 ? "\((value * 10).rounded() / 10) s" : "\(Int(value.rounded())) s"
    }
}

/// The agent's log: standard error, with syslog priority prefixes that journald reads when it is the journal's
/// stream.
enum AgentLog {
    static let toJournal = getenv("JOURNAL_STREAM") != nil

    static func info(_ message: String) { write(6, message) }
    static func notice(_ message: String) { write(5, message) }
    static func warning(_ message: String) { write(4, message) }

    private static func write(_ priority: Int, _ message: String) {
        printError(toJournal ? "<\(priority)>\(message)" : "authctl refresh-agent: \(message)")
    }
}
