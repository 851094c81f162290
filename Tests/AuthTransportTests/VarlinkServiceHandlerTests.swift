// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Testing

@testable import AuthTransport

/// `VarlinkServiceHandler` dispatches a call once, to the interface whose name is all of the method's up to its
/// last dot, and to no other.
@Suite("Varlink service handler", .offPool)
struct VarlinkServiceHandlerTests {
    /// Answers every call at once with its own name.
    struct NamedHandler: VarlinkCallHandler {
        let name: String
        func dispatch(_ call: VarlinkCall, from peer: Caller, connection: VarlinkConnectionID) -> VarlinkDispatch {
            .answered(Array(name.utf8))
        }
    }

    /// What `call` is answered with now, as text; nil when it runs later, or wants no reply.
    func answered(_ call: VarlinkCall) -> String? {
        guard
            case .answered(let reply?) = service.dispatch(
                call, from: Caller(pid: 1, uid: 1, gid: 1), connection: .next())
        else { return nil }
        return String(decoding: reply.last == 0 ? reply.dropLast() : reply[...], as: UTF8.self)
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
        let answer = answered(call)
        if let interface {
            #expect(answer == interface)
        } else {
            #expect(answer?.contains("org.varlink.service.InterfaceNotFound") == true, "\(answer ?? "nil")")
        }
    }

    /// `org.varlink.service` is answered at once from what the handler holds: a client's first call (`authctl
    /// status` asks GetInfo) needs no other thread. A oneway call gets nothing.
    @Test func theServiceInterfaceIsAnsweredAtOnce() throws {
        func answer(_ json: String) throws -> String? { answered(try VarlinkCall(decoding: Array(json.utf8))) }
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

    @Test func anUpgradeIsRefusedAtOnce() throws {
        let call = try VarlinkCall(decoding: Array(#"{"method":"a.b.M","upgrade":true}"#.utf8))
        let answer = answered(call)
        #expect(answer?.contains("org.varlink.service.MethodNotImplemented") == true, "\(answer ?? "nil")")
    }
}
