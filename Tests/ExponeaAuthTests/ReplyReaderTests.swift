// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import ExponeaAuth
import Foundation
import Testing

/// The replies of GetToken, Preflight, GetInfo and CountGroups, which the library reads by hand (not through
/// `Decodable`), are read as leniently as the others: what a newer daemon may add or spell otherwise is
/// accepted, and a reply that cannot be read names the member that is wrong. A server on a real Unix socket
/// answers each call with the reply a test gives it.
@Suite("ExponeaAuth reads the hot replies by hand", .offPool)
struct ReplyReaderTests {
    /// Answers every call with the reply given for its method (`com.exponea.Auth.GetToken` → JSON).
    final class ScriptedServer {
        let path: String
        private let process: BackgroundProcess
        private let directory: TemporaryDirectory

        private static let script = """
            import json, os, socket, sys
            path, replies = sys.argv[1], json.loads(sys.argv[2])
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(path)
            server.listen(4)
            print("listening", flush=True)
            while True:
                connection, _ = server.accept()
                pending = b""
                while chunk := connection.recv(65536):
                    *messages, pending = (pending + chunk).split(b"\\0")
                    for message in messages:
                        method = json.loads(message)["method"].rsplit(".", 1)[1]
                        connection.sendall(replies[method].encode() + b"\\0")
                connection.close()
            """

        init(replies: [String: String]) throws {
            directory = try TemporaryDirectory(prefix: "authd-replies")
            path = directory.appending("io.socket")
            let json = String(decoding: try JSONSerialization.data(withJSONObject: replies), as: UTF8.self)
            process = try BackgroundProcess(
                "/usr/bin/python3", ["-c", Self.script, path, json], environment: ["PATH": "/usr/bin:/bin"])
            guard process.waitForOutput({ $0.contains("listening") }) else {
                throw NotStarted(output: process.output)
            }
        }

        struct NotStarted: Error {
            var output: String
        }

        var client: AuthDaemonClient { AuthDaemonClient(socketPath: path, unavailableBound: .milliseconds(200)) }

        deinit {
            process.stop()
            directory.remove()
        }
    }

