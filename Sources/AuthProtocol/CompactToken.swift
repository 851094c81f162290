// SPDX-License-Identifier: Apache-2.0
/// A compact JWT on the wire: encodes as a plain JSON string, but never shows itself in `description`,
/// `dump` or string interpolation, so a message that carries one is safe to log.
public struct CompactToken: Codable, Hashable, Sendable, CustomStringConvertible, CustomReflectable {
    /// The token, exactly as sent after `Bearer `.
    public var value: String

    public init(_ value: String) { self.value = value }

    public init(from decoder: any Decoder) throws {
        value = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }

    public var description: String { "<token, \(value.utf8.count) bytes>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
