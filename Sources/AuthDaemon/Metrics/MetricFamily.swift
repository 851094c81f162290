// SPDX-License-Identifier: Apache-2.0
import AuthProtocol

/// Every family of figures the daemon lists over `io.systemd.Metrics`, named `com.exponea.Auth.<name>`.
///
/// A per-group family has the group as its `object`; a caller sees those of the groups it may use only.
enum MetricFamily: String, CaseIterable, Sendable {
    // The groups.
    case groups
    case tokenSecondsLeft = "token_seconds_left"
    case generation
    case tokenSetTime = "token_set_time_seconds"
    case refreshesAsked = "refreshes_asked_total"
    case refreshesAnswered = "refreshes_answered_total"
    case refreshDurationCount = "refresh_duration_seconds_count"
    case refreshDurationSum = "refresh_duration_seconds_sum"
    case expiriesUnrefreshed = "expiries_unrefreshed_total"
    case claims = "refresh_claims_total"
    // The calls.
    case calls = "calls_total"
    case denials = "access_denials_total"
    case connections
    case connectionsRefused = "connections_refused_total"
    case subscribers
    // The store.
    case storeWrites = "store_writes_total"
    case storeWriteFailures = "store_write_failures_total"
    case storeWriteDurationCount = "store_write_duration_seconds_count"
    case storeWriteDurationSum = "store_write_duration_seconds_sum"
    case recordsSetAside = "store_records_set_aside_total"
    // The daemon.
    case startupDuration = "startup_duration_seconds"
    case uptime = "uptime_seconds"
    case version

    /// The prefix of every family's name.
    static let prefix = "com.exponea.Auth."

    /// The family's full name.
    var name: String { Self.prefix + rawValue }

    var type: MetricsInterface.FamilyType {
        switch self {
        case .groups, .tokenSecondsLeft, .generation, .tokenSetTime, .connections, .subscribers, .startupDuration,
            .uptime:
            .gauge
        case .version: .string
        default: .counter
        }
    }

    var summary: String {
        switch self {
        case .groups: "App groups by the state of their token (field state: valid, expiredSoon, expired, notProvided)"
        case .tokenSecondsLeft: "Seconds until the group's token expires; negative once it has"
        case .generation: "The group's generation: grows on every change of its token or identity"
        case .tokenSetTime: "When the group's token or identity last changed, in Unix seconds"
        case .refreshesAsked: "jwtError events sent to the group's apps, asking for a new token (field reason)"
        case .refreshesAnswered: "Tokens set while a refresh was asked for"
        case .refreshDurationCount: "Refreshes timed from the first jwtError to the new token"
        case .refreshDurationSum: "Seconds from the first jwtError to the new token, summed over the refreshes timed"
        case .expiriesUnrefreshed: "Tokens that reached their expiry with no new token set"
        case .claims:
            "Refresh claims by outcome (field outcome: granted, released, lapsed when the lease ran out, "
                + "holderGone when its holder's connection closed)"
        case .calls: "Calls answered, by method and result (field result: ok, or the error's name)"
        case .denials: "Calls refused because the caller may not use the group, by method"
        case .connections: "Client connections the daemon holds: open, or closed while a call of theirs returns"
        case .connectionsRefused:
            "Connections closed at once or not accepted, by reason (serverFull, userFull, noResources)"
        case .subscribers: "Subscriptions to groups' events open now"
        case .storeWrites: "Writes of the token store (a record saved or removed)"
        case .storeWriteFailures: "Writes of the token store that failed; the previous state was kept"
        case .storeWriteDurationCount: "Writes of the token store timed"
        case .storeWriteDurationSum: "Seconds spent writing the token store (with its fsyncs), summed"
        case .recordsSetAside: "Unreadable token records set aside (renamed .corrupt) since the start"
        case .startupDuration: "Seconds from the daemon's start to ready (store opened, socket served)"
        case .uptime: "Seconds since the daemon started"
        case .version: "The daemon's version"
        }
    }

    /// The family as `Describe` replies it.
    var described: MetricsInterface.Family {
        MetricsInterface.Family(name: name, description: summary, type: type)
    }
}
