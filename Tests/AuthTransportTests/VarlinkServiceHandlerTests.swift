// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Testing

@testable import AuthTransport

/// `VarlinkServiceHandler` hands a call to be answered at once to the interface whose name is all of the
/// method's up to its last dot, and to no other.
@Suite("Varlink service handler")
struct VarlinkServiceHandlerTests {
    /// Answers every call at once with its own name.
    struct NamedHandler: VarlinkCallHandler {
        let name: String
        func handle(_ call: VarlinkCall, from peer: Caller, replies: VarlinkReplies) async {}
        func answerImmediately(_ call: VarlinkCall, from peer: Caller) -> [UInt8]? { Array(name.utf8) }
    }

    let service = VarlinkServiceHandler(
        vendor: "v", product: "p", version: "1", url: "u",
        interfaces: [
            (name: "a.b", description: "", handler: NamedHandler(name: "a.b")),
            (name: "a.b.c", description: "", handler: NamedHandler(name: "a.b.c")),
        ])

    @Test(arguments: [
        ("a.b.M", "a.b"), ("a.b.c.M", "a.b.c"), ("a.b.x.M", nil), ("a.bM", nil), ("a.b.", "a.b"), ("a.b", nil),
        ("org.varlink.service.x.GetInfo", nil), ("M", nil),
    ])
    func answersThroughTheInterfaceOfTheMethod(method: String, interface: String?) throws {
        let call = try VarlinkCall(decoding: Array(#"{"method":"\#(method)"}"#.utf8))
        #expect(call.interface.flatMap { ["a.b", "a.b.c"].contains($0) ? $0 : nil } == interface)
        let answer = service.answerImmediately(call, from: Caller(pid: 1, uid: 1, gid: 1))
        #expect(answer.map { String(decoding: $0, as: UTF8.self) } == interface)
    }

    /// `org.varlink.service` is answered at once from what the handler holds: a client's first call (`authctl
    /// status` asks GetInfo) needs no other thread. A oneway call gets nothing.
    @Test func theServiceInterfaceIsAnsweredAtOnce() throws {
        func answer(_ json: String) throws -> String? {
            let call = try VarlinkCall(decoding: Array(json.utf8))
            return service.answerImmediately(call, from: Caller(pid: 1, uid: 1, gid: 1))
                .map { String(decoding: $0.dropLast(), as: UTF8.self) }
        }
        let info = try answer(#"{"method":"org.varlink.service.GetInfo"}"#)
        #expect(info?.contains(#""interfaces":["org.varlink.service","a.b","a.b.c"]"#) == true, "\(info ?? "nil")")
        #expect(info?.contains(#""product":"p""#) == true)
        let description = try answer(
            #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"a.b"}}"#)
        #expect(description == #"{"parameters":{"description":""}}"#)
        let unknown = try answer(
            #"{"method":"org.varlink.service.GetInterfaceDescription","parameters":{"interface":"x.y"}}"#)
        #expect(unknown?.contains("org.varlink.service.InterfaceNotFound") == true, "\(unknown ?? "nil")")
        let method = try answer(#"{"method":"org.varlink.service.Nothing"}"#)
        #expect(method?.contains("org.varlink.service.MethodNotFound") == true, "\(method ?? "nil")")
        #expect(try answer(#"{"method":"org.varlink.service.GetInfo","oneway":true}"#) == nil)
    }

    @Test func anUpgradeIsNeverAnsweredAtOnce() throws {
        let call = try VarlinkCall(decoding: Array(#"{"method":"a.b.M","upgrade":true}"#.utf8))
        #expect(service.answerImmediately(call, from: Caller(pid: 1, uid: 1, gid: 1)) == nil)
    }
}
