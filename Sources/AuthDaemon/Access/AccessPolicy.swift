// SPDX-License-Identifier: Apache-2.0
import AuthCore

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
/// RefreshLeaseSec=20
/// ```
///
/// Root may use every group; anyone else only the groups whose `Users=` name them, or whose `Groups=` name a
/// group the calling process holds (its primary or a supplementary group, as the kernel reports them for the
/// connection). Sections for the same group add up, in file order. Names are resolved to ids when the
/// configuration is read.
public struct AccessPolicy: Sendable {
    /// The users and groups allowed per app group.
    public private(set) var rules: [AppGroup: Rule] = [:]
    /// What could not be resolved (unknown users or groups), to log; the rest is in force.
    public private(set) var warnings: [String] = []

    /// Who may use one app group, and the group's own settings.
    public struct Rule: Hashable, Sendable {
        public var uids: Set<UInt32> = []
        public var gids: Set<UInt32> = []
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
    public func allows(_ caller: Caller, group: AppGroup) -> Bool {
        if caller.uid == 0 { return true }
        guard let rule = rules[group] else { return false }
        if rule.uids.contains(caller.uid) || rule.gids.contains(caller.gid) { return true }
        return caller.groups.contains { rule.gids.contains($0) }
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
