import AuthTestKit
import Foundation
import Testing

/// authctl(1) and `authctl --help` tell the same story.
@Suite("authctl(1) matches --help")
struct ManualPageTests {
    static let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../man/authctl.1").standardized

    @Test func everyCommandAndOptionOfHelpIsInThePageAndNoOther() throws {
        let page = try String(contentsOf: Self.page, encoding: .utf8)
        var help = try runAuthctl(["--help"]).standardOutput
        for command in ErrorAndHelpTests.commands {
            #expect(page.contains(".It Cm \(command)"), "\(command)")
            help += try runAuthctl([command, "--help"]).standardOutput
        }
        let helpOptions = Set(Self.longOptions(in: help, prefix: "--"))
        // `.It Fl h , -help` names the long form after the short one.
        let pageOptions = Set(Self.longOptions(in: page, prefix: "Fl -") + Self.longOptions(in: page, prefix: " , -"))
        #expect(helpOptions.contains("token-stdin"))
        #expect(helpOptions == pageOptions)
    }

    @Test func everyExitStatusOfHelpIsInThePage() throws {
        let page = try String(contentsOf: Self.page, encoding: .utf8)
        let help = try runAuthctl(["--help"]).standardOutput
        for status in ["0", "1", "2", "3", "69", "77"] {
            #expect(help.contains(" \(status) "), "\(status)")
            #expect(page.contains("\n.It \(status)\n"), "\(status)")
        }
    }

    /// The long option names after `prefix`, such as `json` for `--json` or `Fl -json`.
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
