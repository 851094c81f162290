// SPDX-License-Identifier: Apache-2.0
import Foundation
import Testing

@testable import AuthCore

@Suite("JSONValue: strict RFC 8259 parsing")
struct JSONValueTests {
    private func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try JSONValue(parsing: Array(text.utf8))
    }

    @Test func readsEveryKindOfValue() throws {
        let value = try parse(
            #" {"n": null, "t": true, "f": false, "i": -12, "d": 1.5e3, "s": "a\"b\\c\/d\n\u00e9\ud83d\ude00", "#
                + #""a": [1, [], {}], "o": {"k": "v"}} "#)
        #expect(value["n"] == .null)
        #expect(value["t"] == .bool(true))
        #expect(value["f"] == .bool(false))
        #expect(value["i"]?.int == -12)
        #expect(value["d"]?.double == 1500)
        #expect(value["s"]?.string == "a\"b\\c/d\né😀")
        #expect(value["a"] == .array([.number("1"), .array([]), .object([:])]))
        #expect(value["o"]?.stringMap == ["k": "v"])
    }

    @Test func keepsNumbersExact() throws {
        let value = try parse(#"{"g": 18446744073709551615, "x": 9007199254740993}"#)
        #expect(value["g"]?.uint64 == UInt64.max)
        #expect(value["x"]?.uint64 == 9_007_199_254_740_993)
        #expect(value["x"]?.double == 9_007_199_254_740_992)
        #expect(try parse("1.5")["x"] == nil)
        #expect(try parse("-1").uint64 == nil)
        #expect(try parse("1.0").uint64 == nil)
    }

    @Test func theLastOfTwoSameNamedMembersWins() throws {
        #expect(try parse(#"{"a": 1, "a": 2}"#)["a"]?.int == 2)
    }

    /// `read(_:)` hands an object's members over, in order, what `init(parsing:)` collects: the last of two
    /// same-named members is the one the dictionary keeps.
    @Test(arguments: [
        #"{}"#, #" { "a" : 1 , "b" : [true, null], "a" : {"c": "d"} } "#, #"{"method":"m","parameters":{"g":"x"}}"#,
    ])
    func readHandsOverWhatTheDictionaryHolds(_ text: String) throws {
        var handed: [(String, JSONValue)] = []
        let isObject = try Self.readMembers(text) { handed.append(($0.string, $1)) }
        #expect(isObject)
        let last = Dictionary(handed, uniquingKeysWith: { _, last in last })
        #expect(JSONValue.object(last) == (try parse(text)))
    }

    /// A member's name matches a literal whether it is written plainly, with escapes, or in UTF-8 beyond ASCII,
    /// and only that literal.
    @Test(arguments: [
        (#"{"group":1}"#, "group"), (#"{"gr\u006fup":1}"#, "group"), (#"{"gr\"oup":1}"#, #"gr"oup"#),
        (#"{"":1}"#, ""), (#"{"grüße":1}"#, "grüße"),
    ])
    func aMemberNameMatchesItsLiteral(_ text: String, _ name: String) throws {
        var names: [String] = []
        var matched: [Bool] = []
        _ = try Self.readMembers(text) { member, _ in
            names.append(member.string)
            matched.append(Self.matches(member, name))
            if case "grou" = member { Issue.record("a prefix matched") }
            if case "groupe" = member { Issue.record("a longer literal matched") }
        }
        #expect(names == [name])
        #expect(matched == [true])
    }

    /// The literals of `aMemberNameMatchesItsLiteral`, as patterns (a pattern is a literal, not a variable).
    private static func matches(_ member: JSONMemberName, _ name: String) -> Bool {
        switch name {
        case "group": if case "group" = member { return true }
        case #"gr"oup"#: if case #"gr"oup"# = member { return true }
        case "": if case "" = member { return true }
        case "grüße": if case "grüße" = member { return true }
        default: break
        }
        return false
    }

    /// A reader's `stringMap()` gives an object of strings (the last of a name counts), and nil for anything else,
    /// parsing it all the same: the member after it is read.
    @Test(
        arguments: [
            (#"{"a":"x","b":"y","a":"z"}"#, ["a": "z", "b": "y"]), (#"{}"#, [:]), (#"{"a":"x","b":1}"#, nil),
            (#"{"a":{"b":"c"}}"#, nil), (#"["a"]"#, nil), (#""a""#, nil), ("null", nil),
        ] as [(String, [String: String]?)])
    func aReaderReadsAnObjectOfStrings(_ value: String, _ map: [String: String]?) throws {
        let text = #"{"map":"# + value + #","after":true}"#
        var read: [String: String]?
        var after: JSONValue?
        try Array(text.utf8).withUnsafeBufferPointer { bytes throws(JSONSyntaxError) in
            try JSONValue.read(bytes) { document throws(JSONSyntaxError) in
                try document.members { name, member throws(JSONSyntaxError) in
                    switch name {
                    case "map": read = try member.stringMap()
                    case "after": after = try member.value()
                    default: break
                    }
                }
            }
        }
        #expect(read == map)
        #expect(after == .bool(true))
    }

    @Test(arguments: ["[1]", "1", #""a""#, "null"])
    func readSaysWhenTheDocumentIsNoObject(_ text: String) throws {
        let isObject = try Self.readMembers(text) { _, _ in Issue.record("a member of no object") }
        #expect(!isObject)
    }

    @Test(arguments: ["", "{", #"{"a":1,}"#, #"{"a":1} x"#, "[1,]", #"{"a":1e400}"#])
    func readRefusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONSyntaxError.self) {
            try Self.readMembers(text) { _, _ in }
        }
    }

    /// Reads `text` with `JSONValue.read`, handing each member of an object to `member`, each value whole;
    /// false when the document is no object.
    @discardableResult
    private static func readMembers(_ text: String, _ member: (JSONMemberName, JSONValue) -> Void) throws -> Bool {
        var isObject = true
        try Array(text.utf8).withUnsafeBufferPointer { bytes throws(JSONSyntaxError) in
            try JSONValue.read(bytes) { document throws(JSONSyntaxError) in
                guard document.isObject else {
                    isObject = false
                    return
                }
                try document.members { name, value throws(JSONSyntaxError) in member(name, try value.value()) }
            }
        }
        return isObject
    }

    @Test func stringMapRefusesOtherValues() throws {
        #expect(try parse(#"{"a": "x", "b": 1}"#).stringMap == nil)
        #expect(try parse(#"["x"]"#).stringMap == nil)
        #expect(try parse(#"{}"#).stringMap == [:])
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, #"{a:1}"#, "01", "-", "1.", ".5", "1e", "+1", "1e+",
        "NaN", "Infinity", "1e400", "-1E309", "tru", "nul", "[1 2]", #""abc"#, #""\x""#, #""\u12""#, #""\u12G4""#,
        "\"a\tb\"",
        #""\ud800""#, #""\udc00""#, #""\ud800\u0041""#, "{} {}", "[1]]", "'a'", "/* */1",
    ])
    func refusesWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONSyntaxError.self) { try parse(text) }
    }

    @Test func refusesInvalidUTF8InAString() {
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: [0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: [0x22, 0x5C, 0x6E, 0xFF, 0x22]) }
    }

    /// Strings are scanned eight bytes at a time: a quote, an escape, a control character, a non-ASCII character
    /// or an invalid byte is found at every position of a long string, in every alignment.
    @Test func findsWhatEndsOrBreaksARunAtEveryPosition() throws {
        let plain = Array(repeating: UInt8(ascii: "a"), count: 40)
        for prefix in 0..<4 {
            for position in 0..<plain.count {
                func document(_ inserted: [UInt8]) -> [UInt8] {
                    var string = plain
                    string.replaceSubrange(position..<position + 1, with: inserted)
                    return Array(repeating: UInt8(ascii: " "), count: prefix) + [0x22] + string + [0x22]
                }
                func expected(_ inserted: String) -> JSONValue {
                    .string(
                        String(repeating: "a", count: position) + inserted
                            + String(repeating: "a", count: plain.count - position - 1))
                }
                #expect(try JSONValue(parsing: document(Array(#"\""#.utf8))) == expected("\""))
                #expect(try JSONValue(parsing: document(Array(#"\\"#.utf8))) == expected("\\"))
                #expect(try JSONValue(parsing: document(Array(#"\n"#.utf8))) == expected("\n"))
                #expect(try JSONValue(parsing: document(Array(#"\u0041"#.utf8))) == expected("A"))
                #expect(try JSONValue(parsing: document(Array("é€😀".utf8))) == expected("é€😀"))
                #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: document([0x1F])) }
                #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: document([0xFF])) }
                #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: document([0xC3, 0x28])) }
                #expect(throws: JSONSyntaxError.self) {
                    try JSONValue(parsing: Array(document([UInt8(ascii: "a")]).prefix(prefix + 1 + position)))
                }
            }
        }
    }

    /// Skipping a value checks it exactly as parsing it does, and says where it lies.
    @Test(arguments: [
        "", " ", "{", "}", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, "01", "-", "1e", "1e400", "tru", "[1 2]", #""abc"#,
        #""\x""#, #""\u12G4""#, "\"a\tb\"", #""\ud800""#, "{} {}", "[1]]", #"{"a":[{"b":"\u00e9\n"},-1.5e3,true]}"#,
        #"  {"a" : "x"  }  "#, #"[]"#, #""plain""#, #""é""#, "12", "null", "[[[]]]",
        String(repeating: "[", count: JSONValue.maximumDepth) + String(repeating: "]", count: JSONValue.maximumDepth),
        String(repeating: "[", count: JSONValue.maximumDepth + 1)
            + String(repeating: "]", count: JSONValue.maximumDepth + 1),
    ])
    func skippingAcceptsWhatParsingAccepts(_ text: String) {
        let bytes = Array(text.utf8)
        let parses = (try? JSONValue(parsing: bytes)) != nil
        var span: Range<Int>?
        let skips =
            (try? bytes.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) in
                try JSONValue.read(buffer) { value throws(JSONSyntaxError) in span = try value.skip() }
            }) != nil
        #expect(skips == parses, "\(text)")
        if skips, let span {
            #expect(String(decoding: bytes[span], as: UTF8.self) == text.trimmingCharacters(in: .whitespaces))
        }
        for invalid: [UInt8] in [[0x22, 0xC3, 0x28, 0x22], [0x5B, 0x22, 0xFF, 0x22, 0x5D]] {
            #expect(throws: JSONSyntaxError.self) {
                try invalid.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) in
                    try JSONValue.read(buffer) { value throws(JSONSyntaxError) in _ = try value.skip() }
                }
            }
        }
    }

    /// A plain string is handed over as its place; any other value is left to be read.
    @Test(
        arguments: [
            (#""com.exponea.Auth.GetToken""#, "com.exponea.Auth.GetToken"), (#""""#, ""), (#""a\u0041""#, nil),
            (#""é""#, nil), ("12", nil), ("null", nil), (#"["a"]"#, nil),
        ] as [(String, String?)])
    func aPlainStringIsHandedOverAsItsPlace(_ text: String, _ plain: String?) throws {
        let bytes = Array(text.utf8)
        var found: String?
        var value: JSONValue?
        try bytes.withUnsafeBufferPointer { buffer throws(JSONSyntaxError) in
            try JSONValue.read(buffer) { reader throws(JSONSyntaxError) in
                if let span = reader.plainString() {
                    found = String(decoding: buffer[span], as: UTF8.self)
                } else {
                    value = try reader.value()
                }
            }
        }
        #expect(found == plain)
        #expect((value == nil) == (plain != nil))
        if plain == nil { #expect(value == (try JSONValue(parsing: bytes))) }
    }

    /// An integer literal is in range without strtod up to 299 digits; longer ones are checked as before.
    @Test func anIntegerBeyondEveryDoubleIsRefusedAndALongOneThatFitsIsRead() throws {
        let fits = "9" + String(repeating: "0", count: 298)
        #expect(try parse(fits) == .number(fits))
        #expect(try parse(fits).double == Double(fits))
        #expect(throws: JSONSyntaxError.self) { try parse("1" + String(repeating: "0", count: 309)) }
        #expect(throws: JSONSyntaxError.self) { try parse("-2" + String(repeating: "0", count: 320)) }
        #expect(try parse("1" + String(repeating: "0", count: 307)).double == 1e307)
    }

    @Test func boundsTheNesting() throws {
        let deepest =
            String(repeating: "[", count: JSONValue.maximumDepth)
            + String(repeating: "]", count: JSONValue.maximumDepth)
        _ = try parse(deepest)
        #expect(throws: JSONSyntaxError.self) { try parse("[" + deepest + "]") }
        #expect(throws: JSONSyntaxError.self) { try parse(String(repeating: #"{"a":"#, count: 100_000)) }
    }

    @Test func saysWhereTheProblemIs() {
        #expect(throws: JSONSyntaxError(offset: 7, problem: "expected ',' or '}'")) { try parse(#"{"a":1 "b":2}"#) }
    }

    /// Foundation's parser accepts a trailing comma, which RFC 8259 does not allow; this parser refuses it.
    @Test(arguments: ["[1,]", #"{"a":1,}"#])
    func refusesTheTrailingCommaFoundationAccepts(_ text: String) throws {
        #expect(throws: JSONSyntaxError.self) { try parse(text) }
        _ = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
    }

    /// Otherwise the same documents are accepted as Foundation's parser accepts, and read to the same values.
    @Test(arguments: [
        #"{"exp":1767225600,"ids":{"registered":"a@b.c","cookie":"0f9e"}}"#,
        #"{"alg":"HS512","typ":"JWT","kid":"k-2026"}"#,
        #"{"a":[1,2.5,-0,1E2,1e-2,true,false,null,"\u0000\u001f\u2028"],"b":{"c":{"d":[]}}}"#,
        #"  {"a" : "x"  }  "#, #"[]"#, #""lone""#, "12", "-0.0", "01", #"{"a":1,"a":2}"#, "1e400", "-1e-400",
        "123456789012345678901234567890", "1.", #""\u00""#,
    ])
    func agreesWithJSONSerialization(_ text: String) {
        let ours = try? parse(text)
        let foundations = try? JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        #expect((ours == nil) == (foundations == nil), "\(text)")
        if let ours, let foundations {
            #expect(Self.matches(ours, foundations), "\(text)")
        }
    }

    private static func matches(_ ours: JSONValue, _ theirs: Any) -> Bool {
        switch ours {
        case .null: return theirs is NSNull
        case .bool(let value): return (theirs as? Bool) == value
        case .number: return (theirs as? NSNumber)?.doubleValue == ours.double
        case .string(let value): return (theirs as? String) == value
        case .array(let elements):
            guard let array = theirs as? [Any], array.count == elements.count else { return false }
            return zip(elements, array).allSatisfy { matches($0, $1) }
        case .object(let members):
            guard let object = theirs as? [String: Any], object.count == members.count else { return false }
            return members.allSatisfy { name, value in object[name].map { matches(value, $0) } ?? false }
        }
    }
}
