// SPDX-License-Identifier: Apache-2.0
import AuthCore

#if canImport(Glibc)
    import Glibc
#endif
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Who may use which app group, in system mode: read from `authd.conf` and its drop-ins.
///
/// ```ini
/// # /etc/exponea-authd/authd.conf.d/shop.conf
/// [AppGroup]
/// Name=com.example.shop
/// Users=shop-app shop-widget
/// Groups=shop-apps
/// Units=shop-app.service kiosk-*.service
/// RefreshLeaseSec=20
/// ```
///
/// Root may use every group; anyone else only the groups whose `Users=` name them, whose `Groups=` name a
/// group the calling process holds (its primary or a supplementary group, as the kernel reports them for the
/// connection), or whose `Units=` match the system unit the process runs in (``Caller/unit``: its cgroup when it
/// connected). The rules add up, and sections for the same group too, in file order. Names are resolved to ids
/// when the configuration is read.
public struct AccessPolicy: Sendable {
    /// The users and groups allowed per app group.
    public private(set) var rules: [AppGroup: Rule] = [:]
    /// What could not be resolved (unknown users or groups), to log; the rest is in force.
    public private(set) var warnings: [String] = []

    /// Who may use one app group, and the group's own settings.
    public struct Rule: Hashable, Sendable {
        public var uids: Set<UInt32> = []
        public var gids: Set<UInt32> = []
        /// `Units=`: unit names and globs (`fnmatch(3)`), matched against the caller's system unit.
        public var units: [String] = []
        /// `RefreshLeaseSec=`: the group's refresh lease, instead of the daemon's `--refresh-lease`.
        public var refreshLease: Double?
    }

    /// The seconds `RefreshLeaseSec=` accepts, as `--refresh-lease` does.
    public static let refreshLeaseRange = 0.1...600.0

    /// A policy that allows nobody but root.
    public init() {}

