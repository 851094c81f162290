// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A man page of the repository's `man/`, read for checks against a program's `--help`.
public struct ManualPage {
    /// The page's mdoc source.
    public let source: String

    /// Reads `man/<name>` of this repository.
    public init(_ name: String, file: StaticString = #filePath) throws {
        let url = URL(fileURLWithPath: "\(file)").deletingLastPathComponent()
            .appendingPathComponent("../../man/\(name)").standardized
        source = try String(contentsOf: url, encoding: .utf8)
    }

    /// The long options the page documents: `Fl -json`, and the long form after a short one
    /// (`Fl h , -help`).
    public var longOptions: Set<String> {
        Set(Self.longOptions(in: source, prefix: "Fl -") + Self.longOptions(in: source, prefix: " , -"))
    }

    /// The long options a `--help` text names.
    public static func longOptions(inHelp help: String) -> Set<String> { Set(longOptions(in: help, prefix: "--")) }

    /// The names after `prefix`, such as `json` for `--json`.
    static func longOptions(in text: String, prefix: String) -> [String] {
        var names: [String] = []
        var rest = text[...]
        while let range = rest.range(of: prefix) {
            let name = rest[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if let first = name.first, first.isLetter { names.append(String(name)) }
            rest = rest[range.upperBound...]
        }
        return names
    }
}
