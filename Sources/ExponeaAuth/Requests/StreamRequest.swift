// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The requests the SDK sends that need authorization (R23, R25), each building its path for the
/// integration.
public enum StreamRequest: Hashable, Sendable, CaseIterable {
    /// Track customer properties.
    case trackCustomer
    /// Track events.
    case trackEvents
    /// Fetch in-app messages.
    case inAppMessages
    /// Fetch the App Inbox.
    case appInboxFetch
    /// Mark App Inbox messages as read.
    case appInboxMarkAsRead
    /// Fetch recommendations.
    case recommendations
    /// The push notification self-check.
    case selfCheck

    /// Whether the request cannot go out without a token (R24: App Inbox in stream mode; R26: in project
    /// mode with advanced authorization).
    public var requiresCustomerToken: Bool { self == .appInboxFetch || self == .appInboxMarkAsRead }

    /// The path and query of the request for `integration`, with identifiers percent-encoded.
    public func pathAndQuery(for integration: Integration) -> String {
        switch integration {
        case .stream(let settings):
            let id = Self.escape(settings.streamId)
            switch self {
            case .trackCustomer: return "/track/u/v1/customers?stream_id=\(id)"
            case .trackEvents: return "/track/u/v1/customers/events?stream_id=\(id)"
            case .inAppMessages: return "/webxp/streams/\(id)/inappmessages"
            case .appInboxFetch: return "/webxp/streams/\(id)/appinbox/fetch"
            case .appInboxMarkAsRead: return "/webxp/streams/\(id)/appinbox/markasread"
            case .recommendations: return "/optimization/streams/\(id)/recommend/user"
            case .selfCheck: return "/campaigns/send-self-check-notification?project_id=\(id)"
            }
        case .project(let settings):
            let token = Self.escape(settings.projectToken)
            switch self {
            case .trackCustomer: return "/track/v2/projects/\(token)/customers"
            case .trackEvents: return "/track/v2/projects/\(token)/customers/events"
            case .inAppMessages: return "/webxp/s/\(token)/inappmessages?v=1"
            case .appInboxFetch: return "/webxp/projects/\(token)/appinbox/fetch"
            case .appInboxMarkAsRead: return "/webxp/projects/\(token)/appinbox/markasread"
            case .recommendations: return "/optimization/projects/\(token)/recommend/user"
            case .selfCheck: return "/campaigns/send-self-check-notification?project_id=\(token)"
            }
        }
    }

    private static func escape(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}
