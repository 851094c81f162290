// SPDX-License-Identifier: Apache-2.0

/// The systemd units a process runs in, as the path of its cgroup (cgroup v2) says: its unit in the system's
/// service manager and, for a process of a user's service manager, its unit there.
///
/// The unit is the first part of the path that is not a slice, as `sd_pid_get_unit(3)` reads it:
/// `/system.slice/shop-app.service` is `shop-app.service`; `/user.slice/user-1000.slice/user@1000.service/app.slice/
/// shop.service` is `user@1000.service`, whose user unit is `shop.service`.
public struct ProcessUnits: Hashable, Sendable, CustomStringConvertible {
    /// The unit in the system's service manager: `shop-app.service`, `session-3.scope`, `user@1000.service`.
    public var unit: String
    /// The unit in a user's service manager, when ``unit`` is `user@UID.service` and the process is in one.
    public var userUnit: String?

    public init(unit: String, userUnit: String? = nil) {
        self.unit = unit
        self.userUnit = userUnit
    }

    /// The units of the cgroup `path` (as in `/proc/PID/cgroup`, from the root of the hierarchy); nil when the
    /// path names no unit (the root, or a slice alone).
    public init?(cgroupPath path: some StringProtocol) {
        var unit: String?
        var userUnit: String?
        for component in path.split(separator: "/") {
            if component.hasSuffix(".slice") { continue }
            guard Self.isUnitName(component) else { break }
            if unit == nil {
                unit = String(component)
                guard Self.isUserManager(component) else { break }
            } else {
                userUnit = String(component)
                break
            }
        }
        guard let unit else { return nil }
        self.init(unit: unit, userUnit: userUnit)
    }

    public var description: String { userUnit.map { "\(unit) (\($0))" } ?? unit }

    /// Whether `name` could be a unit that holds processes: a name and a suffix `.service` or `.scope`.
    static func isUnitName(_ name: some StringProtocol) -> Bool {
        (name.hasSuffix(".service") || name.hasSuffix(".scope")) && name.count > 6 && name.count <= 255
    }

    /// `user@UID.service`: a user's service manager, whose cgroup holds the units of that manager.
    static func isUserManager(_ name: some StringProtocol) -> Bool {
        name.hasPrefix("user@") && name.hasSuffix(".service")
    }
}
