// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
import ExponeaAuth

extension AuthCtl {
    struct WhoAmI: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "whoami",
            abstract: "Show how the daemon sees this process, and which app groups it may use.",
            discussion: """
                Prints what the daemon read when this command connected: the pid, uid, primary and \
                supplementary gids, and the systemd unit (in system mode the system unit; in user \
                mode the unit in the user's service manager); then the app groups this process may use, each with the \
                rules of exponea-authd.conf(5) that allow it (Users=UID, Groups=GID, \
                Units=PATTERN, root, or owner in user mode). A group that is not listed is refused.

                --json prints one object: pid, uid, gid, gids, unit, everyGroup, appGroups \
                ([{name, rules}]); unit and everyGroup may be null.
                """
        )

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            let seen = try await options.withClient { try await $0.whoAmI() }
            if options.json {
                let groups: [JSONValue] = seen.appGroups.map {
                    .object(["name": $0.name.json, "rules": $0.rules.json])
                }
                printLine(
                    jsonLine([
                        "pid": seen.pid.json,
                        "uid": Int(seen.uid).json,
                        "gid": Int(seen.gid).json,
                        "gids": seen.gids.map { Int($0) }.json,
                        "unit": seen.unit.json,
                        "everyGroup": seen.everyGroup.json,
                        "appGroups": JSONValue.array(groups),
                    ]))
                return
            }
            printLine(Self.text(seen))
        }

        /// The text form: one field per line, the groups one per line below their label.
        static func text(_ seen: WhoAmIResult) -> String {
            var lines = [
                "pid:    \(seen.pid)",
                "uid:    \(seen.uid)",
                "gid:    \(seen.gid)",
                "gids:   \(seen.gids.isEmpty ? "-" : seen.gids.map(String.init).joined(separator: " "))",
                "unit:   \(seen.unit ?? "- (none the daemon can know)")",
            ]
            var groups: [String] = []
            if let every = seen.everyGroup { groups.append("every group (\(every))") }
            groups += seen.appGroups.map { "\($0.name) (\($0.rules.joined(separator: ", ")))" }
            if groups.isEmpty { groups = ["none"] }
            lines.append("groups: " + groups.joined(separator: "\n        "))
            return lines.joined(separator: "\n")
        }
    }
}
