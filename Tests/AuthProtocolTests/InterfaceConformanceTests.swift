// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Foundation
import Testing

/// The interface file and the Swift message types cannot drift apart: every method of
/// `com.exponea.Auth.varlink` is checked, both ways, against the types the daemon decodes and encodes.
///
/// For each method a value with every declared field is built from the file, decoded into the Swift type by the
/// daemon's own decoder (parameters) or by `JSONDecoder` (results, as the client reads them), encoded again the
/// way it goes on the wire, and the JSON compared with the file: the same member names, no more and no fewer,
/// each of the declared type. The Swift type's stored properties (its `Mirror`) must be the declared fields too,
/// so an optional field the file lacks is caught even though it decodes as nil.
@Suite("com.exponea.Auth.varlink against the Swift message types")
struct InterfaceConformanceTests {
    /// Which Swift types carry each method's parameters and result. A method added to either side without a
    /// row here fails ``everyMethodHasARowBothWays()``.
    static var messageTypes: [String: (parameters: any Codable.Type, result: any Codable.Type)] {
        [
            "SetToken": (SetTokenParameters.self, SetTokenResult.self),
            "GetToken": (GroupParameters.self, GetTokenResult.self),
            "Preflight": (GroupParameters.self, PreflightResult.self),
            "ReportAuthFailure": (ReportAuthFailureParameters.self, ReportAuthFailureResult.self),
            "WaitForToken": (WaitForTokenParameters.self, WaitForTokenResult.self),
            "IdentifyCustomer": (IdentifyCustomerParameters.self, GenerationResult.self),
            "Anonymize": (GroupParameters.self, ClearResult.self),
            "StopIntegration": (GroupParameters.self, ClearResult.self),
            "ClearLocalCustomerData": (GroupParameters.self, EmptyPayload.self),
            "Subscribe": (GroupParameters.self, SubscribeResult.self),
            "AcknowledgeFlush": (AcknowledgeFlushParameters.self, EmptyPayload.self),
            "ClaimRefresh": (ClaimRefreshParameters.self, ClaimRefreshResult.self),
            "ReleaseRefresh": (ReleaseRefreshParameters.self, ReleaseRefreshResult.self),
            "ListGroups": (EmptyPayload.self, ListGroupsResult.self),
            "CountGroups": (EmptyPayload.self, CountGroupsResult.self),
            "WhoAmI": (EmptyPayload.self, WhoAmIResult.self),
        ]
    }

    static let interface = try! VarlinkIDL(parsing: AuthInterface.description)

    @Test func everyMethodHasARowBothWays() {
        let declared = Set(Self.interface.methods.keys)
        #expect(declared == Set(Self.messageTypes.keys))
        #expect(declared == Set(AuthInterface.Method.allCases.map(\.rawValue)))
        #expect(Self.interface.name == AuthInterface.name)
    }

    @Test(arguments: InterfaceConformanceTests.messageTypes.keys.sorted())
    func parametersAndResultMatchTheFile(_ method: String) throws {
        let types = try #require(Self.messageTypes[method])
        let declared = try #require(Self.interface.methods[method])
        let problems =
            Self.parameterProblems(types.parameters, declared.input, in: Self.interface)
            + Self.resultProblems(types.result, declared.output, in: Self.interface)
        #expect(problems.isEmpty, "\(method): \(problems.joined(separator: "; "))")
    }

