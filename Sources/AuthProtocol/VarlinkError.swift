// SPDX-License-Identifier: Apache-2.0
/// An error reply, with its Varlink name and parameters.
///
/// The `org.varlink.service` errors are Varlink's own; the `com.exponea.Auth` ones are declared in the
/// interface description (``AuthInterface/description``).
public enum VarlinkError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The interface is not served here.
    case interfaceNotFound(String)
    /// The interface has no such method.
    case methodNotFound(String)
    /// The method is declared but this daemon does not implement it.
    case methodNotImplemented(String)
    /// A parameter is missing, of the wrong type, or has a value the method does not accept.
    case invalidParameter(String)
    /// The method streams its replies and must be called with `more`.
    case expectedMore
    /// The token is not a stream JWT: `code` names the problem (see `StreamJWTError.code`).
    case malformedToken(code: String, message: String)
    /// The group name is not valid.
    case invalidGroupName(message: String)
    /// The caller may not use the group.
    case permissionDenied(group: String)
    /// The store could not be written; the previous state is kept.
    case storeFailure(message: String)
    /// The group has as many subscribers as allowed.
    case tooManySubscribers(group: String)
    /// The subscription ended: it fell too far behind, or the daemon stops. Subscribe again.
    case subscriptionDropped(group: String)
    /// `io.systemd.Metrics`: no figure or family to list.
    case noSuchMetric

    /// The fully qualified error name.
    public var name: String {
        switch self {
        case .interfaceNotFound: "org.varlink.service.InterfaceNotFound"
        case .methodNotFound: "org.varlink.service.MethodNotFound"
        case .methodNotImplemented: "org.varlink.service.MethodNotImplemented"
        case .invalidParameter: "org.varlink.service.InvalidParameter"
        case .expectedMore: "org.varlink.service.ExpectedMore"
        case .malformedToken: "com.exponea.Auth.MalformedToken"
        case .invalidGroupName: "com.exponea.Auth.InvalidGroupName"
        case .permissionDenied: "com.exponea.Auth.PermissionDenied"
        case .storeFailure: "com.exponea.Auth.StoreFailure"
        case .tooManySubscribers: "com.exponea.Auth.TooManySubscribers"
        case .subscriptionDropped: "com.exponea.Auth.SubscriptionDropped"
        case .noSuchMetric: "io.systemd.Metrics.NoSuchMetric"
        }
    }

    /// The error's parameters, as the interface declares them.
    public var parameters: [String: String] {
        switch self {
        case .interfaceNotFound(let interface): ["interface": interface]
        case .methodNotFound(let method), .methodNotImplemented(let method): ["method": method]
        case .invalidParameter(let parameter): ["parameter": parameter]
        case .expectedMore, .noSuchMetric: [:]
        case .malformedToken(let code, let message): ["code": code, "message": message]
        case .invalidGroupName(let message), .storeFailure(let message): ["message": message]
        case .permissionDenied(let group), .tooManySubscribers(let group), .subscriptionDropped(let group):
            ["group": group]
        }
    }

    public var description: String {
        let details = parameters.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        return details.isEmpty ? name : "\(name) (\(details.joined(separator: ", ")))"
    }
}

extension VarlinkError {
    /// The error an error reply names, or nil for a name this interface does not declare (a client keeps the
    /// name and parameters as they came).
    public init?(name: String, parameters: [String: String]) {
        let value = { (key: String) in parameters[key] ?? "" }
        switch name {
        case "org.varlink.service.InterfaceNotFound": self = .interfaceNotFound(value("interface"))
        case "org.varlink.service.MethodNotFound": self = .methodNotFound(value("method"))
        case "org.varlink.service.MethodNotImplemented": self = .methodNotImplemented(value("method"))
        case "org.varlink.service.InvalidParameter": self = .invalidParameter(value("parameter"))
        case "org.varlink.service.ExpectedMore": self = .expectedMore
        case "com.exponea.Auth.MalformedToken": self = .malformedToken(code: value("code"), message: value("message"))
        case "com.exponea.Auth.InvalidGroupName": self = .invalidGroupName(message: value("message"))
        case "com.exponea.Auth.PermissionDenied": self = .permissionDenied(group: value("group"))
        case "com.exponea.Auth.StoreFailure": self = .storeFailure(message: value("message"))
        case "com.exponea.Auth.TooManySubscribers": self = .tooManySubscribers(group: value("group"))
        case "com.exponea.Auth.SubscriptionDropped": self = .subscriptionDropped(group: value("group"))
        case "io.systemd.Metrics.NoSuchMetric": self = .noSuchMetric
        default: return nil
        }
    }
}
