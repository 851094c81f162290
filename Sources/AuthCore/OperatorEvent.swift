// SPDX-License-Identifier: Apache-2.0
/// The events an operator acts on, each logged with a fixed `MESSAGE_ID=` that the journal catalog
/// (`systemd/exponea-authd.catalog`) explains: `journalctl -x` shows what happened and what to do, and
/// `journalctl MESSAGE_ID=…` finds every such event of a fleet's device.
///
/// The entries carry `GROUP=`, `GENERATION=`, `REASON=`, `CALLER_UID=` and `CALLER_PID=` where they apply
/// (``metadata(group:generation:reason:callerUID:callerPID:_:)``), never a token or a customer id.
public enum OperatorEvent: String, CaseIterable, Sendable {
    /// The daemon serves its socket, with its counts.
    case ready
    /// A token was stored for a group, by the caller named.
    case tokenSet
    /// A group's token reached its expiry and no new token was set.
    case expiredUnrefreshed
    /// The group's apps were asked for a new token (a jwtError).
    case refreshAsked
    /// A refresh claim's lease ran out before its holder set a token: the refresh was abandoned.
    case refreshAbandoned
    /// A group was cleared (clear, anonymize, stop), by the caller named.
    case cleared
    /// A caller was refused a group (rate-limited, with the count of lines suppressed).
    case accessDenied
    /// An unreadable token record was set aside.
    case recordSetAside
    /// The store key is not as it should be (a key file not bound to the device).
    case storeKeyProblem
    /// A connection limit was reached: connections are refused, or not accepted.
    case connectionLimit

    /// The event's `MESSAGE_ID=`: 128 bits in hex, fixed forever.
    public var messageID: String {
        switch self {
        case .ready: "3cc5b55ccf2e47db9e316c481177307f"
        case .tokenSet: "eca47f2bef4e40a4ab43ff7e511139e3"
        case .expiredUnrefreshed: "26fdc1dc79f94116aeb858b034f4634a"
        case .refreshAsked: "c8a1edfc080d436ab8af34f69be7ca07"
        case .refreshAbandoned: "25dbe90dc48f4d7483dc762442f10efa"
        case .cleared: "f95c878fb63a40a88b528a6baacdb009"
        case .accessDenied: "7f78c06ec5f241f8a1d23d2c2fc1733a"
        case .recordSetAside: "49873e470af84bd393c5e5f747f2b909"
        case .storeKeyProblem: "64c42263fe1843f9849ccf4ca10c3cd4"
        case .connectionLimit: "656d1d134138458b9c3235f6b764ce2c"
        }
    }

    /// The log metadata of one such event: keys that the journal handler turns into `MESSAGE_ID=`, `GROUP=`,
    /// `GENERATION=`, `REASON=`, `CALLER_UID=` and `CALLER_PID=`, each value made by `value` (swift-log's
    /// `.string`, which this module does not link).
    @inlinable  // so that it is specialized where it is called: a generic dictionary costs every insertion
    public func metadata<Value>(
        group: String? = nil, generation: UInt64? = nil, reason: String? = nil, callerUID: UInt32? = nil,
        callerPID: Int32? = nil, _ value: (String) -> Value
    ) -> [String: Value] {
        var metadata = [String: Value](minimumCapacity: 7)
        metadata["message_id"] = value(messageID)
        if let group { metadata["group"] = value(group) }
        if let generation { metadata["generation"] = value(String(generation)) }
        if let reason { metadata["reason"] = value(reason) }
        if let callerUID { metadata["caller_uid"] = value(String(callerUID)) }
        if let callerPID { metadata["caller_pid"] = value(String(callerPID)) }
        return metadata
    }
}
