// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
import CProcessControl
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

/// The `authctl` command, for the executables that are it: the `authctl` of a development build and the multi-call
/// `exponea-authd` binary when it is run as `authctl` (the installed `/usr/bin/authctl` is a symlink to it).
public enum AuthCtlProgram {
    /// Runs `authctl` with `arguments` (the command line without the program name) and exits the process with
    /// its status; it never returns.
    ///
    /// The caller is synchronous: the command runs as a task on the main actor, started at once on this thread
    /// (`Task.immediate`), as an `async` `@main` starts. A command that never waits (`get` and `status`, whose
    /// call the library makes on the calling thread) ends and exits before `dispatchMain()`, which would end this
    /// thread with `pthread_exit` (glibc then loads libgcc_s to unwind it) and drain the main actor on
    /// libdispatch's threads. The multi-call binary's `main.swift` must stay synchronous, because the daemon
    /// installs its own executor for Swift concurrency before the first task.
    public static func main(_ arguments: [String]) -> Never {
        Task.immediate { @MainActor in
            await AuthCtl.main(arguments: arguments)
            exit(0)
        }
        dispatchMain()
    }
}

struct AuthCtl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authctl",
        abstract: "Inspect and manage the stream JWTs that exponea-authd holds for app groups.",
        discussion: """
            Tokens are read from standard input (or a file), never from the command line: the \
            arguments of a process are visible to every user of the machine. Every command that talks \
            to the daemon takes --socket, --timeout and --json; see 'authctl help COMMAND'.

            Exit status: 0 success; 1 an error, which standard error explains; 2 a wrong command \
            line; 3 no usable token (get, preflight); 4 an app did not confirm its flush (anonymize, \
            stop); 69 exponea-authd is not reachable or did not answer in time (--timeout); \
            77 this user may not use the daemon or the app group.

            Shell completions: authctl --generate-completion-script bash (or zsh, fish).
            """,
        version: ProductVersion.current,
        subcommands: [
            Status.self, ListGroups.self, WhoAmI.self, Get.self, SetToken.self, Preflight.self, Identify.self,
            Anonymize.self, Stop.self, Clear.self, Watch.self, Metrics.self, Decode.self, Mint.self, RefreshAgent.self,
        ]
    )

    /// As `AsyncParsableCommand.main(_:)`, but a wrong command line exits with 2 (argument-parser's default is
    /// EX_USAGE, 64) and its message starts with `authctl:` like every other error.
    /// On the caller's actor (`nonisolated(nonsending)`), as the fast path's commands and the library's calls
    /// are: `get` and `status` run on the main thread from start to exit, with no thread started.
    nonisolated(nonsending) static func main(arguments commandLine: [String]) async {
        // A token read from standard input or received from the daemon must not reach a core dump (as ssh-agent
        // does); a failure changes nothing else, so it is not reported.
        _ = authd_disable_core_dumps()
        let arguments = Self.expandingOptionalValues(commandLine)
        if let fast = FastCommandLine(arguments) {
            do {
                let client = AuthDaemonClient(socketPath: fast.socket, unavailableBound: DaemonOptions.unavailableBound)
                switch fast.command {
                case .get:
                    try await Get.printToken(
                        group: fast.group ?? "", header: fast.header, wait: nil, json: fast.json, client: client)
                case .status:
                    try await Status.printStatus(json: fast.json, client: client)
                }
                return
            } catch let code as ExitCode {
                Glibc.exit(code.rawValue)
            } catch {
                exit(withError: error)
            }
        }
        do {
            var command = try await asyncParseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            guard exitCode(for: error) == .validationFailure else { exit(withError: error) }
            var message = fullMessage(for: error)
            if message.hasPrefix("Error: ") { message = "authctl: " + message.dropFirst("Error: ".count) }
            printError(message)
            Glibc.exit(AuthCtlExit.usage.rawValue)
        }
    }
}

extension AuthCtl {
    /// `get --wait` alone means `--wait=30`: argument-parser has no option whose value may be left out.
    static func expandingOptionalValues(_ arguments: [String]) -> [String] {
        guard arguments.first == "get" else { return arguments }
        return arguments.map { $0 == "--wait" ? "--wait=\(Get.defaultWait)" : $0 }
    }
}

/// The exit codes of `authctl`, as the man page documents them.
enum AuthCtlExit {
    /// An error that standard error explains (a malformed token, for example).
    static let failure = ExitCode(1)
    /// The command line is wrong.
    static let usage = ExitCode(2)
    /// `get`, `preflight`: the group has no token, or it has expired.
    static let noToken = ExitCode(3)
    /// `anonymize`, `stop`: the group is cleared, but some of its apps did not confirm their flush.
    static let unconfirmedFlush = ExitCode(4)
    /// EX_UNAVAILABLE: exponea-authd is not reachable, or went away.
    static let unavailable = ExitCode(69)
    /// EX_NOPERM: this user may not use the daemon or the app group.
    static let permissionDenied = ExitCode(77)
}
