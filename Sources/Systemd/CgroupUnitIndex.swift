// SPDX-License-Identifier: Apache-2.0
import CPidfd

#if canImport(Glibc)
    import Glibc
#endif

/// The units of the cgroups (cgroup v2) by their ids, read from the cgroup file system: what a cgroup id from a
/// pidfd (`PIDFD_GET_INFO`) names, without `/proc` (which `ProtectProc=invisible` hides) and without asking
/// systemd over the bus.
///
/// A cgroup's id is the inode of its directory, which `readdir(3)` gives with no `stat(2)`. The index holds the
/// directories of units (`system.slice/shop-app.service`), and inside `user@UID.service` those of the user's
/// units, never what a unit makes below its own (`Delegate=`): a process there is known by no unit. It is read
/// at the first lookup, and again when an id is not in it (a unit started since); an id still missing then is
/// remembered as known by no unit, since cgroup ids are never reused, so one cgroup costs at most one reading.
///
/// Used on one thread (the daemon's loop): it has no lock.
public final class CgroupUnitIndex {
    /// The most directories one reading looks at (units and slices); past it the rest is not known.
    public static let maximumDirectories = 16384
    /// The most of them inside one user's manager (`user@UID.service`), whose tree its user may add to.
    public static let maximumPerUserManager = 1024
    /// The most ids remembered as known by no unit, before that memory starts again.
    static let maximumUnknown = 4096
    private static let maximumDepth = 16

    /// The cgroup v2 mount this index reads, or nil when there is none.
    public let root: String?
    private let budget: (total: Int, perUserManager: Int)
    private var units: [UInt64: ProcessUnits] = [:]
    private var unknown: Set<UInt64> = []
    /// How many times the file system was read, for tests and benchmarks.
    public private(set) var readings = 0
    /// How many directories the last reading looked at.
    public private(set) var directoriesLastRead = 0

    /// - Parameters:
    ///   - root: the cgroup v2 mount; nil to find it (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a
    ///   system in systemd's hybrid mode).
    ///   - budget: the most directories a reading looks at, and inside one user's manager; the defaults are
    ///     ``maximumDirectories`` and ``maximumPerUserManager`` (other values are for tests).
    public init(
        root: String? = nil, budget: (total: Int, perUserManager: Int) = (maximumDirectories, maximumPerUserManager)
    ) {
        self.root = root ?? Self.findRoot()
        self.budget = budget
    }

    /// The units of the cgroup `id`, or nil when it is known by none (the root, a slice, below a unit's own
    /// cgroup, or no cgroup v2 here).
    public func units(ofCgroup id: UInt64) -> ProcessUnits? {
        if let found = units[id] { return found }
        if unknown.contains(id) || root == nil { return nil }
        read()
        if let found = units[id] { return found }
        if unknown.count >= Self.maximumUnknown { unknown.removeAll(keepingCapacity: true) }
        unknown.insert(id)
        return nil
    }

    /// Reads the directories of the units again.
    private func read() {
        guard let root else { return }
        readings += 1
        var found: [UInt64: ProcessUnits] = [:]
        found.reserveCapacity(units.count)
        var left = budget.total
        visit(root, depth: 0, manager: nil, into: &found, budget: &left)
        directoriesLastRead = budget.total - left
        units = found
    }

    /// Records the units below `path`: slices are entered, units recorded; inside a user's manager
    /// (`manager`), its units are recorded as user units. Each directory seen (a slice or a unit) takes one of
    /// `budget`; a user's manager, whose tree its user may add to (it is delegated), has at most
    /// ``maximumPerUserManager`` of it, so no user can make a reading long for the others.
    private func visit(
        _ path: String, depth: Int, manager: String?, into found: inout [UInt64: ProcessUnits], budget: inout Int
    ) {
        guard depth < Self.maximumDepth, budget > 0, let directory = opendir(path) else { return }
        defer { closedir(directory) }
        while budget > 0, let entry = readdir(directory) {
            guard entry.pointee.d_type == UInt8(DT_DIR) else { continue }
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            let id = UInt64(entry.pointee.d_ino)
            if name.hasSuffix(".slice") {
                budget -= 1
                visit(path + "/" + name, depth: depth + 1, manager: manager, into: &found, budget: &budget)
            } else if ProcessUnits.isUnitName(name) {
                budget -= 1
                if let manager {
                    found[id] = ProcessUnits(unit: manager, userUnit: name)
                } else {
                    found[id] = ProcessUnits(unit: name)
                    if ProcessUnits.isUserManager(name) {
                        var share = min(budget, self.budget.perUserManager)
                        let before = share
                        visit(path + "/" + name, depth: depth + 1, manager: name, into: &found, budget: &share)
                        budget -= before - share
                    }
                }
            }
        }
    }

    /// The cgroup v2 mount: `/sys/fs/cgroup` (unified), else `/sys/fs/cgroup/unified` (hybrid), else none.
    private static func findRoot() -> String? {
        ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].first { authd_is_cgroup2($0) != 0 }
    }
}