    /// Reads the configuration: `directory/authd.conf`, then `directory/authd.conf.d/*.conf` in lexical
    /// order. Missing files are fine (nobody but root is allowed).
    ///
    /// - Throws: ``ConfigurationError`` for the first file that cannot be read or parsed.
    public init(directory: String, users: any UserDatabase = SystemUserDatabase()) throws(ConfigurationError) {
        var files: [(name: String, text: String)] = []
        let main = directory + "/authd.conf"
        if let text = try Self.read(main) { files.append((main, text)) }
        let dropIns = directory + "/authd.conf.d"
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dropIns)) ?? []
        for name in names.filter({ $0.hasSuffix(".conf") }).sorted() {
            if let text = try Self.read(dropIns + "/" + name) { files.append((dropIns + "/" + name, text)) }
        }
        try self.init(files: files, users: users)
    }

    /// Builds a policy from the texts of configuration files, in order.
    public init(files: [(name: String, text: String)], users: any UserDatabase) throws(ConfigurationError) {
        for (name, text) in files {
            let file = try ConfigurationFile(parsing: text, name: name)
            for section in file.sections {
                guard section.name == "AppGroup" else {
                    warnings.append("\(name):\(section.line): unknown section [\(section.name)], ignored")
                    continue
                }
                try add(section, file: name, users: users)
            }
        }
    }

    /// Whether `caller` may use `group`: decided on the process's own credentials, its uid, its primary group
    /// and the supplementary groups it holds (`SO_PEERCRED`, `SO_PEERGROUPS`), never on what the user database
    /// says its user belongs to. A process that dropped a group (`setpriv --clear-groups`) has lost what that
    /// group allowed, and no lookup (NSS, LDAP) runs while a call waits.
    ///
    /// `Units=` is matched against the unit of the process that connected (its cgroup then, through its pidfd),
    /// in the system's service manager: a process without root cannot move itself into another system unit.
    public func allows(_ caller: Caller, group: AppGroup) -> Bool {
        if caller.uid == 0 { return true }
        guard let rule = rules[group] else { return false }
        if rule.uids.contains(caller.uid) || rule.gids.contains(caller.gid) { return true }
        if caller.groups.contains(where: { rule.gids.contains($0) }) { return true }
        return rule.matchingUnit(caller.unit) != nil
    }

    /// The rules that let `caller` use `group`, each as the configuration would write it (`Users=1001`,
    /// `Groups=1002`, `Units=shop-*.service`); empty when none does. Root's is `root`.
    public func reasons(_ caller: Caller, group: AppGroup) -> [String] {
        if caller.uid == 0 { return ["root"] }
        guard let rule = rules[group] else { return [] }
        var reasons: [String] = []
        if rule.uids.contains(caller.uid) { reasons.append("Users=\(caller.uid)") }
        for gid in ([caller.gid] + caller.groups) where rule.gids.contains(gid) {
            let reason = "Groups=\(gid)"
            if !reasons.contains(reason) { reasons.append(reason) }
        }
        if let pattern = rule.matchingUnit(caller.unit) { reasons.append("Units=\(pattern)") }
        return reasons
    }

    /// The longest a `Units=` entry may be: a unit name's bound (`UNIT_NAME_MAX`).
    public static let maximumUnitNameLength = 255

    /// Checks a `Units=` entry: a unit name or a glob of one, of a unit that holds processes (`.service` or
    /// `.scope`), made of the characters unit names have (`systemd.unit(5)`) and the glob's `*`, `?` and
    /// `[...]`.
    ///
    /// - Returns: nil when it is one; else what is wrong, for a person to act on.
    public static func unitPatternProblem(_ entry: String) -> String? {
        guard !entry.isEmpty else { return "an empty unit name" }
        guard entry.utf8.count <= maximumUnitNameLength else {
            return "longer than \(maximumUnitNameLength) bytes, which no unit name is"
        }
        guard let suffix = [".service", ".scope"].first(where: { entry.hasSuffix($0) }) else {
            let hint = entry.contains(".") ? "" : " (did you mean \(entry).service?)"
            return "not a unit that runs processes: it needs the suffix .service or .scope\(hint)"
        }
        let name = entry.dropLast(suffix.count)
        guard !name.isEmpty else { return "a suffix with no name" }
        var inSet = false
        for character in name.unicodeScalars {
            switch character {
            case "[": if inSet { return "a '[' inside a [...] set" } else { inSet = true }
            case "]": if inSet { inSet = false } else { return "a ']' with no '['" }
            case "*", "?": continue
            case "!" where inSet: continue
            case "a"..."z", "A"..."Z", "0"..."9", ":", "-", "_", ".", "\\", "@": continue
            default: return "'\(character)' is in no unit name (letters, digits, ':-_.\\@' and the glob's '*?[]')"
            }
        }
        if inSet { return "a '[' with no ']'" }
        if name.hasSuffix("@") {
            return "a template, which no process runs in: name an instance, or a glob (\(name)*\(suffix))"
        }
        return nil
    }

    private mutating func add(_ section: ConfigurationFile.Section, file: String, users: any UserDatabase)
        throws(ConfigurationError)
    {
        let names = section.values("Name")
        guard let name = names.last, !name.isEmpty else {
            throw ConfigurationError(file: file, line: section.line, message: "[AppGroup] needs Name=")
        }
        let group: AppGroup
        do {
            group = try AppGroup(name)
        } catch {
            throw ConfigurationError(file: file, line: section.line, message: "Name=\(name): \(error)")
        }
        var rule = rules[group] ?? Rule()
        for assignment in section.assignments {
            let entries = assignment.value.split(whereSeparator: \.isWhitespace).map(String.init)
            switch assignment.key {
            case "Name":
                continue
            case "Users":
                for entry in entries {
                    if let uid = UInt32(entry) ?? users.uid(ofUser: entry) {
                        rule.uids.insert(uid)
                    } else {
                        warnings.append("\(file):\(assignment.line): no user '\(entry)', ignored")
                    }
                }
            case "Units":
                guard !entries.isEmpty else {
                    throw ConfigurationError(
                        file: file, line: assignment.line, message: "Units= needs unit names or globs, not nothing")
                }
                for entry in entries {
                    if let problem = Self.unitPatternProblem(entry) {
                        throw ConfigurationError(
                            file: file, line: assignment.line, message: "Units=\(entry): \(problem)")
                    }
                    if !rule.units.contains(entry) { rule.units.append(entry) }
                }
            case "RefreshCommand":
                continue  // the refresh agent's (authctl refresh-agent), not the daemon's
            case "RefreshLeaseSec":
                guard let seconds = Double(assignment.value), Self.refreshLeaseRange.contains(seconds) else {
                    throw ConfigurationError(
                        file: file, line: assignment.line,
                        message: "RefreshLeaseSec= needs a number of seconds from 0.1 to 600, not '\(assignment.value)'"
                    )
                }
                rule.refreshLease = seconds
            case "Groups":
                for entry in entries {
                    if let gid = UInt32(entry) ?? users.gid(ofGroup: entry) {
                        rule.gids.insert(gid)
                    } else {
                        warnings.append("\(file):\(assignment.line): no group '\(entry)', ignored")
                    }
                }
            default:
                warnings.append("\(file):\(assignment.line): unknown key '\(assignment.key)', ignored")
            }
        }
        rules[group] = rule
    }

    private static func read(_ path: String) throws(ConfigurationError) -> String? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1024 * 1024 else {
            throw ConfigurationError(file: path, line: 0, message: "cannot be read, or is larger than 1 MiB")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw ConfigurationError(file: path, line: 0, message: "is not UTF-8 text")
        }
        return text
    }
}

extension AccessPolicy.Rule {
    /// The first `Units=` entry that matches `unit`, or nil.
    func matchingUnit(_ unit: String?) -> String? {
        guard let unit, !units.isEmpty else { return nil }
        return units.first { fnmatch($0, unit, 0) == 0 }
    }
}