    @Test func membersANewerDaemonAddsAreIgnoredAndIntegersMayBeWrittenAsDecimals() async throws {
        let server = try ScriptedServer(replies: [
            "GetToken": """
            {"parameters":{"token":"a.b.c","generation":7.0,"future":[1,{"x":null}],
            "claims":{"expiresAt":1767225600.5,"customerIds":{"registered":"jane"},"algorithm":"HS512",
            "keyId":null,"future":true}},"continues":false}
            """,
            "Preflight": #"{"parameters":{"state":"expiredSoon","reason":"notYetKnown","generation":3,"token":null}}"#,
            "CountGroups": #"{"parameters":{"groups":10000,"withToken":9999,"pending":1}}"#,
            "GetInfo": """
            {"parameters":{"vendor":"Bloomreach","product":"exponea-authd","version":"1.2.0","url":"https://x",
            "interfaces":["org.varlink.service","com.exponea.Auth"],"future":{}}}
            """,
        ])
        let client = server.client

        let token = try await client.getToken(group: "shop")
        #expect(token.token?.value == "a.b.c")
        #expect(token.generation == 7)
        #expect(token.claims?.expiresAt == 1_767_225_600.5)
        #expect(token.claims?.customerIds == ["registered": "jane"])
        #expect(token.claims?.algorithm == "HS512")
        #expect(token.claims?.keyId == nil)

        let preflight = try await client.preflight(group: "shop")
        #expect(preflight.state == .expiredSoon)
        #expect(preflight.reason == .unknown("notYetKnown"))
        #expect(preflight.token == nil)
        #expect(preflight.generation == 3)

        let counts = try await client.countGroups()
        #expect(counts.groups == 10_000 && counts.withToken == 9_999)

        let info = try await client.info()
        #expect(
            info
                == DaemonInfo(
                    vendor: "Bloomreach", product: "exponea-authd", version: "1.2.0", url: "https://x",
                    interfaces: ["org.varlink.service", "com.exponea.Auth"]))
    }

    @Test func aTokenlessReplyHasNoClaims() async throws {
        let server = try ScriptedServer(replies: ["GetToken": #"{"parameters":{"generation":0}}"#])
        let token = try await server.client.getToken(group: "shop")
        #expect(token.token == nil && token.claims == nil && token.generation == 0)
    }

    @Test(arguments: [
        (#"{"parameters":{"generation":-1}}"#, "generation"),
        (#"{"parameters":{"generation":1.5}}"#, "generation"),
        (#"{"parameters":{"token":5,"generation":1}}"#, "token"),
        (
            #"{"parameters":{"generation":1,"claims":{"expiresAt":"soon","customerIds":{},"algorithm":"HS512"}}}"#,
            "claims"
        ),
        (
            #"{"parameters":{"generation":1,"claims":{"expiresAt":1,"customerIds":{"a":1},"algorithm":"HS512"}}}"#,
            "claims"
        ),
        (#"{"parameters":{"generation":1,"claims":{"expiresAt":1,"customerIds":{}}}}"#, "claims"),
        (#"{"parameters":{"generation":1,"claims":[]}}"#, "claims"),
        // The last of two same-named members counts, as in a dictionary.
        (#"{"parameters":{"generation":2,"generation":"x"}}"#, "generation"),
        (#"{"parameters":{"generation":2},"parameters":null}"#, "generation"),
        (#"{"parameters":{"generation":2},"parameters":5}"#, "parameters"),
    ])
    func aReplyThatCannotBeReadNamesTheMember(reply: String, member: String) async throws {
        let server = try ScriptedServer(replies: ["GetToken": reply])
        await #expect {
            _ = try await server.client.getToken(group: "shop")
        } throws: { error in
            let error = error as? AuthClientError
            // Parameters that are not an object are said to be so, as a whole.
            let says = member == "parameters" ? "parameters that are not an object" : "(member '\(member)')"
            return error?.code == .protocolError && error?.message.contains(says) == true
        }
    }

    /// A member named twice counts with its last value, as in a dictionary, even when the first was of the
    /// wrong type; so does `parameters`, and an `error` that is not a string is no error reply.
    @Test(arguments: [
        #"{"parameters":{"generation":"x","generation":2}}"#,
        #"{"parameters":{"generation":2,"claims":[],"claims":null}}"#,
        #"{"parameters":5,"parameters":{"generation":2}}"#,
        #"{"error":5,"parameters":{"generation":2}}"#,
    ])
    func theLastOfTwoSameNamedMembersCounts(reply: String) async throws {
        let server = try ScriptedServer(replies: ["GetToken": reply])
        let token = try await server.client.getToken(group: "shop")
        #expect(token.generation == 2 && token.claims == nil && token.token == nil)
    }

    @Test func aPreflightStateThisVersionDoesNotKnowNamesState() async throws {
        let server = try ScriptedServer(replies: ["Preflight": #"{"parameters":{"state":"odd","generation":1}}"#])
        await #expect {
            _ = try await server.client.preflight(group: "shop")
        } throws: { error in
            (error as? AuthClientError)?.message.contains("(member 'state')") == true
        }
    }

    @Test func anInfoWhoseInterfacesAreNotAllStringsNamesInterfaces() async throws {
        let server = try ScriptedServer(replies: [
            "GetInfo": #"{"parameters":{"vendor":"v","product":"p","version":"1","url":"u","interfaces":["a",1]}}"#
        ])
        await #expect {
            _ = try await server.client.info()
        } throws: { error in
            (error as? AuthClientError)?.message.contains("(member 'interfaces')") == true
        }
    }

    @Test func anErrorReplyIsTheErrorItNames() async throws {
        let server = try ScriptedServer(replies: [
            "GetToken": #"{"error":"com.exponea.Auth.PermissionDenied","parameters":{"group":"shop"}}"#
        ])
        await #expect {
            _ = try await server.client.getToken(group: "shop")
        } throws: { error in
            (error as? AuthClientError)?.code == .permissionDenied
        }
    }
}
