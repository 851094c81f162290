// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

/// A reply the library reads by hand, member by member as its bytes are parsed, without `Decodable` and without a
/// tree of the reply in between: the replies of the calls on every request's path (GetToken, Preflight) and of
/// `authctl status` (GetInfo, CountGroups).
///
/// Through `ParameterDecoder`'s generic path these replies cost most of a call's CPU on the client side (its
/// containers, its coding paths, the runtime's protocol-conformance lookups on a process's first call); read
/// here they cost about what the parse does. They are read as leniently as the generic path reads them
/// (`AuthDaemonClient.decode`): a member the library does not know is ignored (a newer daemon may add one), a
/// missing or null optional member is nil, an integer may be written as `5.0`, a member named twice counts with
/// its last value, and an error names the top-level member it is about. `ReplyReaderTests` checks these.
protocol ReplyReadable {
    /// Reads the reply's `parameters` object, member by member.
    ///
    /// - Throws: ``JSONSyntaxError`` as the parse does; a member that is missing or of the wrong type is not an
    ///   error here but in the result (``ReplyField``), so that a later member of the same name can replace it.
    static func reading(_ parameters: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Self>
}

/// A member of a reply that is missing or of the wrong type; `member` is the top-level one it is in.
struct ReplyInvalid: Error {
    let member: String
}

/// A reply (or an object in it) read whole, or the top-level member that made it unreadable. (Not a `Result`:
/// making the type of a `Result` checks at run time that its error is an `Error`, which costs a process's first
/// call a search of every protocol conformance in the binary.)
enum ReplyRead<Value> {
    case read(Value)
    case invalid(member: String)

    /// What `body` makes of the members read, or the member it found invalid.
    init(_ body: () throws(ReplyInvalid) -> Value) {
        do throws(ReplyInvalid) {
            self = .read(try body())
        } catch {
            self = .invalid(member: error.member)
        }
    }
}

/// What a reply gave one member so far: nothing, a value of the member's type, or something else. The last
/// member of a name decides, as in a dictionary.
enum ReplyField<Value> {
    case missing
    case read(Value)
    case invalid

    /// A value read, or invalid when there is none.
    init(_ value: Value?) {
        self = value.map { .read($0) } ?? .invalid
    }

    /// The value; missing or invalid is an error naming `member`.
    func required(_ member: String) throws(ReplyInvalid) -> Value {
        guard case .read(let value) = self else { throw ReplyInvalid(member: member) }
        return value
    }

    /// The value of an optional member (`Value` is then an `Optional`); missing is nil, invalid an error naming
    /// `member`.
    func optional<Wrapped>(_ member: String) throws(ReplyInvalid) -> Wrapped? where Value == Wrapped? {
        switch self {
        case .missing: nil
        case .read(let value): value
        case .invalid: throw ReplyInvalid(member: member)
        }
    }
}

/// Readers of one member's value, each giving a ``ReplyField``: null counts as missing for an optional member
/// and as invalid for a required one, as the generic path counts it.
extension JSONValueReader {
    /// A string that may be missing or null.
    mutating func optionalString() throws(JSONSyntaxError) -> ReplyField<String?> {
        switch try value() {
        case .null: .read(nil)
        case .string(let string): .read(string)
        default: .invalid
        }
    }

    /// A string that must be there.
    mutating func string() throws(JSONSyntaxError) -> ReplyField<String> {
        guard case .string(let string) = try value() else { return .invalid }
        return .read(string)
    }

    /// An integer (`5` or `5.0`) that fits a `UInt64`.
    mutating func uint64() throws(JSONSyntaxError) -> ReplyField<UInt64> {
        guard let integer = ParameterDecoder.uint64(try value()) else { return .invalid }
        return .read(integer)
    }

    /// An integer (`5` or `5.0`) that fits an `Int`.
    mutating func int() throws(JSONSyntaxError) -> ReplyField<Int> {
        guard let integer = ParameterDecoder.int(try value()) else { return .invalid }
        return .read(integer)
    }

    /// A number, as the nearest `Double`.
    mutating func double() throws(JSONSyntaxError) -> ReplyField<Double> {
        guard let number = try value().double else { return .invalid }
        return .read(number)
    }

    /// An array of strings.
    mutating func stringArray() throws(JSONSyntaxError) -> ReplyField<[String]> {
        guard case .array(let elements) = try value() else { return .invalid }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for element in elements {
            guard case .string(let string) = element else { return .invalid }
            strings.append(string)
        }
        return .read(strings)
    }

