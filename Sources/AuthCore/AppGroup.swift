// SPDX-License-Identifier: Apache-2.0
/// The name of an app group: the apps that share one customer identity and one stream JWT.
///
/// A name is 1 to 128 bytes of `A-Z a-z 0-9 . _ -`, and does not start with a dot, so it is always a safe,
/// visible file name: no path traversal, no hidden files, whatever the input.
///
/// ```swift
/// let group = try AppGroup("com.example.shop")
/// ```
public struct AppGroup: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The longest name accepted, in bytes.
    public static let maximumLength = 128

    /// The validated name.
    public let name: String

    /// Validates `name`.
    ///
    /// - Throws: ``AppGroupNameError`` saying what is wrong with the name.
    public init(_ name: String) throws(AppGroupNameError) {
        // Over the string's own bytes: this runs for every call that names a group (no array copied).
        var name = name
        let problem = name.withUTF8 { bytes -> AppGroupNameError? in
            guard !bytes.isEmpty else { return .empty }
            guard bytes.count <= Self.maximumLength else { return .tooLong(length: bytes.count) }
            guard bytes[0] != UInt8(ascii: ".") else { return .leadingDot }
            guard let index = bytes.firstIndex(where: { !Self.isAllowed($0) }) else { return nil }
            return .invalidByte(bytes[index], offset: index)
        }
        if let problem { throw problem }
        self.name = name
    }

    public var description: String { name }

    public static func < (lhs: AppGroup, rhs: AppGroup) -> Bool { lhs.name < rhs.name }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }
}

extension AppGroup: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        do {
            try self.init(name)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
}

/// Why a string is not a valid ``AppGroup`` name.
public enum AppGroupNameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The name is empty.
    case empty
    /// The name is longer than ``AppGroup/maximumLength`` bytes.
    case tooLong(length: Int)
    /// The name starts with a dot (this also refuses `.` and `..`).
    case leadingDot
    /// The byte at `offset` is outside `A-Z a-z 0-9 . _ -`.
    case invalidByte(UInt8, offset: Int)

    public var description: String {
        let rule = "an app group name is 1-\(AppGroup.maximumLength) characters of A-Z a-z 0-9 . _ -"
        switch self {
        case .empty:
            return "the app group name is empty; \(rule)"
        case .tooLong(let length):
            return "the app group name is \(length) bytes long; \(rule)"
        case .leadingDot:
            return "the app group name starts with '.'; \(rule), not starting with '.'"
        case .invalidByte(let byte, let offset):
            let shown =
                (0x21...0x7E).contains(byte)
                ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16, uppercase: true))"
            return "the app group name has \(shown) at offset \(offset); \(rule)"
        }
    }
}
