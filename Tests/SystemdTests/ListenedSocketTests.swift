import AuthTestKit
import Foundation
import Systemd
import Testing

@Suite("Socket activation (sd_listen_fds)")
struct ListenedSocketTests {
    @Test func takesTheSocketsSystemdSocketActivatePasses() throws {
        let directory = try TemporaryDirectory(prefix: "authd-activate")
        defer { directory.remove() }
        let path = directory.appending("io.socket")
        let activator = try BackgroundProcess(
            "/usr/bin/systemd-socket-activate",
            ["--listen=\(path)", "--fdname=varlink", try BuildProducts.executable("authd-listen-probe")]
        )
        defer { activator.stop() }
        // systemd-socket-activate starts the service on the first connection, as systemd does.
        #expect(BackgroundProcess.waitUntil { FileManager.default.fileExists(atPath: path) })
        let client = try UnixClient(path: path)
        defer { client.close() }

        #expect(BackgroundProcess.waitUntil { activator.output.contains("environment left") })
        let lines = activator.output.split(separator: "\n").filter {
            !$0.hasPrefix("Listening on") && !$0.hasPrefix("Communication attempt") && !$0.hasPrefix("Execing")
        }
        #expect(lines == ["socket fd=3 name=varlink unixStream=true", "environment left: []"])
    }

    @Test func withoutActivationThereAreNoSockets() throws {
        unsetenv("LISTEN_FDS")
        #expect(try ListenedSocket.takeAll().isEmpty)
    }
}

/// A connected AF_UNIX stream socket, for poking servers in tests.
struct UnixClient {
    let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8) + [0]) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    }

    func close() { _ = Glibc.close(descriptor) }
}
