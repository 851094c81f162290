// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Testing

@Suite("Varlink calls, replies and errors")
struct VarlinkMessageTests {
    func call(_ json: String) throws -> VarlinkCall { try VarlinkCall(decoding: Array(json.utf8)) }

    @Test func readsTheCallHeader() throws {
        let call = try call(#"{"method":"com.exponea.Auth.Subscribe","parameters":{"group":"shop"},"more":true}"#)
        #expect(call.method == "com.exponea.Auth.Subscribe")
        #expect(call.interface == "com.exponea.Auth")
        #expect(call.more && !call.oneway && !call.upgrade)
        #expect(try call.parameters(GroupParameters.self) == GroupParameters(group: "shop"))
        #expect(AuthInterface.Method(qualifiedName: call.method) == .subscribe)
    }

    @Test func aCallWithoutParametersDecodesEmptyParameters() throws {
        let call = try call(#"{"method":"com.exponea.Auth.ListGroups"}"#)
        #expect(try call.parameters(EmptyPayload.self) == EmptyPayload())
        #expect(throws: VarlinkError.invalidParameter("group")) { try call.parameters(GroupParameters.self) }
    }

    @Test(arguments: ["", "null", "[]", #""x""#, "{", #"{"parameters":{}}"#, #"{"method":5}"#, "\u{FF}"])
    func refusesWhatIsNotACall(_ json: String) {
        #expect(throws: VarlinkCallError.notACall) { try VarlinkCall(decoding: Array(json.utf8)) }
    }

    @Test func namesTheParameterThatIsWrong() throws {
        let wrongType = try call(
            #"{"method":"com.exponea.Auth.WaitForToken","parameters":{"group":"g","after":"1","timeoutMs":5}}"#)
        #expect(throws: VarlinkError.invalidParameter("after")) {
            try wrongType.parameters(WaitForTokenParameters.self)
        }

        let missing = try call(#"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"g"}}"#)
        #expect(throws: VarlinkError.invalidParameter("token")) { try missing.parameters(SetTokenParameters.self) }

        // Foundation reports a number out of range without a coding path, so only the kind of error is sure.
        let negative = try call(
            #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"g","generation":-1}}"#
        )
        #expect {
            try negative.parameters(ClaimRefreshParameters.self)
        } throws: { error in
            if case .invalidParameter? = error as? VarlinkError { return true }
            return false
        }

        let notObject = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":[1]}"#)
        #expect(throws: VarlinkError.invalidParameter("parameters")) { try notObject.parameters(GroupParameters.self) }
    }

    @Test func encodesRepliesAsOneJSONObjectAndANUL() throws {
        let bytes = try VarlinkReplyEncoder.reply(GenerationResult(generation: 7))
        #expect(bytes.last == 0)
        #expect(String(decoding: bytes.dropLast(), as: UTF8.self) == #"{"parameters":{"generation":7}}"#)

        let continued = try VarlinkReplyEncoder.reply(ClaimRefreshResult(granted: true), continues: true)
        #expect(
            String(decoding: continued.dropLast(), as: UTF8.self)
                == #"{"continues":true,"parameters":{"granted":true}}"#)
    }

    @Test func encodesErrorsWithTheirInterfaceNames() {
        let cases: [(VarlinkError, String)] = [
            (
                .methodNotFound("com.exponea.Auth.Nope"),
                #"{"error":"org.varlink.service.MethodNotFound","parameters":{"method":"com.exponea.Auth.Nope"}}"#
            ),
            (
                .invalidParameter("group"),
                #"{"error":"org.varlink.service.InvalidParameter","parameters":{"parameter":"group"}}"#
            ),
            (.expectedMore, #"{"error":"org.varlink.service.ExpectedMore","parameters":{}}"#),
            (
                .malformedToken(code: "notThreeParts", message: "a JWT has three parts"),
                #"{"error":"com.exponea.Auth.MalformedToken","parameters":{"code":"notThreeParts","message":"a JWT has three parts"}}"#
            ),
            (
                .permissionDenied(group: "shop"),
                #"{"error":"com.exponea.Auth.PermissionDenied","parameters":{"group":"shop"}}"#
            ),
        ]
        for (error, json) in cases {
            let bytes = VarlinkReplyEncoder.error(error)
            #expect(bytes.last == 0)
            #expect(String(decoding: bytes.dropLast(), as: UTF8.self) == json)
        }
    }

    @Test func groupNamesAreValidatedIntoTheirNamedError() {
        #expect(throws: Never.self) { try AppGroup(wire: "shop") }
        #expect {
            try AppGroup(wire: "../etc")
        } throws: { error in
            guard case .invalidGroupName(let message)? = error as? VarlinkError else { return false }
            return message.contains("starts with '.'")
        }
    }

    @Test func tokensNeverShowInDescriptions() throws {
        let token = TestToken.value
        let parameters = SetTokenParameters(group: "g", token: CompactToken(token))
        for text in [String(describing: parameters), String(reflecting: parameters), "\(parameters.token)"] {
            #expect(!text.contains(token))
        }
        var dumped = ""
        dump(GetTokenResult(token: CompactToken(token), claims: nil, generation: 1), to: &dumped)
        #expect(!dumped.contains(token))
        // On the wire it is the plain string.
        let wire = String(decoding: try VarlinkReplyEncoder.reply(parameters), as: UTF8.self)
        #expect(wire.contains(#""token":"\#(token)""#))
    }

    @Test func unknownEventKindsAndReasonsDecode() throws {
        let call = try call(
            #"{"method":"x.Y","parameters":{"event":{"kind":"revoked","group":"g","generation":2,"reason":"later"}}}"#)
        let event = try call.parameters(SubscribeResult.self).event
        #expect(event.kind == .unknown("revoked"))
        #expect(event.reason == .unknown("later"))
    }
}

enum TestToken {
    static let value = "eyJhbGciOiJIUzUxMiJ9.eyJleHAiOjEsImlkcyI6e319.c2lnbmF0dXJl"
}

@Suite("Calls never show their parameters")
struct VarlinkCallRedactionTests {
    @Test func descriptionAndDumpShowTheMethodOnly() throws {
        let call = try VarlinkCall(
            decoding: Array(
                #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"g","token":"\#(TestToken.value)"}}"#.utf8
            )
        )
        var dumped = ""
        dump(call, to: &dumped)
        for text in [call.description, String(reflecting: call), dumped] {
            #expect(!text.contains(TestToken.value))
        }
        #expect(call.description == "VarlinkCall(com.exponea.Auth.SetToken)")
    }
}
