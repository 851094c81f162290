import ArgumentParser

@main
struct AuthCtl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "authctl",
        abstract: "Inspect and manage the stream JWTs that exponea-authd holds for app groups.",
        discussion: """
            Tokens are read from standard input, never from the command line: the arguments of a \
            process are visible to every user of the machine.
            """,
        version: "0.1.0",
        subcommands: [Decode.self]
    )
}

/// Exit codes shared by the subcommands.
enum AuthCtlExit {
    /// The input was not what the command needs (a malformed token, for example).
    static let failure = ExitCode(1)
}
