// SPDX-License-Identifier: Apache-2.0
/// systemd's `io.systemd.Metrics` Varlink interface, as `src/shared/varlink-io.systemd.Metrics.c` defines it:
/// `List` streams one reply per figure, `Describe` one per family, and both end with `NoSuchMetric` when they
/// have nothing to send. `systemd-report` (systemd 260) reads it from the sockets in `/run/systemd/report/`.
public enum MetricsInterface {
    /// The interface name.
    public static let name = "io.systemd.Metrics"

    /// The interface description in Varlink's IDL (the file `io.systemd.Metrics.varlink` in the sources).
    public static let description = String(decoding: PackageResources.io_systemd_Metrics_varlink, as: UTF8.self)

    /// The qualified name of `List`.
    public static let list = name + ".List"
    /// The qualified name of `Describe`.
    public static let describe = name + ".Describe"

    /// What kind of figure a family holds.
    public enum FamilyType: String, Codable, Hashable, Sendable, CaseIterable {
        /// Only grows while the daemon runs.
        case counter
        /// Goes up and down.
        case gauge
        /// A text, such as a version.
        case string
    }

    /// One family, as `Describe` replies it.
    public struct Family: Codable, Hashable, Sendable {
        public var name: String
        public var description: String
        public var type: FamilyType

        public init(name: String, description: String, type: FamilyType) {
            self.name = name
            self.description = description
            self.type = type
        }
    }

    /// One figure, as `List` replies it.
    public struct Metric: Hashable, Sendable {
        /// The family's name.
        public var name: String
        /// What the figure is of (an app group), when it is of one.
        public var object: String?
        /// What tells the figure from others of its family and object, such as `reason`.
        public var fields: [String: String]
        public var value: Value

        public init(name: String, object: String? = nil, fields: [String: String] = [:], value: Value) {
            self.name = name
            self.object = object
            self.fields = fields
            self.value = value
        }
    }

    /// A figure's value: a number, or a text for a family of type ``FamilyType/string``.
    public enum Value: Hashable, Sendable, CustomStringConvertible {
        case unsigned(UInt64)
        case signed(Int64)
        case double(Double)
        case string(String)

        /// The value as JSON writes it.
        public var description: String {
            switch self {
            case .unsigned(let value): "\(value)"
            case .signed(let value): "\(value)"
            case .double(let value): value.isFinite ? "\(value)" : "0"
            case .string(let value): value
            }
        }
    }
}
