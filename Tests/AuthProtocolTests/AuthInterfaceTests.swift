// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import AuthTestKit
import Foundation
import Testing

@Suite("The com.exponea.Auth interface description", .offPool)
struct AuthInterfaceTests {
    @Test func declaresEveryMethodTheDaemonKnows() {
        for method in AuthInterface.Method.allCases {
            #expect(AuthInterface.description.contains("\nmethod \(method.rawValue)("), "\(method)")
            #expect(AuthInterface.Method(qualifiedName: method.qualifiedName) == method)
        }
        #expect(AuthInterface.Method(qualifiedName: "com.exponea.Auth.Nope") == nil)
        #expect(AuthInterface.Method(qualifiedName: "org.varlink.service.GetInfo") == nil)
    }

    @Test func declaresEveryInterfaceError() {
        let errors: [VarlinkError] = [
            .malformedToken(code: "", message: ""), .invalidGroupName(message: ""), .permissionDenied(group: ""),
            .storeFailure(message: ""), .tooManySubscribers(group: ""), .subscriptionDropped(group: ""),
        ]
        for error in errors {
            #expect(VarlinkError(name: error.name, parameters: error.parameters) == error)
            let member = error.name.split(separator: ".").last!
            #expect(error.name.hasPrefix("com.exponea.Auth."))
            #expect(AuthInterface.description.contains("\nerror \(member) ("), "\(member)")
            for parameter in error.parameters.keys {
                #expect(AuthInterface.description.contains("\(parameter): string"))
            }
        }
    }

    @Test func isTheShippedFile() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/AuthProtocol/com.exponea.Auth.varlink").standardized
        #expect(try String(contentsOf: file, encoding: .utf8) == AuthInterface.description)
        #expect(AuthInterface.description.contains("interface com.exponea.Auth\n"))
    }

    @Test func theReferenceVarlinkImplementationParsesBothInterfaces() throws {
        let script = """
            import sys, varlink
            for text in sys.stdin.read().split("\\0"):
                interface = varlink.Interface(text)
                print(interface.name, " ".join(sorted(interface.members)))
            """
        let result = try ChildProcess.run(
            Python.varlink, ["-c", script], input: AuthInterface.description + "\0" + VarlinkService.description)
        #expect(result.status == 0, "\(Python.varlink) with varlink (scripts/install-deps) is needed")
        let printed = result.standardOutput
        let lines = printed.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.hasPrefix("com.exponea.Auth AcknowledgeFlush Anonymize ClaimRefresh Claims") == true)
        #expect(
            lines.last
                == "org.varlink.service ExpectedMore GetInfo GetInterfaceDescription InterfaceNotFound InvalidParameter MethodNotFound MethodNotImplemented PermissionDenied"
        )
    }
}
