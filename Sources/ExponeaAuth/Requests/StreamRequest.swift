// SPDX-License-Identifier: Apache-2.0
import HTTPTypes

/// The requests the SDK sends that need authorization (R23 in stream mode, R25 in project mode).
///
/// ``endpoint(for:)`` is the one table of their methods, paths and queries; a request that one mode does not
/// have (recommendations in project mode, customer attributes in stream mode) has no endpoint there.
public enum StreamRequest: Hashable, Sendable {
    /// Track customer properties.
    case trackCustomer
    /// Track events.
    case trackEvents
    /// Track a campaign click.
    case campaignClick
    /// Fetch the consent categories.
    case consentCategories
    /// Fetch customer attributes (project mode only).
    case customerAttributes
    /// Fetch in-app messages.
    case inAppMessages
    /// Fetch in-app content blocks (stream mode only).
    case inAppContentBlocks
    /// Fetch the segments of the customer behind `cookie` (stream mode only).
    case segments(cookie: String)
    /// Link the ids of the customer behind `cookie` (stream mode only).
    case linkIds(cookie: String)
    /// Fetch the static bundle of `platform`, for example `ios` or `android` (stream mode only).
    case staticBundle(platform: String)
    /// Fetch the App Inbox.
    case appInboxFetch
    /// Mark App Inbox messages as read.
    case appInboxMarkAsRead
    /// Fetch recommendations (stream mode only).
    case recommendations
    /// The push notification self-check.
    case selfCheck

    /// Whether the request cannot go out without a token (R24: App Inbox in stream mode; R26: in project
    /// mode with advanced authorization).
    public var requiresCustomerToken: Bool { self == .appInboxFetch || self == .appInboxMarkAsRead }

    /// The method, path and query of the request for `integration`, with identifiers percent-encoded; nil
    /// when the integration has no such request.
    public func endpoint(for integration: Integration) -> StreamEndpoint? {
        switch integration {
        case .stream(let settings): streamEndpoint(Self.escape(settings.streamId))
        case .project(let settings): projectEndpoint(Self.escape(settings.projectToken))
        }
    }

    /// R23: the documented endpoints, then those the SDKs' code routes with the JWT (self-check in the code's
    /// form, in-app messages with `compatibility=3`).
    private func streamEndpoint(_ id: String) -> StreamEndpoint? {
        switch self {
        case .trackCustomer: .post("/track/u/v1/customers", query: "stream_id=\(id)")
        case .trackEvents: .post("/track/u/v1/customers/events", query: "stream_id=\(id)")
        case .campaignClick: .post("/track/u/v1/campaigns/clicks", query: "stream_id=\(id)")
        case .consentCategories: .get("/data/v2/streams/\(id)/consent/categories")
        case .customerAttributes: nil
        case .inAppMessages: .post("/webxp/streams/\(id)/inappmessages", query: "compatibility=3")
        case .inAppContentBlocks: .post("/webxp/streams/\(id)/inappcontentblocks", query: "v=2")
        case .segments(let cookie): .get("/webxp/streams/\(id)/segments", query: "cookie=\(Self.escape(cookie))")
        case .linkIds(let cookie): .post("/webxp/streams/\(id)/cookies/\(Self.escape(cookie))/link-ids")
        case .staticBundle(let platform):
            .get("/wxstatic/streams/\(id)/bundle-\(Self.escape(platform)).json", query: "v=2")
        case .appInboxFetch: .post("/webxp/streams/\(id)/appinbox/fetch")
        case .appInboxMarkAsRead: .post("/webxp/streams/\(id)/appinbox/markasread")
        case .recommendations: .post("/optimization/streams/\(id)/recommend/user")
        case .selfCheck: .post("/campaigns/streams/\(id)/send-self-check-notification")
        }
    }

    /// R25: the project endpoints of the documents.
    private func projectEndpoint(_ token: String) -> StreamEndpoint? {
        switch self {
        case .trackCustomer: .post("/track/v2/projects/\(token)/customers")
        case .trackEvents: .post("/track/v2/projects/\(token)/customers/events")
        case .campaignClick: .post("/track/v2/projects/\(token)/campaigns/clicks")
        case .consentCategories: .post("/data/v2/projects/\(token)/consent/categories")
        case .customerAttributes: .post("/data/v2/projects/\(token)/customers/attributes")
        case .inAppMessages: .post("/webxp/s/\(token)/inappmessages", query: "v=1")
        case .appInboxFetch: .post("/webxp/projects/\(token)/appinbox/fetch")
        case .appInboxMarkAsRead: .post("/webxp/projects/\(token)/appinbox/markasread")
        case .selfCheck: .post("/campaigns/send-self-check-notification", query: "project_id=\(token)")
        case .inAppContentBlocks, .segments, .linkIds, .staticBundle, .recommendations: nil
        }
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func escape(_ value: String) -> String {
        var escaped = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                escaped.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                escaped += "%"
                escaped.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                escaped.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0x0F)]))
            }
        }
        return escaped
    }
}

/// Where a ``StreamRequest`` goes: its HTTP method, path and query.
public struct StreamEndpoint: Hashable, Sendable {
    /// `GET` or `POST`.
    public var method: HTTPRequest.Method
    /// The path below the base URL's.
    public var path: String
    /// The query, without its `?`; nil when there is none.
    public var query: String?

    /// The path and, when there is one, `?` and the query.
    public var pathAndQuery: String { query.map { "\(path)?\($0)" } ?? path }

    static func get(_ path: String, query: String? = nil) -> StreamEndpoint {
        StreamEndpoint(method: .get, path: path, query: query)
    }

    static func post(_ path: String, query: String? = nil) -> StreamEndpoint {
        StreamEndpoint(method: .post, path: path, query: query)
    }

}
