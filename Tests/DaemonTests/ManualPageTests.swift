// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// exponea-authd(8) and `exponea-authd --help` tell the same story.
@Suite("exponea-authd(8) matches --help", .offPool)
struct ManualPageTests {
    @Test func everyOptionOfHelpIsInThePageAndNoOther() throws {
        let help = try ChildProcess.run(BuildProducts.executable("exponea-authd"), ["--help"]).standardOutput
        let helpOptions = ManualPage.longOptions(inHelp: help)
        #expect(helpOptions.contains("flush-timeout"))
        #expect(helpOptions == (try ManualPage("exponea-authd.8").longOptions))
    }
}
