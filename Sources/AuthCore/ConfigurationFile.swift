// SPDX-License-Identifier: Apache-2.0
/// A systemd-style INI file (`systemd.syntax(7)`): `[Section]` headers, `Key=Value` assignments, `#` and `;`
/// comments, and sections that may repeat.
package struct ConfigurationFile: Sendable {
    package struct Section: Sendable {
        package var name: String
        /// The line of the header, for messages.
        package var line: Int
        package var assignments: [(key: String, value: String, line: Int)] = []

        /// Every value of `key`, in order.
        package func values(_ key: String) -> [String] { assignments.filter { $0.key == key }.map(\.value) }
    }

    /// The file name, for messages.
    package var name: String
    package var sections: [Section] = []

    /// Parses `text`.
    ///
    /// - Throws: ``ConfigurationError`` naming the file and line of the first line that is not a comment, a
    ///   section header or an assignment inside a section.
    package init(parsing text: String, name: String) throws(ConfigurationError) {
        self.name = name
        // "\r\n" is one Character, which a split at "\n" would not see: a CRLF file would be one long line.
        let lines = text.split(omittingEmptySubsequences: false) { $0 == "\n" || $0 == "\r\n" }
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let line = rawLine.trimmingWhitespace()
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw ConfigurationError(file: name, line: number, message: "a section header is '[Name]'")
                }
                sections.append(Section(name: String(line.dropFirst().dropLast()), line: number))
                continue
            }
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError(
                    file: name, line: number, message: "expected 'Key=Value', '[Section]' or a comment")
            }
            let key = line[..<equals].trimmingWhitespace()
            guard !key.isEmpty else {
                throw ConfigurationError(file: name, line: number, message: "the assignment has no key")
            }
            guard !sections.isEmpty else {
                throw ConfigurationError(file: name, line: number, message: "'\(key)=' comes before any [Section]")
            }
            let value = line[line.index(after: equals)...].trimmingWhitespace()
            sections[sections.count - 1].assignments.append((String(key), String(value), number))
        }
    }
}

/// A configuration file that cannot be used; the previous configuration stays in force.
public struct ConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The file.
    public var file: String
    /// The line, from 1; 0 when the problem is not on one line.
    public var line: Int
    /// What is wrong.
    public var message: String

    public init(file: String, line: Int, message: String) {
        self.file = file
        self.line = line
        self.message = message
    }

    public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> Substring {
        let scalars = Substring(self)
        let start = scalars.firstIndex { !$0.isWhitespace } ?? scalars.endIndex
        let end = scalars.lastIndex { !$0.isWhitespace }.map { scalars.index(after: $0) } ?? start
        return scalars[start..<end]
    }
}
