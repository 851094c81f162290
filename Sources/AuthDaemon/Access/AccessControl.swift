// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// Decides whether a caller may use an app group.
///
/// In user mode only the daemon's own user may (its socket is private too); in system mode, root and whom the
/// ``AccessPolicy`` names. The policy can be replaced while the daemon runs (SIGHUP).
///
/// A value: the daemon's current one is the state of its ``AuthCallDispatcher``, which a reload replaces; the bus
/// and the metrics ask the dispatcher for it when they decide.
public struct AccessControl: Sendable {
    private enum Mode {
        case owner(UInt32)
        case policy
    }

    private let mode: Mode
    private var policy: AccessPolicy

    /// User mode: only `uid` may use any group.
    public init(owner uid: UInt32) {
        mode = .owner(uid)
        self.policy = AccessPolicy()
    }

    /// System mode: root, and the users and groups `policy` names, matched against the caller's own
    /// credentials (see ``AccessPolicy/allows(_:group:)``).
    public init(policy: AccessPolicy) {
        mode = .policy
        self.policy = policy
    }

    /// Replaces the policy (a reload).
    public mutating func replace(with policy: AccessPolicy) {
        self.policy = policy
    }

    /// The refresh lease `authd.conf` sets for `group` (`RefreshLeaseSec=`, system mode), or nil for the
    /// daemon's.
    public func refreshLease(for group: AppGroup) -> Double? {
        guard case .policy = mode else { return nil }
        return policy.rules[group]?.refreshLease
    }

    /// Whether `caller` may use every group, present and future: the owner in user mode, root in system mode.
    public func allowsEveryGroup(_ caller: Caller) -> Bool {
        switch mode {
        case .owner(let uid): caller.uid == uid
        case .policy: caller.uid == 0
        }
    }

    /// Whether `caller` may use `group`.
    public func allows(_ caller: Caller, _ group: AppGroup) -> Bool {
        switch mode {
        case .owner(let uid):
            return caller.uid == uid
        case .policy:
            return policy.allows(caller, group: group)
        }
    }

    /// The unit that names `caller` to the operator and to `whoami`: in user mode its unit in the user's
    /// service manager (when it runs in one), in system mode its system unit.
    public func unit(of caller: Caller) -> String? {
        switch mode {
        case .owner: caller.userUnit ?? caller.unit
        case .policy: caller.unit
        }
    }

    /// How `caller` may use app groups, for `WhoAmI`: the rule that lets it use every group (`root`, or the
    /// daemon's own user in user mode), and each configured group it may use with the rules that allow it, by
    /// name.
    public func grants(for caller: Caller) -> (everyGroup: String?, groups: [(group: AppGroup, rules: [String])]) {
        switch mode {
        case .owner(let uid):
            return (caller.uid == uid ? "owner" : nil, [])
        case .policy:
            let groups = policy.rules.keys.sorted { $0.name < $1.name }.compactMap { group in
                let rules = policy.reasons(caller, group: group)
                return rules.isEmpty ? nil : (group, rules)
            }
            return (caller.uid == 0 ? "root" : nil, groups)
        }
    }
}
