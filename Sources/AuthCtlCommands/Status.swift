// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
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
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show which daemon answers, where, and how many app groups it holds.",
            discussion: """
                Prints the daemon's product and version, the socket, its Varlink interfaces and the \
                number of app groups this user may use (with how many have a token).

                --json prints one object: product, vendor, version, url, interfaces, socket, groups, \
                groupsWithToken.
                """
        )

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            try await Self.printStatus(json: options.json, client: options.client())
        }

        /// What `status` does once its command line is read (by ArgumentParser, or by ``FastCommandLine``).
        nonisolated(nonsending) static func printStatus(json: Bool, client: AuthDaemonClient) async throws {
            // The daemon counts (CountGroups): with thousands of groups, the list itself would be most of the work.
            let (info, counts): (DaemonInfo, CountGroupsResult)
            do {
                (info, counts) = (try await client.info(), try await client.countGroups())
            } catch {
                throw report(error)
            }
            let (groups, withToken, socket) = (counts.groups, counts.withToken, client.socketPath)
            if json {
                printLine(
                    jsonLine([
                        "product": info.product,
                        "vendor": info.vendor,
                        "version": info.version,
                        "url": info.url,
                        "interfaces": info.interfaces,
                        "socket": socket,
                        "groups": groups,
                        "groupsWithToken": withToken,
                    ])
                )
            } else {
                printLine(
                    """
                    daemon:     \(info.product) \(info.version) (\(info.vendor))
                    socket:     \(socket)
                    interfaces: \(info.interfaces.joined(separator: ", "))
                    groups:     \(groups) (\(withToken) with a token)
                    """
                )
            }
        }
    }

    struct ListGroups: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List the app groups this user may use, with their tokens' state.",
            discussion: """
                One line per group: its name, the token's state (valid, expiredSoon, expired or \
                notProvided), when it expires (local time), its generation (counts every change) and \
                how many apps are subscribed to its events.

                --json prints {"groups": [{name, hasToken, state, expiresAt, generation, \
                subscribers}]}, expiresAt in Unix seconds or null.
                """
        )

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            let groups = try await options.withClient { try await $0.listGroups() }
            if options.json {
                let rows: [JSONValue] = groups.map { group in
                    .object([
                        "name": group.name.json,
                        "hasToken": group.hasToken.json,
                        "state": group.state.rawValue.json,
                        "expiresAt": group.expiresAt.json,
                        "generation": group.generation.json,
                        "subscribers": group.subscribers.json,
                    ])
                }
                printLine(jsonLine(["groups": rows]))
                return
            }
            if groups.isEmpty {
                printLine("No app groups.")
                return
            }
            let header = ["GROUP", "STATE", "EXPIRES", "GENERATION", "SUBSCRIBERS"]
            let rows = groups.map { group in
                [
                    group.name,
                    group.state.rawValue,
                    group.expiresAt.map { Decode.localTime(Date(timeIntervalSince1970: $0)) } ?? "-",
                    "\(group.generation)",
                    "\(group.subscribers)",
                ]
            }
            printLine(Self.table([header] + rows))
        }

        /// Left-aligned columns two spaces apart, without trailing spaces.
        static func table(_ rows: [[String]]) -> String {
            let widths = rows[0].indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
            return rows.map { row in
                row.enumerated().map { column, cell in
                    column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
                }
                .joined(separator: "  ")
            }
            .joined(separator: "\n")
        }
    }
}
