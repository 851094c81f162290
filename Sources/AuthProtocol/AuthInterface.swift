// SPDX-License-Identifier: Apache-2.0
/// The `com.exponea.Auth` Varlink interface: its name, methods and description.
public enum AuthInterface {
    /// The interface name.
    public static let name = "com.exponea.Auth"

    /// The interface description in Varlink's IDL, as `org.varlink.service.GetInterfaceDescription` serves it
    /// (the file `com.exponea.Auth.varlink` in the sources, embedded at build time).
    public static let description = String(decoding: PackageResources.com_exponea_Auth_varlink, as: UTF8.self)

    /// The interface's methods.
    public enum Method: String, CaseIterable, Sendable {
        case setToken = "SetToken"
        case getToken = "GetToken"
        case preflight = "Preflight"
        case reportAuthFailure = "ReportAuthFailure"
        case waitForToken = "WaitForToken"
        case identifyCustomer = "IdentifyCustomer"
        case anonymize = "Anonymize"
        case stopIntegration = "StopIntegration"
        case clearLocalCustomerData = "ClearLocalCustomerData"
        case subscribe = "Subscribe"
        case acknowledgeFlush = "AcknowledgeFlush"
        case claimRefresh = "ClaimRefresh"
        case releaseRefresh = "ReleaseRefresh"
        case listGroups = "ListGroups"
        case countGroups = "CountGroups"
        case whoAmI = "WhoAmI"

        /// The fully qualified name, such as `com.exponea.Auth.GetToken`.
        public var qualifiedName: String { "\(AuthInterface.name).\(rawValue)" }

        /// The method a call names, or nil when it is not one of this interface's.
        public init?(qualifiedName: String) {
            guard qualifiedName.hasPrefix(AuthInterface.name + ".") else { return nil }
            self.init(rawValue: String(qualifiedName.dropFirst(AuthInterface.name.count + 1)))
        }
    }
}