    /// An object of the reply that may be missing or null, read by `read`.
    mutating func optionalObject<Value>(
        _ read: (inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Value>
    ) throws(JSONSyntaxError) -> ReplyField<Value?> {
        guard isObject else { return try value() == .null ? .read(nil) : .invalid }
        guard case .read(let object) = try read(&self) else { return .invalid }
        return .read(object)
    }
}

extension GetTokenResult: ReplyReadable {
    static func reading(_ parameters: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Self> {
        var token = ReplyField<String?>.missing
        var claims = ReplyField<ClaimsPayload?>.missing
        var generation = ReplyField<UInt64>.missing
        try parameters.members { name, value throws(JSONSyntaxError) in
            switch name {
            case "token": token = try value.optionalString()
            case "claims": claims = try value.optionalObject(ClaimsPayload.reading)
            case "generation": generation = try value.uint64()
            default: break
            }
        }
        return ReplyRead { () throws(ReplyInvalid) in
            GetTokenResult(
                token: try token.optional("token").map(CompactToken.init), claims: try claims.optional("claims"),
                generation: try generation.required("generation"))
        }
    }
}

extension ClaimsPayload {
    /// The claims object; an error in it names nothing itself (the caller names `claims`).
    static func reading(_ claims: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Self> {
        var expiresAt = ReplyField<Double>.missing
        var customerIds = ReplyField<[String: String]>.missing
        var algorithm = ReplyField<String>.missing
        var keyId = ReplyField<String?>.missing
        try claims.members { name, value throws(JSONSyntaxError) in
            switch name {
            case "expiresAt": expiresAt = try value.double()
            case "customerIds": customerIds = ReplyField(try value.stringMap())
            case "algorithm": algorithm = try value.string()
            case "keyId": keyId = try value.optionalString()
            default: break
            }
        }
        return ReplyRead { () throws(ReplyInvalid) in
            ClaimsPayload(
                expiresAt: try expiresAt.required("claims"), customerIds: try customerIds.required("claims"),
                algorithm: try algorithm.required("claims"), keyId: try keyId.optional("claims"))
        }
    }
}

extension PreflightResult: ReplyReadable {
    static func reading(_ parameters: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Self> {
        var token = ReplyField<String?>.missing
        var state = ReplyField<String>.missing
        var reason = ReplyField<String?>.missing
        var generation = ReplyField<UInt64>.missing
        try parameters.members { name, value throws(JSONSyntaxError) in
            switch name {
            case "token": token = try value.optionalString()
            case "state": state = try value.string()
            case "reason": reason = try value.optionalString()
            case "generation": generation = try value.uint64()
            default: break
            }
        }
        return ReplyRead { () throws(ReplyInvalid) in
            let token = try token.optional("token").map(CompactToken.init)
            guard let state = TokenState(rawValue: try state.required("state")) else {
                throw ReplyInvalid(member: "state")
            }
            return PreflightResult(
                token: token, state: state, reason: try reason.optional("reason").map(JwtErrorReason.init(rawValue:)),
                generation: try generation.required("generation"))
        }
    }
}

extension CountGroupsResult: ReplyReadable {
    static func reading(_ parameters: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Self> {
        var groups = ReplyField<Int>.missing
        var withToken = ReplyField<Int>.missing
        try parameters.members { name, value throws(JSONSyntaxError) in
            switch name {
            case "groups": groups = try value.int()
            case "withToken": withToken = try value.int()
            default: break
            }
        }
        return ReplyRead { () throws(ReplyInvalid) in
            CountGroupsResult(groups: try groups.required("groups"), withToken: try withToken.required("withToken"))
        }
    }
}

extension DaemonInfo: ReplyReadable {
    static func reading(_ parameters: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyRead<Self> {
        var vendor = ReplyField<String>.missing
        var product = ReplyField<String>.missing
        var version = ReplyField<String>.missing
        var url = ReplyField<String>.missing
        var interfaces = ReplyField<[String]>.missing
        try parameters.members { name, value throws(JSONSyntaxError) in
            switch name {
            case "vendor": vendor = try value.string()
            case "product": product = try value.string()
            case "version": version = try value.string()
            case "url": url = try value.string()
            case "interfaces": interfaces = try value.stringArray()
            default: break
            }
        }
        return ReplyRead { () throws(ReplyInvalid) in
            DaemonInfo(
                vendor: try vendor.required("vendor"), product: try product.required("product"),
                version: try version.required("version"), url: try url.required("url"),
                interfaces: try interfaces.required("interfaces"))
        }
    }
}
