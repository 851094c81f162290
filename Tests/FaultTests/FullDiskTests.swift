// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// A tmpfs of its own, mounted for one test and unmounted on every path.
final class TinyFilesystem {
    let directory: TemporaryDirectory
    var path: String { directory.path }
    private var mounted = false

    /// Mounts a tmpfs of `size` (mount's syntax, such as `256k`), mode 0700, on a fresh directory.
    init(size: String) throws {
        directory = try TemporaryDirectory(prefix: "authd-tinyfs")
        let result = try ChildProcess.run(
            "/bin/mount", ["-t", "tmpfs", "-o", "size=\(size),mode=0700", "authd-test", directory.path])
        guard result.status == 0 else {
            directory.remove()
            throw MountFailure(message: result.standardError)
        }
        mounted = true
    }

    func unmount() {
        guard mounted else { return }
        if (try? ChildProcess.run("/bin/umount", [path]))?.status != 0 {
            _ = try? ChildProcess.run("/bin/umount", ["-l", path])
        }
        mounted = false
        directory.remove()
    }

    deinit { unmount() }

    /// Whether this process may mount a tmpfs (CAP_SYS_ADMIN): tried once.
    static let canMount: Bool = {
        guard let probe = try? TinyFilesystem(size: "16k") else { return false }
        probe.unmount()
        return true
    }()

    /// Fills the filesystem with `name` until a write fails with ENOSPC; returns the bytes written.
    func fill(_ name: String) throws -> Int {
        let descriptor = open(directory.appending(name), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        let chunk = [UInt8](repeating: 0x55, count: 4096)
        var total = 0
        // Then byte by byte, for the last partial page.
        for size in [4096, 1] {
            while true {
                let written = chunk.withUnsafeBytes { write(descriptor, $0.baseAddress, size) }
                if written > 0 {
                    total += written
                } else if errno == ENOSPC {
                    break
                } else {
                    throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
                }
            }
        }
        return total
    }

    struct MountFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { "cannot mount a tmpfs: \(message)" }
    }
}

/// The token store on a filesystem that fills up: writes fail cleanly, the daemon keeps what it had and keeps
/// serving, and recovers when space returns.
@Suite("Fault: the token store's filesystem is full", .offPool)
struct FullDiskTests {
    @Test(.enabled(if: TinyFilesystem.canMount, "needs CAP_SYS_ADMIN to mount a tmpfs for the state directory"))
    func setTokenFailsWithStoreFailureKeepsTheOldTokenAndRecoversWhenSpaceReturns() throws {
        let filesystem = try TinyFilesystem(size: "256k")
        defer { filesystem.unmount() }
        let daemon = try DaemonUnderTest(stateDirectory: filesystem.path)
        defer { daemon.stop() }
        let pid = try #require(daemon.pid)
        let jwt = TestJWT()
        let first = jwt.token(expiringIn: 3600, ids: ["registered": "first"])
        let second = jwt.token(expiringIn: 3600, ids: ["registered": "second"])
        let third = jwt.token(expiringIn: 3600, ids: ["registered": "third"])

        let client = try FaultClient(path: daemon.socketPath)
        defer { client.close() }
        #expect(try client.call("SetToken", ["group": "shop", "token": first])["generation"] as? Int == 1)

        let filled = try filesystem.fill("filler")
        #expect(filled > 0)

        // Every write fails with StoreFailure and leaves the group as it was.
        let writes: [(String, [String: Any])] = [
            ("SetToken", ["group": "shop", "token": second]),
            ("SetToken", ["group": "news", "token": second]),
            ("IdentifyCustomer", ["group": "shop", "customerIds": ["registered": "second"], "token": second]),
        ]
        for (method, parameters) in writes {
            #expect {
                try client.call(method, parameters)
            } throws: { error in
                (error as? FaultClient.Failure)?.name == "com.exponea.Auth.StoreFailure"
            }
        }
        let kept = try client.call("GetToken", ["group": "shop"])
        #expect(kept["token"] as? String == first)
        #expect(kept["generation"] as? Int == 1)
        let news = try client.call("GetToken", ["group": "news"])
        #expect(news["token"] == nil)
        #expect(news["generation"] as? Int == 0)
        // The daemon is up, answers a new connection, and left no temporary file behind.
        #expect(kill(pid, 0) == 0)
        let other = try FaultClient(path: daemon.socketPath)
        defer { other.close() }
        #expect(try other.call("Preflight", ["group": "shop"])["state"] as? String == "valid")
        #expect(
            Set(try FileManager.default.contentsOfDirectory(atPath: filesystem.path))
                == ["shop.token", "filler", "daemon.lock"])
        #expect(daemon.waitForOutput { $0.contains("Cannot store the token") })

        // Space returns: the write succeeds, and survives a restart.
        try FileManager.default.removeItem(atPath: filesystem.path + "/filler")
        #expect(try client.call("SetToken", ["group": "shop", "token": third])["generation"] as? Int == 2)
        #expect(daemon.stop(signal: SIGTERM) == 0)
        try daemon.start()
        let again = try FaultClient(path: daemon.socketPath)
        defer { again.close() }
        let restored = try again.call("GetToken", ["group": "shop"])
        #expect(restored["token"] as? String == third)
        #expect(restored["generation"] as? Int == 2)
    }
}
