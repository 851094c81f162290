// SPDX-License-Identifier: Apache-2.0
import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// The systemd unit a process runs in, as its cgroup says (`sd_pid_get_unit(3)`): a read of `/proc`, which never
/// waits on a disk or a peer, so the daemon may ask it while it answers a call.
public enum ProcessUnit {
    /// The unit of `pid`: its user unit when it runs in a user's service manager (not `user@UID.service`
    /// itself), else its system unit; nil when it has none or is gone.
    public static func of(_ pid: Int32) -> String? {
        guard pid > 0, let system = read(pid, sd_pid_get_unit) else { return nil }
        guard system.hasPrefix("user@") || system.hasPrefix("session-") else { return system }
        return read(pid, sd_pid_get_user_unit) ?? system
    }

    private static func read(
        _ pid: Int32, _ function: (pid_t, UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32
    ) -> String? {
        var unit: UnsafeMutablePointer<CChar>?
        guard function(pid, &unit) >= 0, let unit else { return nil }
        defer { free(unit) }
        return String(cString: unit)
    }
}
