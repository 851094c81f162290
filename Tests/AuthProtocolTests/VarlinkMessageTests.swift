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

    @Test func aMemberNamedTwiceKeepsItsLastValueAndOthersAreIgnored() throws {
        let call = try call(
            #"{"method":"x.Y","more":5,"method":"com.exponea.Auth.GetToken","more":false,"other":[1],"oneway":null,"#
                + #""parameters":{"group":"a"},"parameters":{"group":"shop"}}"#)
        #expect(call.method == "com.exponea.Auth.GetToken")
        #expect(!call.more && !call.oneway && !call.upgrade)
        #expect(try call.stringParameter("group") == "shop")
        #expect(throws: VarlinkCallError.notACall) {
            try VarlinkCall(decoding: Array(#"{"method":"com.exponea.Auth.GetToken","upgrade":"yes"}"#.utf8))
        }
    }

    /// The method's name and the parameters are read from the message's bytes; written with escapes, or null,
    /// they read as they would parsed whole.
    @Test func escapedNamesAndNullParametersReadAsParsed() throws {
        let escaped = try call(#"{"method":"com.exponea.Auth.Get\u0054oken","parameters":{"gr\u006fup":"sh\u00f6p"}}"#)
        #expect(escaped.method == "com.exponea.Auth.GetToken")
        #expect(escaped.hasMethod(Array("com.exponea.Auth.GetToken".utf8)))
        #expect(!escaped.hasMethod(Array("com.exponea.Auth.GetTokens".utf8)))
        #expect(try escaped.stringParameter("group") == "shöp")
        #expect(try escaped.parameters(GroupParameters.self) == GroupParameters(group: "shöp"))

        let null = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":null}"#)
        #expect(throws: VarlinkError.invalidParameter("group")) { try null.stringParameter("group") }
        #expect(try null.parameters(EmptyPayload.self) == EmptyPayload())

        let last = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"a","group":1}}"#)
        #expect(throws: VarlinkError.invalidParameter("group")) { try last.stringParameter("group") }
        let twoUnknown = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":{"z":1,"group":"g","b":2}}"#)
        #expect(throws: VarlinkError.invalidParameter("b")) { try twoUnknown.stringParameter("group") }
        let notObject = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":"shop"}"#)
        #expect(throws: VarlinkError.invalidParameter("parameters")) { try notObject.stringParameter("group") }

        // Two string parameters (SetToken's), read from the bytes in either order; escaped, doubled, missing,
        // of another type or beside a third, they read as they would parsed whole.
        let setToken = "com.exponea.Auth.SetToken"
        func two(_ parameters: String) throws -> VarlinkCall {
            try call(#"{"method":"\#(setToken)","parameters":\#(parameters)}"#)
        }
        #expect(try two(#"{"group":"g","token":"a.b.c"}"#).stringParameters("group", "token") == ("g", "a.b.c"))
        #expect(try two(#"{"token":"a.b.c","group":"g"}"#).stringParameters("group", "token") == ("g", "a.b.c"))
        #expect(
            try two(#"{"token":"a.b.\u0063","gr\u006fup":"g"}"#).stringParameters("group", "token") == ("g", "a.b.c"))
        #expect(try two(#"{"group":"g","token":"t","group":"h"}"#).stringParameters("group", "token") == ("h", "t"))
        #expect(throws: VarlinkError.invalidParameter("token")) {
            try two(#"{"group":"g","group":"h"}"#).stringParameters("group", "token")
        }
        #expect(throws: VarlinkError.invalidParameter("group")) {
            try two(#"{"group":1,"token":"t"}"#).stringParameters("group", "token")
        }
        #expect(throws: VarlinkError.invalidParameter("extra")) {
            try two(#"{"group":"g","token":"t","extra":"x"}"#).stringParameters("group", "token")
        }
        // As the parameters decode: a missing one is named before an unknown one.
        #expect(throws: VarlinkError.invalidParameter("token")) {
            try two(#"{"group":"g","other":"t"}"#).stringParameters("group", "token")
        }
        #expect(throws: VarlinkError.invalidParameter("group")) {
            try two(#"{"token":"t"}"#).stringParameters("group", "token")
        }

        // Parameters that are no JSON make the message no call, though they are decoded only later.
        for broken in [#"{"a":}"#, #"{"a":"\x"}"#, "[1,]", #"{"a":1e400,}"#] {
            #expect(throws: VarlinkCallError.notACall) {
                try VarlinkCall(
                    decoding: Array(#"{"method":"com.exponea.Auth.GetToken","parameters":\#(broken)}"#.utf8))
            }
        }
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

        let negative = try call(
            #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"g","generation":-1}}"#
        )
        #expect(throws: VarlinkError.invalidParameter("generation")) {
            try negative.parameters(ClaimRefreshParameters.self)
        }

        let notObject = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":[1]}"#)
        #expect(throws: VarlinkError.invalidParameter("parameters")) { try notObject.parameters(GroupParameters.self) }
    }

    /// A number out of the range of its parameter's type is about that parameter, not the whole call.
    @Test(arguments: [
        ("ClaimRefresh", #"{"group":"g","generation":-1}"#, "generation"),
        ("ClaimRefresh", #"{"group":"g","generation":18446744073709551616}"#, "generation"),
        ("ClaimRefresh", #"{"group":"g","generation":1.5}"#, "generation"),
        ("ClaimRefresh", #"{"group":"g","generation":1e400}"#, "generation"),
        ("WaitForToken", #"{"group":"g","after":0,"timeoutMs":1e400}"#, "timeoutMs"),
        ("WaitForToken", #"{"group":"g","after":0,"timeoutMs":-1e400}"#, "timeoutMs"),
        ("ReportAuthFailure", #"{"group":"g","status":401,"generation":-1}"#, "generation"),
        ("ReportAuthFailure", #"{"group":"g","status":9223372036854775808}"#, "status"),
    ])
    func aNumberOutOfRangeNamesItsParameter(_ method: String, _ parameters: String, _ name: String) throws {
        let call = try call(#"{"method":"com.exponea.Auth.\#(method)","parameters":\#(parameters)}"#)
        #expect(throws: VarlinkError.invalidParameter(name)) {
            switch method {
            case "ClaimRefresh": _ = try call.parameters(ClaimRefreshParameters.self)
            case "WaitForToken": _ = try call.parameters(WaitForTokenParameters.self)
            default: _ = try call.parameters(ReportAuthFailureParameters.self)
            }
        }
    }

    @Test func numbersInRangeAreRead() throws {
        let call = try call(
            #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"g","generation":18446744073709551615}}"#
        )
        #expect(try call.parameters(ClaimRefreshParameters.self).generation == .max)
        let integral = try self.call(
            #"{"method":"com.exponea.Auth.WaitForToken","parameters":{"group":"g","after":2e0,"timeoutMs":5.0}}"#)
        let parameters = try integral.parameters(WaitForTokenParameters.self)
        #expect(parameters.after == 2 && parameters.timeoutMs == 5)
    }

    /// An integer is read exactly: one written as an integer out of range is no integer (a double would round
    /// it into range), and one written with a fraction or an exponent is one only when its value is integral.
    @Test func integersAreReadExactly() {
        func integer<T: FixedWidthInteger>(_ literal: String, as type: T.Type) -> T? {
            ParameterDecoder.integer(.number(literal), as: type)
        }
        #expect(integer("-9223372036854775808", as: Int64.self) == .min)
        #expect(integer("-9223372036854775809", as: Int64.self) == nil)
        #expect(integer("18446744073709551615", as: UInt64.self) == .max)
        #expect(integer("18446744073709551616", as: UInt64.self) == nil)
        #expect(integer("-0", as: UInt64.self) == 0)
        #expect(integer("-1", as: UInt64.self) == nil)
        #expect(integer("1.5", as: Int.self) == nil)
        #expect(integer("15e-1", as: Int.self) == nil)
        #expect(integer("150E-1", as: Int.self) == 15)
        #expect(integer("2.0", as: UInt8.self) == 2)
        #expect(integer("256", as: UInt8.self) == nil)
    }

    /// A parameter the method does not take is refused, naming it, by every way parameters are read.
    @Test func anUnknownParameterIsRefusedNamingIt() throws {
        let extra = try call(
            #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"g","token":"t","tokn":"t"}}"#)
        #expect(throws: VarlinkError.invalidParameter("tokn")) { try extra.parameters(SetTokenParameters.self) }

        let groupOnly = try call(#"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"g","force":true}}"#)
        #expect(throws: VarlinkError.invalidParameter("force")) { try groupOnly.stringParameter("group") }
        #expect(throws: VarlinkError.invalidParameter("force")) { try groupOnly.parameters(GroupParameters.self) }

        let none = try call(#"{"method":"com.exponea.Auth.ListGroups","parameters":{"all":true}}"#)
        #expect(throws: VarlinkError.invalidParameter("all")) { try none.parameters(EmptyPayload.self) }

        // Optional parameters may be left out or null; the customer ids are a map, whatever their names.
        let optional = try call(
            #"{"method":"com.exponea.Auth.IdentifyCustomer","parameters":{"group":"g","customerIds":{"any":"x"},"token":null}}"#
        )
        let identify = try optional.parameters(IdentifyCustomerParameters.self)
        #expect(identify.customerIds == ["any": "x"] && identify.token == nil)
    }

    /// A number beyond a double's range elsewhere than in the parameters still makes no call.
    @Test func aNumberOutOfRangeInTheCallItselfIsNoCall() {
        #expect(throws: VarlinkCallError.notACall) {
            try VarlinkCall(decoding: Array(#"{"method":"com.exponea.Auth.ListGroups","more":1e400}"#.utf8))
        }
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