    /// The named types whose Swift twins are not a method's top level: their stored properties, and the enums'
    /// cases, are the declared ones.
    @Test func namedTypesAndEnumsMatch() throws {
        let idl = Self.interface
        let claims = try JSONDecoder().decode(
            ClaimsPayload.self, from: Data(idl.sample(of: .named("Claims")).serialized.utf8))
        #expect(Self.labels(of: claims) == idl.fieldNames(of: "Claims"))
        let summary = try JSONDecoder().decode(
            GroupSummary.self, from: Data(idl.sample(of: .named("GroupSummary")).serialized.utf8))
        #expect(Self.labels(of: summary) == idl.fieldNames(of: "GroupSummary"))
        let event = try JSONDecoder().decode(
            AuthEvent.self, from: Data(idl.sample(of: .named("Event")).serialized.utf8))
        #expect(Self.labels(of: event) == idl.fieldNames(of: "Event"))
        let access = try JSONDecoder().decode(
            GroupAccess.self, from: Data(idl.sample(of: .named("GroupAccess")).serialized.utf8))
        #expect(Self.labels(of: access) == idl.fieldNames(of: "GroupAccess"))
        let flush = UnconfirmedFlush(pid: 1, reason: .dropped)
        #expect(Self.labels(of: flush) == idl.fieldNames(of: "UnconfirmedFlush"))

        #expect(idl.types["TokenState"] == .enumeration(TokenState.allCases.map(\.rawValue)))
        guard case .structure(let flushFields)? = idl.types["UnconfirmedFlush"],
            let reason = flushFields.first(where: { $0.name == "reason" })
        else {
            Issue.record("UnconfirmedFlush has no reason")
            return
        }
        #expect(reason.type == .enumeration([UnconfirmedFlush.Reason.timedOut, .dropped].map(\.rawValue)))
        guard case .structure(let eventFields)? = idl.types["Event"],
            let kind = eventFields.first(where: { $0.name == "kind" })
        else {
            Issue.record("Event has no kind")
            return
        }
        let kinds: [AuthEvent.Kind] = [.tokenRefreshed, .jwtError, .flushRequested, .cleared, .state]
        #expect(kind.type == .enumeration(kinds.map(\.rawValue)))
    }

    /// Every error of the interface, with the parameters the daemon sends (all strings), and nothing the file
    /// does not declare.
    @Test func errorsMatch() {
        let errors: [VarlinkError] = [
            .malformedToken(code: "", message: ""), .invalidGroupName(message: ""), .permissionDenied(group: ""),
            .storeFailure(message: ""), .tooManySubscribers(group: ""), .subscriptionDropped(group: ""),
        ]
        let sent = Dictionary(
            uniqueKeysWithValues: errors.map { (String($0.name.split(separator: ".").last!), $0.parameters) })
        #expect(Set(sent.keys) == Set(Self.interface.errors.keys))
        for (name, fields) in Self.interface.errors {
            #expect(Set(fields.map(\.name)) == Set(sent[name]?.keys ?? [:].keys), "\(name)")
            #expect(fields.allSatisfy { $0.type == .string }, "\(name)")
        }
    }

    /// The check finds drift: a renamed result field, a changed parameter type, a dropped field, an added one and
    /// a changed type in a nested struct, each in a copy of the file.
    @Test func aChangedFileIsCaught() throws {
        let drifts = [
            ("leaseMs: ?int", "leaseMillis: ?int", "ClaimRefresh"),
            ("after: int, timeoutMs: int", "after: int, timeoutMs: float", "WaitForToken"),
            ("generation: int, claims: Claims)", "claims: Claims)", "SetToken"),
            ("refreshClaimed: ?bool", "refreshClaimed: ?bool,\n  extra: ?string", "Subscribe"),
            ("hasToken: bool", "hasToken: string", "ListGroups"),
        ]
        for (original, changed, method) in drifts {
            let text = AuthInterface.description
            #expect(text.contains(original))
            let idl = try VarlinkIDL(parsing: text.replacingOccurrences(of: original, with: changed))
            let types = try #require(Self.messageTypes[method])
            let declared = try #require(idl.methods[method])
            let problems =
                Self.parameterProblems(types.parameters, declared.input, in: idl)
                + Self.resultProblems(types.result, declared.output, in: idl)
            #expect(!problems.isEmpty, "\(method): \(changed)")
        }
    }

    // MARK: Checks

    /// Decodes a full value built from the file with the daemon's decoder, encodes it again, and compares.
    static func parameterProblems<T: Codable>(_ type: T.Type, _ fields: [VarlinkIDL.Field], in idl: VarlinkIDL)
        -> [String]
    {
        let sample = idl.sample(of: .structure(fields))
        let call = #"{"method":"com.exponea.Auth.X","parameters":\#(sample.serialized)}"#
        let decoded: T
        do {
            decoded = try VarlinkCall(decoding: Array(call.utf8)).parameters(T.self)
        } catch {
            return ["the daemon does not decode the declared parameters: \(error)"]
        }
        var problems = labelProblems(decoded, fields, "parameters")
        do {
            let encoded = try JSONValue(parsing: Array(JSONEncoder().encode(decoded)))
            problems += idl.problems(encoded, .structure(fields), at: "parameters", complete: true)
        } catch {
            problems.append("parameters do not encode: \(error)")
        }
        return problems
    }

