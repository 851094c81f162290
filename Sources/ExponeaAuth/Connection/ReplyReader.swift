// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol

/// A reply the library reads by hand from its parsed parameters, without `Decodable`: the replies of the calls
/// on every request's path (GetToken, Preflight) and of `authctl status` (GetInfo, CountGroups).
///
/// Through `ParameterDecoder`'s generic path these replies cost most of a call's CPU on the client side (its
/// containers, its coding paths, the runtime's protocol-conformance lookups on a process's first call); read
/// here they cost about what the parse does. They are read as leniently as the generic path reads them
/// (`AuthDaemonClient.decode`): a member the library does not know is ignored (a newer daemon may add one), a
/// missing or null optional member is nil, an integer may be written as `5.0`, and an error names the
/// top-level member it is about. `ReplyReaderTests` checks that both paths read the same replies alike.
protocol ReplyReadable {
    init(reading reply: ReplyMembers) throws(ReplyMembers.Invalid)
}

/// A value of a reply read from its bytes (``reading(_:)``): an object as its members in order (no
/// dictionary, so no hashing of member names), anything else as its `JSONValue`.
indirect enum ReplyValue {
    case object([ReplyMember])
    case value(JSONValue)

    /// The same value from an already parsed one.
    init(_ value: JSONValue) {
        if case .object(let members) = value {
            self = .object(members.map { ReplyMember(name: $0.key, value: ReplyValue($0.value)) })
        } else {
            self = .value(value)
        }
    }

    /// Reads the value at `reader`, objects member by member.
    static func reading(_ reader: inout JSONValueReader) throws(JSONSyntaxError) -> ReplyValue {
        guard reader.isObject else { return .value(try reader.value()) }
        var members: [ReplyMember] = []
        try reader.members { name, value throws(JSONSyntaxError) in
            // Room for four at the first member: the objects of a reply have one to four.
            if members.isEmpty { members.reserveCapacity(4) }
            members.append(ReplyMember(name: name, value: try reading(&value)))
        }
        return .object(members)
    }
}

/// One member of an object of a reply. (A struct, not a tuple: the compiler makes its copy and destroy, where a
/// tuple's go through the runtime's generic tuple functions.)
struct ReplyMember {
    let name: String
    let value: ReplyValue
}

/// The members of a reply's `parameters` object (or of an object inside it), read by name. A member named twice
/// counts with its last value.
struct ReplyMembers {
    /// A member that is missing or of the wrong type; `member` is the top-level one it is in.
    struct Invalid: Error {
        let member: String
    }

    private let members: [ReplyMember]
    /// The top-level member these members are inside; nil for the parameters themselves.
    private let topLevel: String?

    init(_ members: [ReplyMember], inside topLevel: String? = nil) {
        self.members = members
        self.topLevel = topLevel
    }

    private func invalid(_ name: String) -> Invalid { Invalid(member: topLevel ?? name) }

    /// The member, if present (the last one of that name).
    private func member(_ name: String) -> ReplyValue? {
        members.last { $0.name == name }?.value
    }

    /// The member's value when it is not an object; nil when it is missing or null.
    private func value(_ name: String) throws(Invalid) -> JSONValue? {
        switch member(name) {
        case nil, .value(.null)?: nil
        case .value(let value)?: value
        case .object?: throw invalid(name)
        }
    }

    func string(_ name: String) throws(Invalid) -> String {
        guard let value = try optionalString(name) else { throw invalid(name) }
        return value
    }

    func optionalString(_ name: String) throws(Invalid) -> String? {
        guard let value = try value(name) else { return nil }
        guard case .string(let string) = value else { throw invalid(name) }
        return string
    }

    func integer<T: FixedWidthInteger>(_ name: String, as type: T.Type = T.self) throws(Invalid) -> T {
        guard let value = try value(name), let integer = ParameterDecoder.integer(value, as: type) else {
            throw invalid(name)
        }
        return integer
    }

    func double(_ name: String) throws(Invalid) -> Double {
        guard let number = try value(name)?.double else { throw invalid(name) }
        return number
    }

    /// An array of strings.
    func stringArray(_ name: String) throws(Invalid) -> [String] {
        guard case .array(let elements)? = try value(name) else { throw invalid(name) }
        var strings: [String] = []
        strings.reserveCapacity(elements.count)
        for element in elements {
            guard case .string(let string) = element else { throw invalid(name) }
            strings.append(string)
        }
        return strings
    }

    /// An object of strings.
    func stringMap(_ name: String) throws(Invalid) -> [String: String] {
        guard case .object(let members)? = member(name) else { throw invalid(name) }
        var map: [String: String] = [:]
        map.reserveCapacity(members.count)
        for member in members {
            guard case .value(.string(let string)) = member.value else { throw invalid(name) }
            map[member.name] = string
        }
        return map
    }

    /// An object, whose members' errors name this member (or the top-level one this is in).
    func optionalObject(_ name: String) throws(Invalid) -> ReplyMembers? {
        switch member(name) {
        case nil, .value(.null)?: nil
        case .object(let members)?: ReplyMembers(members, inside: topLevel ?? name)
        case .value?: throw invalid(name)
        }
    }
}

extension GetTokenResult: ReplyReadable {
    init(reading reply: ReplyMembers) throws(ReplyMembers.Invalid) {
        self.init(
            token: try reply.optionalString("token").map(CompactToken.init),
            claims: try reply.optionalObject("claims").map { claims throws(ReplyMembers.Invalid) in
                try ClaimsPayload(reading: claims)
            },
            generation: try reply.integer("generation"))
    }
}

extension ClaimsPayload {
    init(reading claims: ReplyMembers) throws(ReplyMembers.Invalid) {
        self.init(
            expiresAt: try claims.double("expiresAt"), customerIds: try claims.stringMap("customerIds"),
            algorithm: try claims.string("algorithm"), keyId: try claims.optionalString("keyId"))
    }
}

extension PreflightResult: ReplyReadable {
    init(reading reply: ReplyMembers) throws(ReplyMembers.Invalid) {
        guard let state = TokenState(rawValue: try reply.string("state")) else {
            throw ReplyMembers.Invalid(member: "state")
        }
        self.init(
            token: try reply.optionalString("token").map(CompactToken.init), state: state,
            reason: try reply.optionalString("reason").map(JwtErrorReason.init(rawValue:)),
            generation: try reply.integer("generation"))
    }
}

extension CountGroupsResult: ReplyReadable {
    init(reading reply: ReplyMembers) throws(ReplyMembers.Invalid) {
        self.init(groups: try reply.integer("groups"), withToken: try reply.integer("withToken"))
    }
}

extension DaemonInfo: ReplyReadable {
    init(reading reply: ReplyMembers) throws(ReplyMembers.Invalid) {
        self.init(
            vendor: try reply.string("vendor"), product: try reply.string("product"),
            version: try reply.string("version"), url: try reply.string("url"),
            interfaces: try reply.stringArray("interfaces"))
    }
}
