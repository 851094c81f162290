// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// A libsystemd call or a system call failed.
///
/// Modeled on NIO's `FileSystemError`: a stable ``code``, the function that failed with its `errno`, and a
/// message a person can act on.
public struct SystemdError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable name for the kind of failure; new codes may be added.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let name: String
        private init(_ name: String) { self.name = name }

        /// A bus could not be opened or connected.
        public static let busConnection = Code("busConnection")
        /// A bus call failed (request a name, export an object, send a message).
        public static let busCall = Code("busCall")
        /// A message could not be sent to the service manager.
        public static let notify = Code("notify")
        /// The fds passed by the service manager could not be taken.
        public static let listenFDs = Code("listenFDs")
        /// The event loop could not add a source, or failed while running.
        public static let eventLoop = Code("eventLoop")
        /// An argument was not acceptable before any call was made.
        public static let invalidArgument = Code("invalidArgument")

        public var description: String { name }
    }

    /// The kind of failure.
    public var code: Code
    /// The C function that failed.
    public var function: String
    /// The positive errno it reported.
    public var errno: Int32
    /// What was being done, for a person.
    public var context: String

    public init(code: Code, function: String, errno: Int32, context: String) {
        self.code = code
        self.function = function
        self.errno = errno
        self.context = context
    }

    /// Wraps a negative libsystemd return value (`-errno`).
    init(code: Code, function: String, returned value: Int32, context: String) {
        self.init(code: code, function: function, errno: -value, context: context)
    }

    public var description: String {
        "\(context): \(function) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
