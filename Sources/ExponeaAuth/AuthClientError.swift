// SPDX-License-Identifier: Apache-2.0
import AuthProtocol

/// Why a call to exponea-authd did not succeed: a stable ``code`` to switch on and a ``message`` a person can
/// act on. Codes may be added in later versions.
public struct AuthClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// Nothing listens on the daemon's socket (it is not running, or another socket was meant).
        public static let daemonUnavailable = Code(rawValue: "daemonUnavailable")
        /// The process listening on the socket runs as a user that is not the daemon's (another user planted a
        /// socket where the daemon's was expected); nothing was sent to it.
        public static let untrustedServer = Code(rawValue: "untrustedServer")
        /// The connection closed while a call waited for its reply (the daemon stopped or restarted).
        public static let connectionLost = Code(rawValue: "connectionLost")
        /// The daemon accepted the connection but did not answer within the client's bound (it is stopped,
        /// hung or overloaded); ``AuthClientError/parameters`` has `socket` and `after` (in seconds). Made by
        /// ``AuthClientError/timedOut(socket:after:)``.
        public static let timedOut = Code(rawValue: "timedOut")
        /// This user may not use the daemon or the app group.
        public static let permissionDenied = Code(rawValue: "permissionDenied")
        /// The token is not a stream JWT; ``AuthClientError/parameters`` has `code` saying what is wrong.
        public static let malformedToken = Code(rawValue: "malformedToken")
        /// The app group's name is not valid.
        public static let invalidGroupName = Code(rawValue: "invalidGroupName")
        /// The daemon could not store the change; the previous token is kept.
        public static let storeFailure = Code(rawValue: "storeFailure")
        /// The app group has as many subscribers as the daemon allows.
        public static let tooManySubscribers = Code(rawValue: "tooManySubscribers")
        /// The daemon refused a parameter (for example a timeout above its bound).
        public static let invalidParameter = Code(rawValue: "invalidParameter")
        /// No usable token came, even after the JWT error handler had its moment to set one.
        public static let tokenUnavailable = Code(rawValue: "tokenUnavailable")
        /// The request has no endpoint in the client's integration mode (R23, R25).
        public static let unsupportedRequest = Code(rawValue: "unsupportedRequest")
        /// The daemon answered something this library does not understand (a version mismatch?).
        public static let protocolError = Code(rawValue: "protocolError")
    }

    /// What kind of failure this is.
    public var code: Code
    /// What happened and, where there is one, what to do about it.
    public var message: String
    /// The Varlink error name, when the daemon answered with an error.
    public var varlinkError: String?
    /// The Varlink error's parameters (never a token).
    public var parameters: [String: String]

    public init(_ code: Code, _ message: String, varlinkError: String? = nil, parameters: [String: String] = [:]) {
        self.code = code
        self.message = message
        self.varlinkError = varlinkError
        self.parameters = parameters
    }

    /// The error for a daemon that did not answer at `socket` within `after`: code
    /// ``Code/timedOut``, a message naming the socket, and `socket` and `after` (seconds) in
    /// ``parameters``.
    public static func timedOut(socket: String, after: Duration) -> AuthClientError {
        let seconds = Double(after.components.seconds) + Double(after.components.attoseconds) / 1e18
        let shown = seconds == seconds.rounded() ? "\(Int(seconds))" : "\((seconds * 1000).rounded() / 1000)"
        return AuthClientError(
            .timedOut,
            "exponea-authd at \(socket) did not answer within \(shown) s: it accepts connections but is stopped, "
                + "hung or overloaded; see 'systemctl status exponea-authd' or its journal",
            parameters: ["socket": socket, "after": shown]
        )
    }

    /// The error for an error reply from the daemon.
    init(reply name: String, parameters: [String: String]) {
        let code: Code
        let message: String
        switch VarlinkError(name: name, parameters: parameters) {
        case .malformedToken(let what, let text)?:
            code = .malformedToken
            message = "The token is not a stream JWT (\(what)): \(text)"
        case .invalidGroupName(let text)?:
            code = .invalidGroupName
            message = text
        case .permissionDenied(let group)?:
            code = .permissionDenied
            message = "This user may not use app group '\(group)'; see exponea-authd.conf(5)"
        case .storeFailure(let text)?:
            code = .storeFailure
            message = "The daemon could not store the change, the previous token is kept: \(text)"
        case .tooManySubscribers(let group)?:
            code = .tooManySubscribers
            message = "App group '\(group)' has as many subscribers as the daemon allows"
        case .subscriptionDropped(let group)?:
            code = .connectionLost
            message = "The daemon ended the subscription to app group '\(group)'; subscribe again"
        case .invalidParameter(let parameter)?:
            code = .invalidParameter
            message = "The daemon refused the parameter '\(parameter)'"
        default:
            code = .protocolError
            message = "The daemon answered \(name) \(parameters.sorted { $0.key < $1.key })"
        }
        self.init(code, message, varlinkError: name, parameters: parameters)
    }

    public var description: String { message }
}
