import AuthTestKit
import Foundation
import Testing

/// exponea-authd(8) and `exponea-authd --help` tell the same story.
@Suite("exponea-authd(8) matches --help")
struct ManualPageTests {
    static let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../man/exponea-authd.8").standardized

    @Test func everyOptionOfHelpIsInThePageAndNoOther() throws {
        let help = try ChildProcess.run(BuildProducts.executable("exponea-authd"), ["--help"]).standardOutput
        let page = try String(contentsOf: Self.page, encoding: .utf8)
        let helpOptions = Set(Self.longOptions(in: help, prefix: "--"))
        // `.It Fl h , -help` names the long form after the short one.
        let pageOptions = Set(Self.longOptions(in: page, prefix: "Fl -") + Self.longOptions(in: page, prefix: " , -"))
        #expect(!helpOptions.isEmpty)
        #expect(helpOptions == pageOptions)
    }

    /// The long option names after `prefix`, such as `user` for `--user` or `Fl -user`.
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
