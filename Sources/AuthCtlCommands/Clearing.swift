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

/// What `anonymize` and `stop` share: the daemon asks the group's apps to flush their pending events (waiting
/// at most the daemon's --flush-timeout, 2 seconds by default), then clears token and customer ids and tells
/// the apps (`cleared`); the apps that did not confirm their flush are printed, and the exit status is 4.
/// `clear` is the wipe: no flush.
enum GroupClearing {
    /// The discussion of `anonymize` and `stop`, after their first paragraph.
    static let howItWorks = """
        For the whole app group: the daemon first asks every app of the group to flush its pending \
        events (flushRequested) and waits until each has acknowledged, or at most its \
        --flush-timeout (2 seconds by default); then it removes the group's token and customer ids, \
        in memory and on disk, and tells every app (cleared). The command returns when that is done \
        and prints one confirmation line. When an app did not confirm its flush (it did not answer \
        in time, or went away first), the group is cleared all the same, a line for each such app \
        goes to standard error, and the exit status is 4.
        """

    /// The daemon's method a command calls: `anonymize` or `stopIntegration`.
    typealias Method = @Sendable (AuthDaemonClient, String) async throws -> ClearResult

    static func run(
        _ options: DaemonOptions, group: String, cause: String, done: String, _ call: @escaping Method
    ) async throws {
        let result = try await options.withClient { try await call($0, group) }
        if options.json {
            let unconfirmed: [[String: JSONValue]] = result.unconfirmed.map {
                ["pid": Int($0.pid).json, "reason": $0.reason.rawValue.json]
            }
            printLine(jsonLine(["group": group, "cause": cause, "asked": result.asked, "unconfirmed": unconfirmed]))
        } else {
            printLine("\(done) app group '\(group)': its token and customer ids are cleared")
        }
        guard !result.confirmed else { return }
        for app in result.unconfirmed {
            let why = app.reason == .timedOut ? "did not confirm in time" : "went away before confirming"
            printError("authctl: the app with pid \(app.pid) \(why): its pending events may be lost")
        }
        printError(
            "authctl: \(result.unconfirmed.count) of \(result.asked) apps of '\(group)' did not confirm their flush")
        throw AuthCtlExit.unconfirmedFlush
    }
}

/// `anonymize` and `stop`: one command over the daemon's method, with the words that differ.
protocol GroupClearingCommand: AsyncParsableCommand {
    var group: GroupArgument { get }
    var options: DaemonOptions { get }
    /// The cause the apps are told, and `--json`'s `cause`.
    static var cause: String { get }
    /// The verb of the confirmation line.
    static var done: String { get }
    /// The daemon's method.
    static var method: GroupClearing.Method { get }
}

extension GroupClearingCommand {
    func run() async throws {
        try await GroupClearing.run(options, group: group.group, cause: Self.cause, done: Self.done, Self.method)
    }
}

extension AuthCtl {
    struct Anonymize: GroupClearingCommand {
        static let configuration = CommandConfiguration(
            commandName: "anonymize",
            abstract: "Forget an app group's customer: flush, then clear token and customer ids.",
            usage: "authctl anonymize <group> [--socket <path>] [--timeout <seconds>]\n"
                + "                  [--json]",
            discussion: """
                What an app does when its user logs out (the SDK's anonymize).

                \(GroupClearing.howItWorks)

                --json prints {group, cause, asked, unconfirmed} with cause anonymize; unconfirmed \
                lists {pid, reason} with reason timedOut or dropped.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        static let cause = "anonymize"
        static let done = "Anonymized"
        static let method: GroupClearing.Method = { try await $0.anonymize(group: $1) }
    }

    struct Stop: GroupClearingCommand {
        static let configuration = CommandConfiguration(
            commandName: "stop",
            abstract: "Stop an app group's integration: flush, then clear token and customer ids.",
            discussion: """
                What an app does when the integration stops (the SDK's stopIntegration); the apps are \
                told with cause stopIntegration.

                \(GroupClearing.howItWorks)

                --json prints {group, cause, asked, unconfirmed} with cause stopIntegration.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        static let cause = "stopIntegration"
        static let done = "Stopped"
        static let method: GroupClearing.Method = { try await $0.stopIntegration(group: $1) }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "clear",
            abstract: "Wipe an app group's local customer data at once, without a flush.",
            discussion: """
                What an app does for the SDK's clearLocalCustomerData: the wipe for a revoked consent \
                or a reset device. Nothing is flushed: the daemon removes the group's token and \
                customer ids, in memory and on disk, at once, and tells every app of the group \
                (cleared, with cause clearLocalCustomerData) to drop its local customer data, unsent \
                events included. The command returns when that is done and prints one confirmation \
                line.

                --json prints {group, cause} with cause clearLocalCustomerData.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            try await options.withClient { try await $0.clearLocalCustomerData(group: group.group) }
            if options.json {
                printLine(jsonLine(["group": group.group, "cause": "clearLocalCustomerData"]))
            } else {
                printLine(
                    "Cleared app group '\(group.group)': its token and customer ids are gone, nothing was flushed")
            }
        }
    }
}
