// SPDX-License-Identifier: Apache-2.0

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// How an app reaches Bloomreach: through a Data hub event stream with stream JWTs, or through an
/// Engagement project with its API token.
public enum Integration: Hashable, Sendable {
    /// Stream mode: requests carry the group's stream JWT as `Authorization: Bearer …` (R23).
    case stream(StreamSettings)
    /// Project mode: requests carry `Authorization: Token …`, and stream JWTs are ignored (R5, R25).
    case project(ProjectSettings)

    /// `stream` or `project`, for messages.
    var modeName: String {
        switch self {
        case .stream: "stream"
        case .project: "project"
        }
    }

    /// The API's base URL.
    public var baseURL: URL {
        switch self {
        case .stream(let settings): settings.baseURL
        case .project(let settings): settings.baseURL
        }
    }
}

/// The default base URL of the Bloomreach API.
public let defaultBaseURL = URL(string: "https://api.exponea.com")!

/// A Data hub event stream.
public struct StreamSettings: Hashable, Sendable {
    public var streamId: String
    public var baseURL: URL

    public init(streamId: String, baseURL: URL = defaultBaseURL) {
        self.streamId = streamId
        self.baseURL = baseURL
    }
}

/// An Engagement project.
public struct ProjectSettings: Hashable, Sendable {
    public var projectToken: String
    /// The project API key sent as `Authorization: Token …` (R25); nil sends none. A key given with its
    /// `Token ` prefix is sent once prefixed, not twice.
    public var authorization: String?
    /// Whether App Inbox requests carry a customer token from the registered provider (R26).
    public var advancedAuthEnabled: Bool
    public var baseURL: URL

    public init(
        projectToken: String, authorization: String?, advancedAuthEnabled: Bool = false,
        baseURL: URL = defaultBaseURL
    ) {
        self.projectToken = projectToken
        self.authorization = authorization
        self.advancedAuthEnabled = advancedAuthEnabled
        self.baseURL = baseURL
    }

    /// The `Authorization` value of project mode (R25): `Token <api key>`, whether or not the key was given
    /// with its prefix; nil without a key.
    public var authorizationHeader: String? {
        var key = Substring(authorization ?? "").trimmingSpaces
        if key.count > 6, key.prefix(6).lowercased() == "token " { key = key.dropFirst(6).trimmingSpaces }
        return key.isEmpty ? nil : "Token \(key)"
    }
}

extension Substring {
    /// Without leading and trailing spaces.
    fileprivate var trimmingSpaces: Substring {
        let start = firstIndex { $0 != " " } ?? endIndex
        let end = lastIndex { $0 != " " }.map(index(after:)) ?? start
        return self[start..<end]
    }
}
