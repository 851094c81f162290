// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import AuthProtocol

/// `PlainCall` reads the common shape of a call by hand: whatever it accepts, the JSON reader must accept too and
/// read the same way, and what it refuses goes to that reader.
@Suite("A plain call, read by hand as the JSON reader reads it")
struct PlainCallTests {
    static let getToken = #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#
    static let setToken =
        #"{"method":"com.exponea.Auth.SetToken","parameters":{"group":"shop","token":"aGk.e30.c2ln"}}"#

    /// The call `PlainCall` reads from `message`, checked against the JSON reader's reading; nil when it refuses.
    func plainCall(_ message: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) -> PlainCall? {
        guard let plain = message.withUnsafeBufferPointer(PlainCall.init) else { return nil }
        guard let read = try? VarlinkCall(decodingAnyShape: message) else {
            Issue.record(
                "PlainCall accepted what the JSON reader refuses: \(Self.text(message))", sourceLocation: sourceLocation
            )
            return plain
        }
        #expect(read.methodName == .bytes(plain.method), sourceLocation: sourceLocation)
        #expect(!read.oneway && !read.more && !read.upgrade, sourceLocation: sourceLocation)
        #expect(read.parameterBytes == plain.parameters, sourceLocation: sourceLocation)
        #expect(read.plainStrings?.first.name == plain.lone.first.name, sourceLocation: sourceLocation)
        #expect(read.plainStrings?.first.value == plain.lone.first.value, sourceLocation: sourceLocation)
        #expect(read.plainStrings?.second?.name == plain.lone.second?.name, sourceLocation: sourceLocation)
        #expect(read.plainStrings?.second?.value == plain.lone.second?.value, sourceLocation: sourceLocation)
        return plain
    }

    static func text(_ message: [UInt8]) -> String { String(decoding: message, as: UTF8.self).debugDescription }

    @Test func readsTheCallsTheClientsSend() throws {
        for message in [Self.getToken, Self.setToken] {
            let plain = try #require(plainCall(Array(message.utf8)))
            let call = try VarlinkCall(decoding: Array(message.utf8))
            #expect(call.method.hasPrefix("com.exponea.Auth."))
            #expect(Array(message.utf8)[plain.method].elementsEqual(call.method.utf8))
        }
        let call = try VarlinkCall(decoding: Array(Self.setToken.utf8))
        #expect(try call.stringParameters("group", "token") == ("shop", "aGk.e30.c2ln"))
    }

    @Test func readsWhitespaceBetweenTheTokens() throws {
        let spaced =
            "\r\n{ \"method\" :\t\"com.exponea.Auth.GetToken\" ,\n\"parameters\"\r: { \"group\" : \"shop\" } } \n"
        #expect(plainCall(Array(spaced.utf8)) != nil)
        #expect(try VarlinkCall(decoding: Array(spaced.utf8)).stringParameter("group") == "shop")
    }

    /// Other shapes go to the JSON reader: other members or their order, escapes, text beyond ASCII, parameters
    /// that are not one or two plain strings, no JSON at all.
    @Test(arguments: [
        #"{"parameters":{"group":"shop"},"method":"com.exponea.Auth.GetToken"}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"},"more":true}"#,
        #"{"method":"com.exponea.Auth.GetToken","oneway":true,"parameters":{"group":"shop"}}"#,
        #"{"method":"com.exponea.Auth.Get\u0054oken","parameters":{"group":"shop"}}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"gr\u006fup":"shop"}}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"sh\"op"}}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shöp"}}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{}}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":null}"#,
        #"{"method":"com.exponea.Auth.GetToken"}"#,
        #"{"method":"com.exponea.Auth.WaitForToken","parameters":{"group":"shop","timeoutMs":5}}"#,
        #"{"method":"x.Y","parameters":{"a":"1","b":"2","c":"3"}}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}x"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}"#,
        #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"shop",}}"#,
        #"{"method" "com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#,
        #"{"methods":"com.exponea.Auth.GetToken","parameters":{"group":"shop"}}"#,
        "",
    ])
    func leavesOtherShapesToTheJSONReader(_ message: String) {
        #expect(plainCall(Array(message.utf8)) == nil)
    }

    /// A member named twice is read as the JSON reader reads it (and its value then taken as the parameters decode).
    @Test func aParameterNamedTwiceIsReadAsTheJSONReaderReadsIt() throws {
        let twice = #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"a","group":"shop"}}"#
        #expect(plainCall(Array(twice.utf8)) != nil)
        #expect(try VarlinkCall(decoding: Array(twice.utf8)).stringParameter("group") == "shop")
    }

    /// Every message one edit away from the two calls (a byte replaced by one that matters to JSON, a byte taken
    /// out, a space put in, the message cut short): whatever `PlainCall` accepts, the JSON reader reads the same.
    @Test func everyMessageOneEditAwayIsReadAsTheJSONReaderReadsIt() {
        let replacements: [UInt8] = [
            0x22, 0x5C, 0x7B, 0x7D, 0x2C, 0x3A, 0x20, 0x09, 0x0A, 0x00, 0x1F, 0x7F, 0x80, 0xC3, 0x61, 0x5B, 0x6E,
        ]
        var accepted = 0
        for base in [Self.getToken, Self.setToken].map({ Array($0.utf8) }) {
            for position in base.indices {
                for byte in replacements where byte != base[position] {
                    var message = base
                    message[position] = byte
                    if plainCall(message) != nil { accepted += 1 }
                }
                var removed = base
                removed.remove(at: position)
                if plainCall(removed) != nil { accepted += 1 }
                var spaced = base
                spaced.insert(0x20, at: position)
                if plainCall(spaced) != nil { accepted += 1 }
                if plainCall(Array(base[..<position])) != nil { accepted += 1 }
            }
        }
        // Some edits keep the shape (a letter of a value, a space between tokens): the check above ran on them.
        #expect(accepted > 100)
    }
}
