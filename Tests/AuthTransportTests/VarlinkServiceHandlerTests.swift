// SPDX-License-Identifier: Apache-2.0
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
        func handle(_ call: VarlinkCall, from peer: PeerCredentials, replies: VarlinkReplies) async {}
        func answerImmediately(_ call: VarlinkCall, from peer: PeerCredentials) -> [UInt8]? { Array(name.utf8) }
    }

    let service = VarlinkServiceHandler(
        vendor: "v", product: "p", version: "1", url: "u",
        interfaces: [
            (name: "a.b", description: "", handler: NamedHandler(name: "a.b")),
            (name: "a.b.c", description: "", handler: NamedHandler(name: "a.b.c")),
        ])

    @Test(arguments: [
        ("a.b.M", "a.b"), ("a.b.c.M", "a.b.c"), ("a.b.x.M", nil), ("a.bM", nil), ("a.b.", "a.b"), ("a.b", nil),
        ("org.varlink.service.GetInfo", nil), ("M", nil),
    ])
    func answersThroughTheInterfaceOfTheMethod(method: String, interface: String?) throws {
        let call = try VarlinkCall(decoding: Array(#"{"method":"\#(method)"}"#.utf8))
        #expect(call.interface.flatMap { ["a.b", "a.b.c"].contains($0) ? $0 : nil } == interface)
        let answer = service.answerImmediately(call, from: PeerCredentials(pid: 1, uid: 1, gid: 1))
        #expect(answer.map { String(decoding: $0, as: UTF8.self) } == interface)
    }

    @Test func anUpgradeIsNeverAnsweredAtOnce() throws {
        let call = try VarlinkCall(decoding: Array(#"{"method":"a.b.M","upgrade":true}"#.utf8))
        #expect(service.answerImmediately(call, from: PeerCredentials(pid: 1, uid: 1, gid: 1)) == nil)
    }
}
