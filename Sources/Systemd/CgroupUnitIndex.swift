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
/// directories of the system's units (`system.slice/shop-app.service`), entering slices only, and of one user's
/// units when it is given that user's manager (`user@UID.service`: the user daemon's own). It never reads what a
/// unit makes below its own cgroup (`Delegate=`), nor another user's manager, which its user may fill with as many
/// cgroups as it likes: a process there is known by no unit.
///
/// It is read at the first lookup, or before it (``prepare()``). While it reads a directory it watches it (inotify: a cgroup made or removed
/// there), so it reads again only when an id is not in it and a directory it read has changed since (a unit
/// started): an id that cgroups made elsewhere (in a user's own tree) brings costs one read of the watch, never a
/// reading. An id found in no unit is remembered (cgroup ids are never reused). Where inotify is not available it
/// reads again at each new id.
///
/// Used on one thread (the daemon's loop): it has no lock.
public final class CgroupUnitIndex {
    /// The most directories one reading looks at (units and slices); past it the rest is not known.
    public static let maximumDirectories = 4096
    /// The most ids remembered as known by no unit, before that memory starts again.
    static let maximumUnknown = 4096
    private static let maximumDepth = 16

    /// The cgroup v2 mount this index reads, or nil when there is none.
    public let root: String?
    /// The user's manager whose units are read too (`user@UID.service`), or nil.
    public let userManager: String?
    private let budget: Int
    private var units: [UInt64: ProcessUnits] = [:]
    private var unknown: Set<UInt64> = []
    /// The inotify descriptor that watches the directories read; -1 without one.
    private var changes: Int32 = -1
    /// How many times the file system was read, for tests and benchmarks.
    public private(set) var readings = 0
    /// How many directories the last reading looked at.
    public private(set) var directoriesLastRead = 0

    /// - Parameters:
    ///   - root: the cgroup v2 mount; nil to find it (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a
    ///     system in systemd's hybrid mode).
    ///   - userManager: the user's manager whose units to read too, `user@UID.service` (the user daemon's own);
    ///     nil for none.
    ///   - budget: the most directories a reading looks at (another than ``maximumDirectories`` is for tests).
    public init(root: String? = nil, userManager: String? = nil, budget: Int = maximumDirectories) {
        self.root = root ?? Self.findRoot()
        self.userManager = userManager
        self.budget = budget
    }

    deinit {
        if changes >= 0 { close(changes) }
    }

    /// Reads the cgroup file system now, unless it was read already: a server does when it starts, so that its
    /// first peer finds the index made, and the code that makes it runs in the start-up, not in serving.
    public func prepare() {
        if readings == 0, root != nil { read() }
    }

    /// The units of the cgroup `id`, or nil when it is known by none (the root, a slice, below a unit's own
    /// cgroup, another user's manager, or no cgroup v2 here).
    public func units(ofCgroup id: UInt64) -> ProcessUnits? {
        if let found = units[id] { return found }
        if unknown.contains(id) || root == nil { return nil }
        if readings == 0 || changed() {
            read()
            if let found = units[id] { return found }
        }
        if unknown.count >= Self.maximumUnknown { unknown.removeAll(keepingCapacity: true) }
        unknown.insert(id)
        return nil
    }

    /// Whether a directory read has changed since (the watch's events, all read now); true without a watch.
    private func changed() -> Bool {
        guard changes >= 0 else { return true }
        var any = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(changes, $0.baseAddress, $0.count) }
            if count > 0 {
                any = true
                continue
            }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && errno != EAGAIN { return true }
            return any
        }
    }

    /// Reads the directories of the units again, each watched before it is read.
    private func read() {
        guard let root else { return }
        readings += 1
        if changes >= 0 { close(changes) }
        changes = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        var found: [UInt64: ProcessUnits] = [:]
        found.reserveCapacity(units.count)
        var left = budget
        visit(root, depth: 0, manager: nil, into: &found, budget: &left)
        directoriesLastRead = budget - left
        units = found
    }

    /// Watches, then records the units below `path`: slices are entered, units recorded; inside the user's
    /// manager (`manager`), its units are recorded as user units. Each directory seen (a slice or a unit) takes
    /// one of `budget`.
    private func visit(
        _ path: String, depth: Int, manager: String?, into found: inout [UInt64: ProcessUnits], budget: inout Int
    ) {
        guard depth < Self.maximumDepth, budget > 0 else { return }
        watch(path)
        guard let directory = opendir(path) else { return }
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
                    if name == userManager {
                        visit(path + "/" + name, depth: depth + 1, manager: name, into: &found, budget: &budget)
                    }
                }
            }
        }
    }

    /// Watches `path` for cgroups made or removed in it; without a watch (inotify's limit), every new id reads
    /// again.
    private func watch(_ path: String) {
        guard changes >= 0 else { return }
        let events = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW)
        if inotify_add_watch(changes, path, events) < 0 {
            close(changes)
            changes = -1
        }
    }

    /// The cgroup v2 mount: `/sys/fs/cgroup` (unified), else `/sys/fs/cgroup/unified` (hybrid), else none.
    private static func findRoot() -> String? {
        ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].first { authd_is_cgroup2($0) != 0 }
    }
}
