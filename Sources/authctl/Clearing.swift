// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import ExponeaAuth
import Foundation

/// What `anonymize`, `stop` and `clear` share: the daemon asks the group's apps to flush their pending events
/// (waiting at most the daemon's --flush-timeout, 2 seconds by default), then clears token and customer ids and tells the apps (`cleared`).
enum GroupClearing {
    /// The discussion of the three commands, after their first paragraph.
    static let howItWorks = """
        For the whole app group: the daemon first asks every app of the group to flush its pending \
        events (flushRequested) and waits until each has acknowledged, or at most its \
        --flush-timeout (2 seconds by default); then it removes the group's token and customer ids, \
        in memory and on disk, and tells every app (cleared). The command returns when that is done \
        and prints one confirmation line.
        """

    static func run(
        _ options: DaemonOptions, group: String, cause: String, done: String,
        _ call: @escaping @Sendable (AuthDaemonClient, String) async throws -> Void
    ) async throws {
        try await options.withClient { try await call($0, group) }
        if options.json {
            printLine(jsonLine(["group": group, "cause": cause]))
        } else {
            printLine("\(done) app group '\(group)': its token and customer ids are cleared")
        }
    }
}

extension AuthCtl {
    struct Anonymize: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget an app group's customer: flush, then clear token and customer ids.",
            discussion: """
                What an app does when its user logs out (the SDK's anonymize).

                \(GroupClearing.howItWorks)

                --json prints {group, cause} with cause anonymize.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            try await GroupClearing.run(options, group: group.group, cause: "anonymize", done: "Anonymized") {
                try await $0.anonymize(group: $1)
            }
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop an app group's integration: flush, then clear token and customer ids.",
            discussion: """
                What an app does when the integration stops (the SDK's stopIntegration); the apps are \
                told with cause stopIntegration.

                \(GroupClearing.howItWorks)

                --json prints {group, cause} with cause stopIntegration.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            try await GroupClearing.run(options, group: group.group, cause: "stopIntegration", done: "Stopped") {
                try await $0.stopIntegration(group: $1)
            }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Clear an app group's local customer data: flush, then clear everything.",
            discussion: """
                What an app does for the SDK's clearLocalCustomerData: every app of the group drops \
                the customer's local data; the apps are told with cause clearLocalCustomerData.

                \(GroupClearing.howItWorks)

                --json prints {group, cause} with cause clearLocalCustomerData.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            try await GroupClearing.run(options, group: group.group, cause: "clearLocalCustomerData", done: "Cleared") {
                try await $0.clearLocalCustomerData(group: $1)
            }
        }
    }
}
