// SPDX-License-Identifier: Apache-2.0
/// What to do after a stream request failed with an HTTP error (R19-R21).
public struct RetryDecision: Hashable, Sendable, CustomStringConvertible {
    /// Whether the request is retried once (after waiting ~1 s for a new token, or at once when the token was
    /// already replaced).
    public var retry: Bool
    /// The reason the JWT error handler is called with, or nil when it is not called.
    public var reason: JwtErrorReason?

    public init(retry: Bool, reason: JwtErrorReason?) {
        self.retry = retry
        self.reason = reason
    }

    /// Decides for one failed request.
    ///
    /// - Parameters:
    ///   - status: The HTTP status of the response.
    ///   - sentToken: The state, now, of the token the request carried; ``TokenState/notProvided`` when it
    ///     carried none.
    ///   - serverSaysExpired: Whether a 401's JSON body had `"token_expired": true`.
    ///   - tokenReplaced: Whether a newer token has been set since the request was sent.
    ///
    /// | status | token sent | decision |
    /// | --- | --- | --- |
    /// | 403 | valid or expiring soon | fail, no handler, even when replaced since (R21) |
    /// | 401/403 | replaced since | retry at once, no handler (R19) |
    /// | 401 | none | retry, `notProvided` |
    /// | 401 | expired, or body says so | retry, `expired` (R19) |
    /// | 401 | otherwise | retry, `invalid` (R19) |
    /// | 403 | none | retry, `notProvided` (R20) |
    /// | 403 | expired | retry, `expired` |
    /// | other | any | fail, no handler |
    public init(status: Int, sentToken: TokenState, serverSaysExpired: Bool = false, tokenReplaced: Bool = false) {
        guard status == 401 || status == 403 else {
            self.init(retry: false, reason: nil)
            return
        }
        // R21: the token's scope does not cover the stream; another token changes nothing about this request.
        if status == 403 && (sentToken == .valid || sentToken == .expiredSoon) {
            self.init(retry: false, reason: nil)
            return
        }
        if tokenReplaced {
            self.init(retry: true, reason: nil)
            return
        }
        switch (status, sentToken) {
        case (_, .notProvided):
            self.init(retry: true, reason: .notProvided)
        case (401, _) where serverSaysExpired || sentToken == .expired:
            self.init(retry: true, reason: .expired)
        case (401, _):
            self.init(retry: true, reason: .invalid)
        case (_, .expired):
            self.init(retry: true, reason: .expired)
        default:
            self.init(retry: false, reason: nil)
        }
    }

    public var description: String {
        "\(retry ? "retry" : "fail")\(reason.map { " (\($0))" } ?? "")"
    }
}
