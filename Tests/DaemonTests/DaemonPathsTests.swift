// SPDX-License-Identifier: Apache-2.0
import AuthDaemon
import Testing

@Suite("Daemon paths")
struct DaemonPathsTests {
    @Test func systemModeDefaults() {
        let paths = DaemonPaths(mode: .system, environment: [:], uid: 0)
        #expect(paths.stateDirectory == "/var/lib/exponea-authd")
        #expect(paths.runtimeDirectory == "/run/exponea-authd")
        #expect(paths.socketPath == "/run/exponea-authd/io.socket")
        #expect(paths.credentialsDirectory == nil)
        #expect(!paths.usesRuntimeFallback)
    }

    @Test func systemModeFollowsSystemdDirectories() {
        let environment = [
            "STATE_DIRECTORY": "/var/lib/exponea-authd:/var/lib/other",
            "RUNTIME_DIRECTORY": "/run/exponea-authd",
            "CREDENTIALS_DIRECTORY": "/run/credentials/exponea-authd.service",
        ]
        let paths = DaemonPaths(mode: .system, environment: environment, uid: 0)
        #expect(paths.stateDirectory == "/var/lib/exponea-authd")
        #expect(paths.credentialsDirectory == "/run/credentials/exponea-authd.service")
    }

    @Test func userModeUsesXDGDirectories() {
        let environment = [
            "HOME": "/home/ann", "XDG_STATE_HOME": "/home/ann/.state", "XDG_RUNTIME_DIR": "/run/user/1000",
        ]
        let paths = DaemonPaths(mode: .user, environment: environment, uid: 1000)
        #expect(paths.stateDirectory == "/home/ann/.state/exponea-authd")
        #expect(paths.socketPath == "/run/user/1000/exponea-authd/io.socket")
        #expect(!paths.usesRuntimeFallback)
    }

    @Test func userModeWithoutXDGFallsBackToPrivateDirectories() {
        let paths = DaemonPaths(mode: .user, environment: ["HOME": "/root"], uid: 0)
        #expect(paths.stateDirectory == "/root/.local/state/exponea-authd")
        #expect(paths.runtimeDirectory == "/tmp/exponea-authd-0")
        #expect(paths.socketPath == "/tmp/exponea-authd-0/io.socket")
        #expect(paths.usesRuntimeFallback)
    }

    @Test func relativeEnvironmentValuesAreIgnored() {
        let environment = ["HOME": "/home/ann", "XDG_STATE_HOME": "relative", "XDG_RUNTIME_DIR": ""]
        let paths = DaemonPaths(mode: .user, environment: environment, uid: 1000)
        #expect(paths.stateDirectory == "/home/ann/.local/state/exponea-authd")
        #expect(paths.runtimeDirectory == "/tmp/exponea-authd-1000")
    }

    @Test func optionsOverride() {
        let paths = DaemonPaths(
            mode: .user,
            environment: ["HOME": "/home/ann"],
            uid: 1000,
            stateDirectory: "/srv/state",
            socketPath: "/srv/authd.sock"
        )
        #expect(paths.stateDirectory == "/srv/state")
        #expect(paths.socketPath == "/srv/authd.sock")
        #expect(!paths.usesRuntimeFallback)
    }
}
