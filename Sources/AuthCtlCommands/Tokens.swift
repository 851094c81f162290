// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
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
    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Print an app group's token.",
            usage: "authctl get <group> [--header] [--wait[=<seconds>]] [--socket <path>]\n"
                + "            [--json]",
            discussion: """
                Prints the bare token on standard output, for TOKEN=$(authctl get GROUP); with \
                --header, the whole header line: Authorization: Bearer TOKEN. Nothing changes in the \
                daemon and no app is told.

                Exit status 3 when the group has no token (nothing is printed), and when its token has \
                expired: the token is still printed, with a note on standard error, so that a script \
                never uses an expired token without noticing. A token that expires within a minute \
                (expiredSoon) still works: exit status 0.

                With --wait, a group whose token is missing, expired or expires within a minute is \
                first checked as an app checks it before a request (the group's apps and refresh agent \
                are told), then get waits, at most SECONDS (30 with --wait alone; write --wait=SECONDS), \
                for a fresh token that an agent or app sets, and prints it as soon as it lands. When none \
                comes in time it ends as without --wait: exit status 3 without a token or with an \
                expired one.

                --json prints {group, token, generation, state, expiresAt, customerIds}; token, \
                expiresAt and customerIds are null without a token.
                """
        )

        /// `--wait` alone waits this long.
        static let defaultWait = 30
        /// The longest `--wait`.
        static let maximumWait = 3600

        @OptionGroup var group: GroupArgument

        @Flag(help: "Print the header line 'Authorization: Bearer TOKEN'.")
        var header = false

        @Option(
            name: .customLong("wait"),
            help: ArgumentHelp(
                "Wait up to this long for a fresh token (--wait alone: \(defaultWait)).", valueName: "seconds")
        )
        var wait: Int?

        @OptionGroup var options: DaemonOptions

        func validate() throws {
            if let wait, !(0...Self.maximumWait).contains(wait) {
                throw ValidationError("--wait needs a number of seconds from 0 to \(Self.maximumWait), not \(wait)")
            }
        }

        func run() async throws {
            try await Self.printToken(
                group: group.group, header: header, wait: wait, json: options.json, client: options.client())
        }

        /// What `get` does once its command line is read (by ArgumentParser, or by ``FastCommandLine``): prints the
        /// group's token, or its JSON, and ends with exit status 3 without a usable token.
        nonisolated(nonsending) static func printToken(
            group name: String, header: Bool, wait: Int?, json: Bool, client: AuthDaemonClient
        ) async throws {
            do {
                try await fetchAndPrint(group: name, header: header, wait: wait, json: json, client: client)
            } catch let error as AuthClientError {
                throw report(error)
            }
        }

        nonisolated(nonsending) private static func fetchAndPrint(
            group name: String, header: Bool, wait: Int?, json: Bool, client: AuthDaemonClient
        ) async throws {
            if let wait {
                let fresh = try await Self.waitForFreshToken(group: name, client: client, bound: .seconds(wait))
                if !fresh { printError("authctl: no fresh token for app group '\(name)' came within \(wait) s") }
            }
            let result = try await client.getToken(group: name)
            let now = Date()
            let expiresAt = result.claims.map { Date(timeIntervalSince1970: $0.expiresAt) }
            let state: TokenState = expiresAt.map { TokenState(expiresAt: $0, at: now) } ?? .notProvided
            if json {
                printLine(
                    jsonLine([
                        "group": name,
                        "token": result.token?.value,
                        "generation": result.generation,
                        "state": state.rawValue,
                        "expiresAt": result.claims?.expiresAt,
                        "customerIds": result.claims?.customerIds,
                    ])
                )
            } else if let token = result.token {
                printLine(header ? "Authorization: Bearer \(token.value)" : token.value)
            }
            switch state {
            case .notProvided:
                printError("authctl: app group '\(name)' has no token; set one with 'authctl set \(name) < token.jwt'")
                throw AuthCtlExit.noToken
            case .expired:
                let when = expiresAt.map { expiryText($0, now: now) } ?? "?"
                printError("authctl: the token of app group '\(name)' expired at \(when); set a new one")
                throw AuthCtlExit.noToken
            case .expiredSoon, .valid:
                break
            }
        }

        /// Checks the group as an app does before a request (so the group's apps and agent learn that it needs
        /// a token), then waits until a valid token is set or `bound` passes.
        ///
        /// - Returns: Whether the group's token is valid at the end.
        static func waitForFreshToken(group: String, client: AuthDaemonClient, bound: Duration)
            async throws(AuthClientError) -> Bool
        {
            let deadline = ContinuousClock.now + bound
            var current = try await client.preflight(group: group)
            while current.state != .valid {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return false }
                // The daemon answers at the latest after its own bound (5 s): wait again until the deadline.
                let waited = try await client.waitForToken(group: group, after: current.generation, timeout: left)
                if waited.generation != current.generation { current = try await client.preflight(group: group) }
            }
            return true
        }
    }

    struct SetToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "set",
            abstract: "Store a token for an app group, read from standard input or a file.",
            usage: "authctl set <group> [--file <path>] [--socket <path>]\n"
                + "            [--timeout <seconds>] [--json]",
            discussion: """
                Reads the token from standard input, or from --file; white space around it is ignored. \
                The daemon checks its form (three base64url parts, alg, exp and ids; not the \
                signature), stores it with a new generation and tells every app of the group \
                (tokenRefreshed), even when the token has already expired. Prints the new generation and \
                the expiry.

                A token given as an argument is refused: the arguments of a process are visible to \
                every user of the machine (and stay in the shell's history).

                  authctl set com.example.shop < token.jwt
                  authctl set com.example.shop --file token.jwt

                Exit status 1 when the token is malformed: standard error says what is wrong with it, \
                without repeating it.

                --json prints {group, generation, state, expiresAt, customerIds}.
                """
        )

        @OptionGroup var group: GroupArgument

        @Option(
            help: ArgumentHelp("Read the token from this file instead of standard input ('-').", valueName: "path"),
            completion: .file()
        )
        var file: String?

        /// Only to refuse it with an explanation.
        @Argument(help: .hidden)
        var token: String?

        @OptionGroup var options: DaemonOptions

        func validate() throws {
            guard let token else { return }
            let looksLikeAToken = token.hasPrefix("eyJ") || token.split(separator: ".").count == 3
            guard looksLikeAToken else {
                throw ValidationError("unexpected argument '\(token)'; the token is read from standard input")
            }
            throw ValidationError(
                """
                a token on the command line is visible to every user of this machine (and stays in \
                your shell's history); pass it on standard input instead: \
                authctl set \(group.group) < token.jwt, or with --file token.jwt
                """
            )
        }

        func run() async throws {
            let name = group.group
            let token: String
            do {
                token = try TokenInput.read(path: file, usage: "authctl set \(name) < token.jwt")
            } catch {
                printError("authctl: \(error.message)")
                throw AuthCtlExit.failure
            }
            let result = try await options.withClient { try await $0.setToken(token, group: name) }
            let expiresAt = Date(timeIntervalSince1970: result.claims.expiresAt)
            let now = Date()
            let state = TokenState(expiresAt: expiresAt, at: now)
            if options.json {
                printLine(
                    jsonLine([
                        "group": name,
                        "generation": result.generation,
                        "state": state.rawValue,
                        "expiresAt": result.claims.expiresAt,
                        "customerIds": result.claims.customerIds,
                    ])
                )
            } else {
                printLine(
                    "Set the token of app group '\(name)': generation \(result.generation), "
                        + "expires \(expiryText(expiresAt, now: now))"
                )
            }
            if state == .expired {
                printError("authctl: note: this token has already expired; the group's apps will ask for a new one")
            }
        }
    }

    struct Preflight: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "preflight",
            abstract: "Run the check an app runs before a stream request, and print its outcome.",
            usage: "authctl preflight <group> [--socket <path>] [--timeout <seconds>]\n"
                + "                  [--json]",
            discussion: """
                Prints the token's state (valid, expiredSoon, expired or notProvided), the reason for \
                the JWT error handler, if any, and the generation. Unlike get, this is what an app \
                does: when there is a reason, the daemon sends jwtError to every app of the group, \
                which runs its JWT error handler (to fetch a new token).

                Exit status 3 when the state is notProvided or expired; 0 for expiredSoon, as the token \
                still works.

                --json prints {group, state, reason, generation}; reason is null when there is none. \
                The token is not printed: use get.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            let name = group.group
            let result = try await options.withClient { try await $0.preflight(group: name) }
            if options.json {
                printLine(
                    jsonLine([
                        "group": name,
                        "state": result.state.rawValue,
                        "reason": result.reason?.rawValue,
                        "generation": result.generation,
                    ])
                )
            } else {
                let reason = result.reason.map { "\($0.rawValue) (the group's apps were sent jwtError)" } ?? "(none)"
                printLine(
                    """
                    state:      \(result.state.rawValue)
                    reason:     \(reason)
                    generation: \(result.generation)
                    """
                )
            }
            if result.state == .notProvided || result.state == .expired { throw AuthCtlExit.noToken }
        }
    }

    struct Identify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "identify",
            abstract: "Store the customer ids of an app group, with or without a token.",
            usage: "authctl identify <group> --id <key=value> ... [--token-stdin] [<options>]",
            discussion: """
                Replaces the group's customer ids with the --id options, and stores a new generation. \
                With --token-stdin the token for this customer is read from standard input and stored \
                too; without it, the stored token is CLEARED, as it belongs to the previous identity: \
                set the new customer's token next (authctl set), or the apps' JWT error handler will \
                ask for one.

                  authctl identify shop --id registered=jane --token-stdin < jane.jwt

                --json prints {group, generation, customerIds, tokenCleared}.
                """
        )

        @OptionGroup var group: GroupArgument

        @Option(
            name: .customLong("id"),
            help: ArgumentHelp(
                "A customer id, such as registered=jane@example.com; repeat for more.", valueName: "key=value")
        )
        var ids: [String] = []

        @Flag(help: "Read the customer's token from standard input and store it too.")
        var tokenStdin = false

        @OptionGroup var options: DaemonOptions

        func validate() throws {
            _ = try customerIds()
        }

        /// The --id options as a dictionary.
        func customerIds() throws -> [String: String] {
            guard !ids.isEmpty else { throw ValidationError("give at least one --id KEY=VALUE") }
            var result: [String: String] = [:]
            for id in ids {
                guard let equals = id.firstIndex(of: "="), equals != id.startIndex else {
                    throw ValidationError("--id needs KEY=VALUE, such as registered=jane@example.com, not '\(id)'")
                }
                let key = String(id[..<equals])
                guard result[key] == nil else { throw ValidationError("--id \(key) is given twice") }
                result[key] = String(id[id.index(after: equals)...])
            }
            return result
        }

        func run() async throws {
            let name = group.group
            let customerIds = try customerIds()
            var token: String?
            if tokenStdin {
                do {
                    token = try TokenInput.read(
                        path: nil, usage: "authctl identify \(name) --id KEY=VALUE --token-stdin < token.jwt")
                } catch {
                    printError("authctl: \(error.message)")
                    throw AuthCtlExit.failure
                }
            }
            let generation = try await options.withClient { [token] in
                try await $0.identifyCustomer(group: name, customerIds: customerIds, token: token)
            }
            if options.json {
                printLine(
                    jsonLine([
                        "group": name,
                        "generation": generation,
                        "customerIds": customerIds,
                        "tokenCleared": token == nil,
                    ])
                )
            } else if token == nil {
                printLine(
                    "Identified app group '\(name)' as \(customerIdsText(customerIds)) (generation \(generation)); "
                        + "its token was cleared: set this customer's with 'authctl set \(name)'"
                )
            } else {
                printLine(
                    "Identified app group '\(name)' as \(customerIdsText(customerIds)) with the token from "
                        + "standard input (generation \(generation))"
                )
            }
        }
    }
}
