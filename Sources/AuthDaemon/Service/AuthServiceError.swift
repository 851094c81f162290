// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthStore

/// Why the service refused a request. Each case maps onto one of the interface's named errors.
public enum AuthServiceError: Error, Sendable, CustomStringConvertible {
    /// The token is not a stream JWT (R2); nothing was stored.
    case malformedToken(StreamJWTError)
    /// The store could not be written; the previous token is kept.
    case storeFailure(TokenStoreError)

    public var description: String {
        switch self {
        case .malformedToken(let error): "the token is not a stream JWT: \(error)"
        case .storeFailure(let error): "the token store could not be written: \(error)"
        }
    }
}