    /// Decodes a full result built from the file as the client does, encodes it as the daemon replies, and
    /// compares.
    static func resultProblems<T: Codable>(_ type: T.Type, _ fields: [VarlinkIDL.Field], in idl: VarlinkIDL)
        -> [String]
    {
        let sample = idl.sample(of: .structure(fields))
        let decoded: T
        do {
            decoded = try JSONDecoder().decode(T.self, from: Data(sample.serialized.utf8))
        } catch {
            return ["the result type does not decode the declared result: \(error)"]
        }
        var problems = labelProblems(decoded, fields, "result")
        do {
            let reply = try JSONValue(parsing: VarlinkReplyEncoder.reply(decoded).dropLast())
            problems += idl.problems(reply["parameters"] ?? .null, .structure(fields), at: "result", complete: true)
        } catch {
            problems.append("the result does not encode: \(error)")
        }
        return problems
    }

    static func labels(of value: Any) -> Set<String> {
        Set(Mirror(reflecting: value).children.compactMap(\.label))
    }

    static func labelProblems(_ value: Any, _ fields: [VarlinkIDL.Field], _ what: String) -> [String] {
        let swift = labels(of: value)
        let declared = Set(fields.map(\.name))
        guard swift != declared else { return [] }
        return [
            "\(what): Swift \(type(of: value)) has \(swift.subtracting(declared).sorted()) undeclared, "
                + "lacks \(declared.subtracting(swift).sorted())"
        ]
    }
}

/// A small parser of the Varlink interface definition language, as much as com.exponea.Auth uses: types,
/// methods and errors; `?`, `[]` and `[string]` types; enums and nested structs.
struct VarlinkIDL {
    indirect enum TypeReference: Equatable, Sendable {
        case bool, int, float, string, object
        case optional(TypeReference)
        case array(TypeReference)
        case map(TypeReference)
        case named(String)
        case enumeration([String])
        case structure([Field])
    }

    struct Field: Equatable, Sendable {
        var name: String
        var type: TypeReference
    }

    struct SyntaxError: Error, CustomStringConvertible {
        var description: String
    }

    var name = ""
    var types: [String: TypeReference] = [:]
    var methods: [String: (input: [Field], output: [Field])] = [:]
    var errors: [String: [Field]] = [:]

    init(parsing text: String) throws {
        var tokens = Self.tokenize(text)[...]
        func next() throws -> String {
            guard let token = tokens.popFirst() else { throw SyntaxError(description: "unexpected end") }
            return token
        }
        func expect(_ token: String) throws {
            let found = try next()
            guard found == token else { throw SyntaxError(description: "expected \(token), found \(found)") }
        }
        func parseType() throws -> TypeReference {
            let token = try next()
            switch token {
            case "?": return .optional(try parseType())
            case "[":
                if tokens.first == "]" {
                    try expect("]")
                    return .array(try parseType())
                }
                try expect("string")
                try expect("]")
                return .map(try parseType())
            case "(": return try parseParenthesized()
            case "bool": return .bool
            case "int": return .int
            case "float": return .float
            case "string": return .string
            case "object": return .object
            default: return .named(token)
            }
        }
        // After "(": an enum (names only) or a struct (name: type).
        func parseParenthesized() throws -> TypeReference {
            var fields: [Field] = []
            var names: [String] = []
            while tokens.first != ")" {
                let name = try next()
                if tokens.first == ":" {
                    try expect(":")
                    fields.append(Field(name: name, type: try parseType()))
                } else {
                    names.append(name)
                }
                if tokens.first == "," { try expect(",") }
            }
            try expect(")")
            guard names.isEmpty || fields.isEmpty else { throw SyntaxError(description: "mixed enum and struct") }
            return names.isEmpty ? .structure(fields) : .enumeration(names)
        }
        func parseStruct() throws -> [Field] {
            try expect("(")
            guard case .structure(let fields) = try parseParenthesized() else {
                throw SyntaxError(description: "expected fields")
            }
            return fields
        }
        while let keyword = tokens.popFirst() {
            switch keyword {
            case "interface": name = try next()
            case "type":
                let typeName = try next()
                try expect("(")
                types[typeName] = try parseParenthesized()
            case "method":
                let method = try next()
                let input = try parseStruct()
                try expect("->")
                methods[method] = (input, try parseStruct())
            case "error": errors[try next()] = try parseStruct()
            default: throw SyntaxError(description: "unexpected \(keyword)")
            }
        }
    }

