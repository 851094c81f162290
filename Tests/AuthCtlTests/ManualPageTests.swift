// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// authctl(1) and `authctl --help` tell the same story.
@Suite("authctl(1) matches --help", .offPool)
struct ManualPageTests {
    @Test func everyCommandAndOptionOfHelpIsInThePageAndNoOther() throws {
        let manual = try ManualPage("authctl.1")
        let page = manual.source
        var help = try runAuthctl(["--help"]).standardOutput
        for command in ErrorAndHelpTests.commands {
            #expect(page.contains(".It Cm \(command)"), "\(command)")
            help += try runAuthctl([command, "--help"]).standardOutput
        }
        let helpOptions = ManualPage.longOptions(inHelp: help)
        #expect(helpOptions.contains("token-stdin"))
        #expect(helpOptions == manual.longOptions)
    }

    @Test func everyExitStatusOfHelpIsInThePage() throws {
        let page = try ManualPage("authctl.1").source
        let help = try runAuthctl(["--help"]).standardOutput
        for status in ["0", "1", "2", "3", "4", "69", "77"] {
            #expect(help.contains(" \(status) "), "\(status)")
            #expect(page.contains("\n.It \(status)\n"), "\(status)")
        }
    }
}
