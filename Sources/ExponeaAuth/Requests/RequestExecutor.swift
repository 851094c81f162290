// SPDX-License-Identifier: Apache-2.0
import AuthCore
import HTTPTypes

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Sends one HTTP request and returns the response and its body: the app's own HTTP client.
public typealias HTTPTransport = @Sendable (HTTPRequest, Data?) async throws -> (HTTPResponse, Data)

/// Runs requests with the SDK's authorization policy (R15-R26), asking the daemon at each step.
struct RequestExecutor: Sendable {
    let daemon: AuthDaemonClient
    let group: String
    let integration: Integration
    /// How long a failed request waits for a new token before its one retry (R19, ends early: R22).
    let retryWait: Duration
    let customerTokenProvider: (@Sendable () async -> String?)?
    /// Logs R26's line for advanced authorization without a provider, once per client.
    let reportMissingProvider: @Sendable () -> Void

    func execute(_ request: StreamRequest, body: Data?, transport: HTTPTransport) async throws -> (HTTPResponse, Data) {
        guard let endpoint = request.endpoint(for: integration) else {
            throw AuthClientError(
                .unsupportedRequest, "\(request) has no endpoint in \(integration.modeName) mode (R23, R25)")
        }
        // A GET carries no body.
        let body = endpoint.method == .get ? nil : body
        switch integration {
        case .stream: return try await executeStream(request, endpoint, body: body, transport: transport)
        case .project(let settings):
            return try await executeProject(request, endpoint, settings, body: body, transport: transport)
        }
    }

    // MARK: Stream mode

    private func executeStream(
        _ request: StreamRequest, _ endpoint: StreamEndpoint, body: Data?, transport: HTTPTransport
    ) async throws -> (HTTPResponse, Data) {
        // R15-R17: the daemon tells the group's apps (and so the handler) when the token needs refreshing.
        let preflight = try await daemon.preflight(group: group)
        var sent = preflight.token.map { (token: $0.value, generation: preflight.generation) }
        if sent == nil && request.requiresCustomerToken {
            // R24: the handler has been asked once; give it a bounded moment to set a token (R22).
            let waited = try await daemon.waitForToken(group: group, after: preflight.generation, timeout: retryWait)
            guard let token = waited.token else { return Self.syntheticUnauthorized() }
            sent = (token.value, waited.generation)
        }
        let (response, data) = try await transport(httpRequest(endpoint, bearer: sent?.token), body)
        guard response.status.code == 401 || response.status.code == 403 else { return (response, data) }

        let decision = try await daemon.reportAuthFailure(
            group: group,
            status: response.status.code,
            generation: sent?.generation,
            tokenExpired: response.status.code == 401 ? Self.tokenExpired(in: data) : nil
        )
        guard decision.retry else { return (response, data) }  // R21
        let retryToken: String?
        if decision.reason == nil {
            // R19: the token was replaced since the request went out: retry at once with the new one.
            retryToken = try await daemon.getToken(group: group).token?.value
        } else {
            // R19, R20, R22: wait up to retryWait for the token the handler sets, then retry once.
            let after = sent?.generation ?? preflight.generation
            retryToken = try await daemon.waitForToken(group: group, after: after, timeout: retryWait).token?.value
        }
        return try await transport(httpRequest(endpoint, bearer: retryToken), body)
    }

    // MARK: Project mode

    private func executeProject(
        _ request: StreamRequest, _ endpoint: StreamEndpoint, _ settings: ProjectSettings, body: Data?,
        transport: HTTPTransport
    ) async throws -> (HTTPResponse, Data) {
        var authorization = settings.authorizationHeader
        if settings.advancedAuthEnabled && request.requiresCustomerToken {
            // R26: asked on every such request; nothing is cached.
            guard let provider = customerTokenProvider else {
                reportMissingProvider()
                return Self.syntheticUnauthorized()
            }
            guard let token = await provider(), !token.isEmpty else { return Self.syntheticUnauthorized() }
            authorization = "Bearer \(token)"
        }
        return try await transport(httpRequest(endpoint, authorization: authorization), body)
    }

    // MARK: Building

    private func httpRequest(_ endpoint: StreamEndpoint, bearer token: String?) -> HTTPRequest {
        httpRequest(endpoint, authorization: token.map { "Bearer \($0)" })
    }

    private func httpRequest(_ endpoint: StreamEndpoint, authorization: String?) -> HTTPRequest {
        let base = integration.baseURL
        let basePath = base.path.hasSuffix("/") ? String(base.path.dropLast()) : base.path
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.accept] = "application/json"
        if let authorization { fields[.authorization] = authorization }
        let authority = base.host.map { host in base.port.map { "\(host):\($0)" } ?? host }
        return HTTPRequest(
            method: endpoint.method,
            scheme: base.scheme ?? "https",
            authority: authority,
            path: basePath + endpoint.pathAndQuery,
            headerFields: fields
        )
    }

    /// The answer for a request that cannot go out without a token (R24, R26): a 401 made here, with no
    /// request sent.
    static func syntheticUnauthorized() -> (HTTPResponse, Data) {
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        let body = #"{"success":false,"error":"No token: the request was not sent"}"#
        return (HTTPResponse(status: .unauthorized, headerFields: fields), Data(body.utf8))
    }

    /// Whether a 401's body is JSON with `"token_expired": true` (R19).
    static func tokenExpired(in body: Data) -> Bool {
        (try? JSONValue(parsing: body))?["token_expired"] == .bool(true)
    }
}
