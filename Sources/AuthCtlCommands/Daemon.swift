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

/// `--socket`: which daemon a command talks to.
struct SocketOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Talk to the daemon at this socket instead of $EXPONEA_AUTHD_SOCKET or the default.",
            valueName: "path"
        ),
        completion: .file()
    )
    var socket: String?

    func validate() throws {
        if socket?.isEmpty == true { throw ValidationError("--socket needs a path") }
    }
}

/// The options of every command that talks to the daemon and answers: the socket, a timeout and `--json`.
struct DaemonOptions: ParsableArguments {
    /// How long a command waits for a daemon that is away: short, so that a script fails fast.
    static let unavailableBound = Duration.seconds(1)

    @OptionGroup var location: SocketOption
    var socket: String? { location.socket }

    @Option(
        help: ArgumentHelp(
            "Exit 69 when the daemon does not answer within this many seconds (default 5).",
            valueName: "seconds"
        )
    )
    var timeout: Double?

    @Flag(help: "Print JSON for scripts instead of text.")
    var json = false

    func validate() throws {
        if let timeout, !(timeout > 0 && timeout <= 3600) {
            throw ValidationError("--timeout needs a number of seconds above 0 and up to 3600, not \(timeout)")
        }
    }

    /// How long connecting and each call may take.
    var callTimeout: Duration {
        timeout.map { .milliseconds(Int(($0 * 1000).rounded(.up))) } ?? AuthDaemonClient.defaultCallTimeout
    }

    /// A client for the chosen socket.
    func client() -> AuthDaemonClient {
        AuthDaemonClient(socketPath: socket, unavailableBound: Self.unavailableBound, callTimeout: callTimeout)
    }

    /// Runs `body` with a client; a failed call is reported as `authctl: <message>` and ends the command with
    /// its exit code.
    func withClient<T>(_ body: (AuthDaemonClient) async throws -> T) async throws -> T {
        do {
            return try await body(client())
        } catch let error as AuthClientError {
            throw report(error)
        }
    }
}

/// The positional app group argument, validated before the daemon is asked.
struct GroupArgument: ParsableArguments {
    @Argument(help: "The app group, such as com.example.shop.")
    var group: String

    func validate() throws {
        do {
            _ = try AppGroup(group)
        } catch {
            throw ValidationError("'\(group)' is not an app group name: \(error)")
        }
    }
}

/// Prints `authctl: <message>` and returns the exit code for `error`.
func report(_ error: AuthClientError) -> ExitCode {
    printError("authctl: \(error.message)")
    return error.exitCode
}

extension AuthClientError {
    /// The exit code a failure of this kind ends `authctl` with.
    var exitCode: ExitCode {
        switch code {
        case .daemonUnavailable, .connectionLost, .timedOut: AuthCtlExit.unavailable
        case .permissionDenied: AuthCtlExit.permissionDenied
        case .invalidGroupName: AuthCtlExit.usage
        default: AuthCtlExit.failure
        }
    }
}