    private static func tokenize(_ text: String) -> [String] {
        var tokens: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let code = line.prefix { $0 != "#" }
            var word = ""
            var characters = code.makeIterator()
            var pending: Character? = nil
            while let character = pending ?? characters.next() {
                pending = nil
                if character.isLetter || character.isNumber || character == "_" || character == "." {
                    word.append(character)
                    continue
                }
                if !word.isEmpty {
                    tokens.append(word)
                    word = ""
                }
                if character == "-" {
                    let following = characters.next()
                    if following == ">" { tokens.append("->") } else { pending = following }
                } else if !character.isWhitespace {
                    tokens.append(String(character))
                }
            }
            if !word.isEmpty { tokens.append(word) }
        }
        return tokens
    }

    func fieldNames(of type: String) -> Set<String> {
        guard case .structure(let fields)? = types[type] else { return [] }
        return Set(fields.map(\.name))
    }

    /// A value of `type` with every field, optional ones included, set.
    func sample(of type: TypeReference) -> JSONValue {
        switch type {
        case .bool: .bool(true)
        case .int: .number("7")
        case .float: .number("1.5")
        case .string: .string("s")
        case .object: .object([:])
        case .optional(let wrapped): sample(of: wrapped)
        case .array(let element): .array([sample(of: element)])
        case .map(let value): .object(["k": sample(of: value)])
        case .named(let name): types[name].map(sample(of:)) ?? .null
        case .enumeration(let names): .string(names[0])
        case .structure(let fields):
            .object(Dictionary(uniqueKeysWithValues: fields.map { ($0.name, sample(of: $0.type)) }))
        }
    }

    /// What in `value` does not match `type`. With `complete`, every declared field must be there, optional
    /// ones too (the value was built with all of them).
    func problems(_ value: JSONValue, _ type: TypeReference, at path: String, complete: Bool) -> [String] {
        switch (type, value) {
        case (.optional, .null): return []
        case (.optional(let wrapped), _): return problems(value, wrapped, at: path, complete: complete)
        case (.bool, .bool), (.string, .string), (.object, .object): return []
        case (.int, .number(let literal)):
            return literal.contains(where: { ".eE".contains($0) }) ? ["\(path): \(literal) is not an int"] : []
        case (.float, .number): return []
        case (.array(let element), .array(let values)):
            return values.enumerated().flatMap { problems($1, element, at: "\(path)[\($0)]", complete: complete) }
        case (.map(let element), .object(let members)):
            return members.flatMap { problems($1, element, at: "\(path)[\($0)]", complete: complete) }
        case (.named(let name), _):
            guard let resolved = types[name] else { return ["\(path): no type \(name)"] }
            return problems(value, resolved, at: path, complete: complete)
        case (.enumeration(let names), .string(let name)):
            return names.contains(name) ? [] : ["\(path): \(name) is not one of \(names)"]
        case (.structure(let fields), .object(let members)):
            var found: [String] = []
            let declared = Set(fields.map(\.name))
            for key in members.keys.sorted() where !declared.contains(key) { found.append("\(path).\(key) undeclared") }
            for field in fields {
                guard let member = members[field.name] else {
                    if case .optional = field.type, !complete { continue }
                    found.append("\(path).\(field.name) missing")
                    continue
                }
                found += problems(member, field.type, at: "\(path).\(field.name)", complete: complete)
            }
            return found
        default:
            return ["\(path): \(value) is not \(type)"]
        }
    }
}

extension JSONValue {
    /// The value as JSON text.
    var serialized: String {
        switch self {
        case .null: "null"
        case .bool(let value): value ? "true" : "false"
        case .number(let literal): literal
        case .string(let value): "\"" + value + "\""
        case .array(let values): "[" + values.map(\.serialized).joined(separator: ",") + "]"
        case .object(let members):
            "{"
                + members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value.serialized)" }
                .joined(separator: ",") + "}"
        }
    }
}
