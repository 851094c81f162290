// SPDX-License-Identifier: Apache-2.0
/// `org.varlink.service`, the interface every Varlink service offers: what it is, and its interfaces'
/// descriptions.
public enum VarlinkService {
    /// The interface name.
    public static let name = "org.varlink.service"

    /// GetInfo's result.
    public struct Info: Codable, Hashable, Sendable {
        public var vendor: String
        public var product: String
        public var version: String
        public var url: String
        public var interfaces: [String]

        public init(vendor: String, product: String, version: String, url: String, interfaces: [String]) {
            self.vendor = vendor
            self.product = product
            self.version = version
            self.url = url
            self.interfaces = interfaces
        }
    }

    /// GetInterfaceDescription's parameters.
    public struct DescriptionParameters: Codable, Hashable, Sendable {
        public var interface: String
        public init(interface: String) { self.interface = interface }
    }

    /// GetInterfaceDescription's result.
    public struct DescriptionResult: Codable, Hashable, Sendable {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// The interface's own description, as the Varlink specification gives it.
    public static let description = """
        # The Varlink Service Interface is provided by every varlink service. It
        # describes the service and the interfaces it implements.
        interface org.varlink.service

        # Get a list of all the interfaces a service provides and information
        # about the implementation.
        method GetInfo() -> (
          vendor: string,
          product: string,
          version: string,
          url: string,
          interfaces: []string
        )

        # Get the description of an interface that is implemented by this service.
        method GetInterfaceDescription(interface: string) -> (description: string)

        # The requested interface was not found.
        error InterfaceNotFound (interface: string)

        # The requested method was not found
        error MethodNotFound (method: string)

        # The interface defines the requested method, but the service does not
        # implement it.
        error MethodNotImplemented (method: string)

        # One of the passed parameters is invalid.
        error InvalidParameter (parameter: string)

        # Client is denied access
        error PermissionDenied ()

        # Method is expected to be called with 'more' set to true, but wasn't
        error ExpectedMore ()

        """
}
