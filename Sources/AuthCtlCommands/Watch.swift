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
    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "watch",
            abstract: "Print an app group's events as they happen, until interrupted.",
            discussion: """
                One line per event, flushed at once, such as:

                  state tokenState=valid refreshClaimed=false generation=3
                  tokenRefreshed generation=3
                  jwtError reason=expiredSoon generation=3 customerIds=registered=jane
                  flushRequested flushId=ID generation=3
                  cleared cause=anonymize generation=4

                The first line is where the group stands (state), followed by the jwtError it still \
                waits on, if any. watch acknowledges every flushRequested at once (it has nothing to flush), so that it \
                never makes anonymize or stop wait for it. Customer ids are printed; tokens never \
                are.

                SIGINT (Ctrl-C) and SIGTERM end it with exit status 0. When the daemon stops, or ends \
                the subscription (as it does for a reader 256 events behind), it ends with exit status \
                69.

                --json prints each event as one JSON object a line: kind, group, generation and, when \
                they apply, reason, customerIds, flushId, cause, tokenState and refreshClaimed.
                """
        )

        @OptionGroup var group: GroupArgument

        @OptionGroup var options: DaemonOptions

        func run() async throws {
            exitOnSignals([SIGINT, SIGTERM])
            let name = group.group
            let client = options.client()
            if isatty(STDERR_FILENO) == 1 {
                printError("authctl: watching app group '\(name)'; press Ctrl-C to stop")
            }
            do {
                for try await event in client.events(group: name) {
                    if event.kind == .flushRequested, let flushId = event.flushId {
                        // First, so that a slow reader of standard output does not hold the clear.
                        do {
                            try await client.acknowledgeFlush(group: name, flushId: flushId)
                        } catch {
                            printError("authctl: could not acknowledge the flush: \(error.message)")
                        }
                    }
                    printLine(options.json ? Self.json(event) : Self.text(event))
                }
            } catch let error as AuthClientError where error.code == .connectionLost {
                // The daemon stopped, or dropped this subscription (it fell 256 events behind). Not subscribing
                // again: with socket activation, that would start a daemon that was just stopped.
                printError("authctl: lost exponea-authd while watching app group '\(name)': \(error.message)")
                throw AuthCtlExit.unavailable
            } catch let error as AuthClientError {
                throw report(error)
            }
        }

        /// `jwtError reason=expiredSoon generation=3 customerIds=registered=jane`.
        static func text(_ event: AuthEvent) -> String {
            var fields = [event.kind.rawValue]
            if let reason = event.reason { fields.append("reason=\(reason.rawValue)") }
            if let cause = event.cause { fields.append("cause=\(cause)") }
            if let flushId = event.flushId { fields.append("flushId=\(flushId)") }
            if let tokenState = event.tokenState { fields.append("tokenState=\(tokenState.rawValue)") }
            if let claimed = event.refreshClaimed { fields.append("refreshClaimed=\(claimed)") }
            fields.append("generation=\(event.generation)")
            if let ids = event.customerIds, !ids.isEmpty { fields.append("customerIds=\(customerIdsText(ids))") }
            return fields.joined(separator: " ")
        }

        static func json(_ event: AuthEvent) -> String {
            var object: [String: any JSONRepresentable] = [
                "kind": event.kind.rawValue, "group": event.group, "generation": event.generation,
            ]
            if let reason = event.reason { object["reason"] = reason.rawValue }
            if let ids = event.customerIds { object["customerIds"] = ids }
            if let flushId = event.flushId { object["flushId"] = flushId }
            if let cause = event.cause { object["cause"] = cause }
            if let tokenState = event.tokenState { object["tokenState"] = tokenState.rawValue }
            if let claimed = event.refreshClaimed { object["refreshClaimed"] = claimed }
            return jsonLine(object)
        }
    }
}

/// Ends the process with status 0 on any of `signals`. Every line is flushed as it is printed, so there is
/// nothing left to write.
///
/// The signals are unblocked on this thread: a parent may have started authctl with some blocked, and a
/// signal sent to the process is delivered to a thread that does not block it.
private func exitOnSignals(_ signals: [Int32]) {
    var set = sigset_t()
    sigemptyset(&set)
    for number in signals {
        signal(number) { _ in _exit(0) }
        sigaddset(&set, number)
    }
    pthread_sigmask(SIG_UNBLOCK, &set, nil)
}
