// SPDX-License-Identifier: Apache-2.0
/// Whether the daemon serves the whole system or one user's session.
public enum DaemonMode: String, Sendable, CaseIterable {
    /// One instance for the machine, started by the system manager; access is configured per app group.
    case system
    /// One instance for the current user; only that user may connect.
    case user
}

/// Where the daemon keeps its state and its socket.
///
/// | | system | user |
/// | --- | --- | --- |
/// | state | `$STATE_DIRECTORY`, else `/var/lib/exponea-authd` | `$STATE_DIRECTORY`, else `$XDG_STATE_HOME/exponea-authd`, else `~/.local/state/exponea-authd` |
/// | runtime | `$RUNTIME_DIRECTORY`, else `/run/exponea-authd` | `$RUNTIME_DIRECTORY`, else `$XDG_RUNTIME_DIR/exponea-authd`, else `/tmp/exponea-authd-<uid>` |
/// | socket | `<runtime>/io.socket` | `<runtime>/io.socket` |
///
/// `$STATE_DIRECTORY` and `$RUNTIME_DIRECTORY` are what systemd sets for `StateDirectory=` and
/// `RuntimeDirectory=`. `$CREDENTIALS_DIRECTORY` (for `LoadCredential=`) is passed through.
public struct DaemonPaths: Hashable, Sendable {
    /// The directory of the token store (mode 0700).
    public var stateDirectory: String
    /// The directory of the socket (mode 0700 in user mode).
    public var runtimeDirectory: String
    /// The Varlink socket.
    public var socketPath: String
    /// Where systemd put the unit's credentials, if it did.
    public var credentialsDirectory: String?
    /// Whether ``runtimeDirectory`` is the fallback under `/tmp`, because no `XDG_RUNTIME_DIR` was set.
    public var usesRuntimeFallback: Bool

    /// The socket's file name inside the runtime directory.
    public static let socketName = "io.socket"
    /// The directory name under the base directories.
    public static let directoryName = "exponea-authd"

    /// Resolves the paths for `mode` from the environment.
    ///
    /// - Parameters:
    ///   - environment: The process environment.
    ///   - uid: The real user id, for the fallback runtime directory.
    ///   - stateDirectory: An explicit state directory (`--state-directory`), overriding the environment.
    ///   - socketPath: An explicit socket path (`--socket`), overriding the runtime directory's socket.
    public init(
        mode: DaemonMode,
        environment: [String: String],
        uid: UInt32,
        stateDirectory: String? = nil,
        socketPath: String? = nil
    ) {
        func absolute(_ name: String) -> String? {
            // systemd passes a colon-separated list when a unit names several directories; the first is ours.
            guard let value = environment[name]?.split(separator: ":").first, value.hasPrefix("/") else {
                return nil
            }
            return String(value)
        }
        let name = Self.directoryName
        var fallback = false
        switch mode {
        case .system:
            self.stateDirectory = stateDirectory ?? absolute("STATE_DIRECTORY") ?? "/var/lib/\(name)"
            self.runtimeDirectory = absolute("RUNTIME_DIRECTORY") ?? "/run/\(name)"
        case .user:
            let home = absolute("HOME")
            self.stateDirectory =
                stateDirectory ?? absolute("STATE_DIRECTORY") ?? absolute("XDG_STATE_HOME").map { "\($0)/\(name)" }
                ?? "\(home ?? "/tmp")/.local/state/\(name)"
            if let runtime = absolute("RUNTIME_DIRECTORY") {
                self.runtimeDirectory = runtime
            } else if let xdg = absolute("XDG_RUNTIME_DIR") {
                self.runtimeDirectory = "\(xdg)/\(name)"
            } else {
                self.runtimeDirectory = "/tmp/\(name)-\(uid)"
                fallback = true
            }
        }
        self.socketPath = socketPath ?? "\(self.runtimeDirectory)/\(Self.socketName)"
        self.credentialsDirectory = absolute("CREDENTIALS_DIRECTORY")
        self.usesRuntimeFallback = fallback && socketPath == nil
    }
}
