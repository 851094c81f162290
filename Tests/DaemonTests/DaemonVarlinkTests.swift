// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The real daemon over its real socket.
@Suite("exponea-authd over Varlink", .offPool)
struct DaemonVarlinkTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    @Test func aThirdPartyVarlinkClientWorksUnchanged() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)

        let token = TestJWT().token(expiringIn: 3600)
        let result = try ChildProcess.run(
            Python.varlink,
            [Self.fixtures.appendingPathComponent("varlink-client.py").path, fixture.socketPath, "shop"],
            input: token
        )
        #expect(result.status == 0, "\(result.standardError)")
        let lines = result.standardOutput.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                #"{"info": {"interfaces": ["org.varlink.service", "com.exponea.Auth", "io.systemd.Metrics"], "product": "exponea-authd"}}"#,
                #"{"description": "interface com.exponea.Auth"}"#,
                #"{"set": {"algorithm": "HS512", "generation": 1}}"#,
                #"{"error": {"code": "notThreeParts", "error": "com.exponea.Auth.MalformedToken"}}"#,
                #"{"event": {"generation": 1, "group": "shop", "kind": "tokenRefreshed"}}"#,
            ]
        )
        #expect(!daemon.output.contains(token.split(separator: ".")[1]))
    }

    /// GetToken is answered on the event loop when the connection has nothing else running; behind a slower
    /// call it waits its turn, so replies always come in the order of the calls.
    @Test func getTokenBehindSlowerCallsIsAnsweredInOrder() throws {
        let daemon = try DaemonUnderTest()
        let client = try VarlinkTestClient(path: daemon.socketPath)
        defer { client.close() }
        let token = TestJWT().token(expiringIn: 3600)
        var generation = 0
        for _ in 0..<3 {
            // WaitForToken finds no newer token and answers after its 300 ms: the GetToken behind it waits.
            try client.send("WaitForToken", ["group": "shop", "after": generation, "timeoutMs": 300])
            try client.send("GetToken", ["group": "shop"])
            _ = try client.reply()
            #expect(try client.reply()["generation"] as? Int == generation)

            // A GetToken behind a SetToken (or a clear) sees what that call committed.
            try client.send("SetToken", ["group": "shop", "token": token])
            try client.send("GetToken", ["group": "shop"])
            try client.send("ClearLocalCustomerData", ["group": "shop"])
            try client.send("GetToken", ["group": "shop"])
            let set = try client.reply()
            let after = try client.reply()
            #expect(after["token"] as? String == token && after["generation"] as? Int == set["generation"] as? Int)
            #expect(try client.reply().isEmpty)  // cleared
            let cleared = try client.reply()
            generation = cleared["generation"] as? Int ?? 0
            #expect(cleared["token"] == nil && generation > (set["generation"] as? Int ?? 0))
        }
    }

    @Test func badInputGetsANamedErrorOrAClosedConnectionAndTheDaemonStaysUp() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)

        // Not JSON: a named error, and the connection goes on.
        let client = try UnixClient(path: fixture.socketPath)
        defer { client.close() }
        #expect(
            try client.exchange("this is not json")
                == #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"method"}}"#)
        #expect(
            try client.exchange(#"{"method":"com.exponea.Auth.Nope"}"#).contains("org.varlink.service.MethodNotFound"))
        #expect(
            try client.exchange(#"{"method":"org.example.Other.Call"}"#).contains(
                "org.varlink.service.InterfaceNotFound"))
        #expect(
            try client.exchange(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"../../etc"}}"#)
                .contains("com.exponea.Auth.InvalidGroupName")
        )
        #expect(
            try client.exchange(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":["x"]}}"#)
                .contains("org.varlink.service.InvalidParameter")
        )

        // Over 64 KiB without a NUL: the connection is closed.
        let flooder = try UnixClient(path: fixture.socketPath)
        defer { flooder.close() }
        #expect(throws: Never.self) { try flooder.send(String(repeating: "a", count: 70_000), terminated: false) }
        #expect(try flooder.receiveUntilClosed(timeout: .seconds(5)))

        // Others are unaffected, and so is a new connection.
        #expect(try client.exchange(#"{"method":"org.varlink.service.GetInfo"}"#).contains("exponea-authd"))
        let fresh = try UnixClient(path: fixture.socketPath)
        defer { fresh.close() }
        #expect(try fresh.exchange(#"{"method":"com.exponea.Auth.ListGroups"}"#) == #"{"parameters":{"groups":[]}}"#)
        #expect(daemon.isRunning)
    }

    /// A number out of its parameter's range names that parameter, and a parameter the method does not take is
    /// refused naming it; nothing is changed, and the connection goes on.
    @Test func parametersOutOfRangeOrUnknownAreNamed() throws {
        let daemon = try DaemonUnderTest()
        let client = try UnixClient(path: daemon.socketPath)
        defer { client.close() }
        func invalid(_ name: String) -> String {
            #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"\#(name)"}}"#
        }
        let token = TestJWT().token(expiringIn: 3600)
        let cases: [(call: String, parameter: String)] = [
            (
                #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"shop","generation":-1}}"#,
                "generation"
            ),
            (
                #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"shop","generation":18446744073709551616}}"#,
                "generation"
            ),
            (
                #"{"method":"com.exponea.Auth.WaitForToken","parameters":{"group":"shop","after":0,"timeoutMs":1e400}}"#,
                "timeoutMs"
            ),
            (
                #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"\#(token)","ttl":1}}"#,
                "ttl"
            ),
            (#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop","groups":["x"]}}"#, "groups"),
            (#"{"method":"com.exponea.Auth.ListGroups","parameters":{"all":true}}"#, "all"),
            (#"{"method":"org.varlink.service.GetInfo","parameters":{"verbose":true}}"#, "verbose"),
        ]
        for (call, parameter) in cases {
            #expect(try client.exchange(call) == invalid(parameter), "\(call)")
        }
        // The SetToken with an unknown parameter stored nothing.
        #expect(
            try client.exchange(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#)
                == #"{"parameters":{"generation":0}}"#)
    }

    @Test func everyKindOfMalformedTokenIsRefusedWithWhatIsWrongAndNothingIsStored() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        let jwt = TestJWT()
        let header = #"{"alg":"HS512","typ":"JWT"}"#
        let table: [(token: String, code: String)] = [
            ("", "empty"),
            ("Bearer " + jwt.token(expiringIn: 3600), "bearerPrefix"),
            ("only.two", "notThreeParts"),
            ("a.b.c.d", "notThreeParts"),
            ("!!!.e30.c2ln", "invalidBase64URL"),
            (String(repeating: "a", count: 17_000) + ".e30.c2ln", "tooLong"),
            (jwt.token(headerJSON: "[1]", payloadJSON: #"{"exp":1,"ids":{}}"#), "headerNotJSONObject"),
            (jwt.token(headerJSON: #"{"typ":"JWT"}"#, payloadJSON: #"{"exp":1,"ids":{}}"#), "algorithmMissing"),
            (jwt.token(headerJSON: header, payloadJSON: #"{"ids":{}}"#), "expirationMissing"),
            (jwt.token(headerJSON: header, payloadJSON: #"{"exp":"soon","ids":{}}"#), "expirationNotNumber"),
            (jwt.token(headerJSON: header, payloadJSON: #"{"exp":1e300,"ids":{}}"#), "expirationOutOfRange"),
            (jwt.token(headerJSON: header, payloadJSON: #"{"exp":4102444800}"#), "customerIdsMissing"),
            (
                jwt.token(headerJSON: header, payloadJSON: #"{"exp":4102444800,"ids":{"a":1}}"#),
                "customerIdsNotStringMap"
            ),
        ]
        let client = try VarlinkTestClient(path: fixture.socketPath)
        defer { client.close() }
        for (token, code) in table {
            for method in ["SetToken", "IdentifyCustomer"] {
                var parameters: [String: Any] = ["group": "shop", "token": token]
                if method == "IdentifyCustomer" { parameters["customerIds"] = ["registered": "x"] }
                #expect {
                    try client.call(method, parameters)
                } throws: { error in
                    guard let failure = error as? VarlinkTestClient.Failure else { return false }
                    let message = failure.parameters["message"] ?? ""
                    return failure.name == "com.exponea.Auth.MalformedToken"
                        && failure.parameters["code"] == code
                        && !message.isEmpty && (token.count < 8 || !message.contains(token.suffix(8)))
                }
            }
        }
        #expect(try client.call("GetToken", ["group": "shop"])["generation"] as? Int == 0)
        #expect((try client.call("ListGroups")["groups"] as? [Any])?.count == 0)
        #expect(daemon.isRunning)
    }

    @Test func aMessageWithoutItsNULGetsNoReplyAndHoldsUpNobodyElse() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        let hanging = try UnixClient(path: fixture.socketPath, receiveTimeout: .seconds(1))
        defer { hanging.close() }
        try hanging.send(#"{"method":"com.exponea.Auth.ListGroups"}"#, terminated: false)
        #expect(throws: POSIXError(.ETIMEDOUT)) { try hanging.receiveReply() }

        let other = try UnixClient(path: fixture.socketPath)
        defer { other.close() }
        #expect(try other.exchange(#"{"method":"com.exponea.Auth.ListGroups"}"#) == #"{"parameters":{"groups":[]}}"#)
        // The NUL completes the message: it was held, not lost.
        try hanging.send("")
        #expect(try hanging.receiveReply() == #"{"parameters":{"groups":[]}}"#)
    }

    @Test func aClientThatShutsDownItsSideStillGetsEveryReply() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
        // As `printf '…\0…\0' | socat - UNIX-CONNECT:…` does: write the calls, shut down writing, read.
        let client = try UnixClient(path: fixture.socketPath)
        defer { client.close() }
        try client.send(#"{"method":"org.varlink.service.GetInfo"}"#)
        try client.send(#"{"method":"com.exponea.Auth.ListGroups"}"#)
        #expect(shutdown(client.descriptor, Int32(SHUT_WR)) == 0)
        #expect(try client.receiveReply().contains(#""product":"exponea-authd""#))
        #expect(try client.receiveReply() == #"{"parameters":{"groups":[]}}"#)
        #expect(try client.receiveUntilClosed(timeout: .seconds(5)))
    }

    /// With the report socket passed too (exponea-authd-report.socket, `FileDescriptorName=report`), the daemon
    /// serves `io.systemd.Metrics` there, and nothing of `com.exponea.Auth`.
    @Test func servesMetricsAloneOnThePassedReportSocket() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let report = fixture.root.appending("report.socket")
        let activator = try BackgroundProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "--listen=\(fixture.socketPath)", "--listen=\(report)", "--fdname=varlink:report", "-E",
                "NOTIFY_SOCKET=\(fixture.notify.path)", "-E", "CREDENTIALS_DIRECTORY=\(fixture.credentials)", "-E",
                "HOME=\(fixture.root.path)", try BuildProducts.executable("exponea-authd"), "--user",
                "--log-target", "console", "--state-directory", fixture.stateDirectory,
            ]
        )
        defer { activator.stop() }
        #expect(activator.waitForOutput { $0.contains("Listening on \(report) ") })
        let client = try UnixClient(path: report)  // the first connection starts the daemon
        defer { client.close() }
        try client.send(#"{"method":"io.systemd.Metrics.List","more":true}"#)
        var names: [String] = []
        while true {
            let reply = try client.receiveReply()
            names.append(reply)
            if !reply.contains(#""continues":true"#) { break }
        }
        #expect(names.contains { $0.contains(#""name":"com.exponea.Auth.version""#) }, "\(names)")
        #expect(
            try client.exchange(#"{"method":"com.exponea.Auth.CountGroups"}"#)
                .contains("org.varlink.service.InterfaceNotFound"))
        let main = try UnixClient(path: fixture.socketPath)
        defer { main.close() }
        #expect(try main.exchange(#"{"method":"com.exponea.Auth.CountGroups"}"#).contains(#""groups":0"#))
    }

    @Test func startsUnderSocketActivationAndServesACall() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let activator = try BackgroundProcess(
            "/usr/bin/systemd-socket-activate",
            [
                "--listen=\(fixture.socketPath)", "-E", "NOTIFY_SOCKET=\(fixture.notify.path)", "-E",
                "CREDENTIALS_DIRECTORY=\(fixture.credentials)", "-E", "HOME=\(fixture.root.path)",
                try BuildProducts.executable("exponea-authd"), "--user", "--log-target", "console",
                "--state-directory", fixture.stateDirectory,
            ]
        )
        defer { activator.stop() }
        #expect(activator.waitForOutput { $0.contains("Listening on \(fixture.socketPath) ") })
        let client = try UnixClient(path: fixture.socketPath)  // the first connection starts the daemon
        defer { client.close() }
        #expect(
            try client.exchange(#"{"method":"org.varlink.service.GetInfo"}"#).contains(#""product":"exponea-authd""#))
        // Logged before the reply was sent, but read from the pipe by another thread: wait for it.
        #expect(
            activator.waitForOutput { $0.contains("Using the socket systemd passed") }, "\(activator.output)")
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run a client as another user"))
    func anotherUserIsRefusedUntilTheConfigurationNamesItAndIsReloaded() throws {
        let fixture = try DaemonStartupTests.Fixture()
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: fixture.root.path)
        let config = try TemporaryDirectory(prefix: "authd-etc")
        defer { config.remove() }
        let daemon = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            [
                "--log-target", "console", "--state-directory", fixture.stateDirectory, "--config-directory",
                config.path, "--socket", fixture.socketPath,
            ],
            environment: ["NOTIFY_SOCKET": fixture.notify.path, "CREDENTIALS_DIRECTORY": fixture.credentials]
        )
        defer { daemon.stop(signal: SIGTERM) }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)

        func getTokenAsNobody() throws -> String {
            let script = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
                s.sendall(b'{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}\\0')
                data = b""
                while not data.endswith(b"\\0"):
                    chunk = s.recv(4096)
                    if not chunk: break
                    data += chunk
                print(data.rstrip(b"\\0").decode())
                """
            return try ChildProcess.run(
                "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
                    fixture.socketPath,
                ]
            ).standardOutput
        }
        #expect(try getTokenAsNobody().contains(#""error":"com.exponea.Auth.PermissionDenied""#))

        try "[AppGroup]\nName=shop\nUsers=65534\n".write(
            toFile: config.appending("authd.conf"),
            atomically: true,
            encoding: .utf8
        )
        kill(daemon.pid, SIGHUP)
        #expect(fixture.notify.receive(containing: "READY=1") != nil)
        #expect(try getTokenAsNobody() == #"{"parameters":{"generation":0}}"# + "\n")
    }
}
