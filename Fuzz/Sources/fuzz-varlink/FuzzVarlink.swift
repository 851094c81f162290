// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Foundation
import FuzzSupport

// The input is a Varlink byte stream as a client could send it. VarlinkFrameDecoder reads it in chunks of
// pseudo-random sizes (one byte at a time too, and with a small bound), and must agree with a plain split at NUL
// bytes; every whole message then goes through VarlinkCall and the parameter types of every method, as the
// daemon's dispatcher decodes them, and the errors and replies it would send are framed and read back.

/// Checks one input.
func check(_ input: [UInt8]) {
    var random = InputRandom(seededBy: input)
    let limit = VarlinkFrameDecoder.defaultMaximumMessageSize
    let messages = frame(input, limit: limit) { random.next(in: 1...(random.next() % 4 == 0 ? 4096 : 64)) }
    invariant(frame(input, limit: limit) { 1 } == messages, "byte-at-a-time framing differs")
    let smallLimit = random.next(in: 0...64)
    _ = frame(input, limit: smallLimit) { random.next(in: 1...32) }

    for message in messages.messages {
        checkJSON(message)
        guard let call = try? VarlinkCall(decoding: message) else { continue }
        let parameters = try? JSONValue(parsing: message, keepingNumbersOutOfRange: true)["parameters"]
        if case .object(let members)? = parameters {
            sentParameters = Set(members.keys)
        } else {
            sentParameters = []
        }
        checkCall(call)
    }
}

/// JSONValue, which reads every call, accepts no document Foundation's parser refuses, and reads each as it
/// does. (The other way round it is stricter: Foundation also takes a trailing comma.)
func checkJSON(_ message: [UInt8]) {
    guard let ours = try? JSONValue(parsing: message) else { return }
    guard let theirs = try? JSONSerialization.jsonObject(with: Data(message), options: [.fragmentsAllowed]) else {
        invariant(false, "JSONValue accepts a document JSONSerialization refuses")
        return
    }
    invariant(sameJSON(ours, theirs), "JSONValue reads a document differently from JSONSerialization")
}

func sameJSON(_ ours: JSONValue, _ theirs: Any) -> Bool {
    switch ours {
    case .null: return theirs is NSNull
    case .bool(let value): return (theirs as? Bool) == value
    case .number:
        guard let number = theirs as? NSNumber, let double = ours.double else { return false }
        // Foundation reads a long integer as an NSDecimalNumber, whose Double may be an ulp or two from the
        // correctly rounded one JSONValue gives (found by this target: an 88-digit integer).
        return number.doubleValue == double
            || abs(number.doubleValue - double) <= max(abs(number.doubleValue), abs(double)) * 1e-14
    case .string(let value): return (theirs as? String) == value
    case .array(let elements):
        guard let array = theirs as? [Any], array.count == elements.count else { return false }
        return zip(elements, array).allSatisfy { sameJSON($0, $1) }
    case .object(let members):
        guard let object = theirs as? [String: Any], object.count == members.count else { return false }
        return members.allSatisfy { name, value in object[name].map { sameJSON(value, $0) } ?? false }
    }
}

/// What a decoder made of a stream: its whole messages, and whether it stopped at one too long.
struct Framing: Equatable {
    var messages: [[UInt8]] = []
    var tooLarge = false
}

/// Feeds `input` to a decoder bounded by `limit`, in chunks of `chunkSize()` bytes, checking it against a plain
/// split at NUL bytes as it goes.
func frame(_ input: [UInt8], limit: Int, chunkSize: () -> Int) -> Framing {
    var decoder = VarlinkFrameDecoder(maximumMessageSize: limit)
    var result = Framing()
    var received = 0
    var consumed = 0
    while received < input.count {
        let size = min(chunkSize(), input.count - received)
        decoder.append(input[received..<received + size])
        received += size
        invariant(
            decoder.pendingByteCount == received - consumed && decoder.pendingByteCount <= limit + size,
            "\(decoder.pendingByteCount) bytes pending after a chunk of \(size), limit \(limit)")
        do {
            while let message = try decoder.nextMessage() {
                let end = consumed + message.count
                invariant(message.count <= limit, "a message of \(message.count) bytes passed the limit \(limit)")
                invariant(!message.contains(0), "a message holds a NUL")
                invariant(
                    end < received && input[consumed..<end].elementsEqual(message) && input[end] == 0,
                    "the message and its NUL are not the next bytes of the stream")
                consumed = end + 1
                result.messages.append(message)
            }
        } catch {
            let pending = input[consumed..<received]
            let length = pending.firstIndex(of: 0).map { $0 - consumed } ?? pending.count
            invariant(length > limit, "refused a message of \(length) bytes, limit \(limit)")
            result.tooLarge = true
            break
        }
        invariant(
            decoder.pendingByteCount == received - consumed && decoder.pendingByteCount <= limit
                && !input[consumed..<received].contains(0),
            "\(decoder.pendingByteCount) bytes pending once the messages are read, limit \(limit)")
    }
    // The same as splitting at NUL bytes, up to the first message longer than the limit.
    var expected = Framing()
    var start = 0
    while start < input.count {
        guard let end = input[start...].firstIndex(of: 0) else {
            expected.tooLarge = input.count - start > limit
            break
        }
        guard end - start <= limit else {
            expected.tooLarge = true
            break
        }
        expected.messages.append(Array(input[start..<end]))
        start = end + 1
    }
    invariant(result == expected, "framing differs from a split at NUL bytes")
    return result
}

/// Decodes the parameters of every method from `call`, and frames what the daemon would answer.
func checkCall(_ call: VarlinkCall) {
    if let method = AuthInterface.Method(qualifiedName: call.method) {
        invariant(method.qualifiedName == call.method, "method name round trip")
    }
    if let interface = call.interface {
        invariant(call.method.hasPrefix(interface + "."), "interface is not the method's prefix")
        checkReply(VarlinkReplyEncoder.error(.interfaceNotFound(interface)))
    }
    checkReply(VarlinkReplyEncoder.error(.methodNotFound(call.method)))

    if let parameters = decode(call, GroupParameters.self, ["group"]) {
        checkGroup(parameters.group)
    }
    checkFastPaths(call)
    checkDescription(call)
    if var parameters = decode(call, SetTokenParameters.self, ["group", "token"]) {
        checkGroup(parameters.group)
        let shown = "\(parameters)"
        parameters.token = CompactToken(String(repeating: "x", count: parameters.token.value.utf8.count))
        invariant("\(parameters)" == shown, "the parameters' description shows the token")
    }
    if let parameters = decode(
        call, ReportAuthFailureParameters.self, ["group", "status", "generation", "tokenExpired"])
    {
        checkGroup(parameters.group)
    }
    if let parameters = decode(call, WaitForTokenParameters.self, ["group", "after", "timeoutMs"]) {
        checkGroup(parameters.group)
    }
    if var parameters = decode(call, IdentifyCustomerParameters.self, ["group", "customerIds", "token"]) {
        checkGroup(parameters.group)
        let shown = "\(parameters)"
        parameters.token = parameters.token.map { CompactToken(String(repeating: "x", count: $0.value.utf8.count)) }
        invariant("\(parameters)" == shown, "the parameters' description shows the token")
    }
    if let parameters = decode(call, AcknowledgeFlushParameters.self, ["group", "flushId"]) {
        checkGroup(parameters.group)
    }
    if let parameters = decode(call, ClaimRefreshParameters.self, ["group", "generation"]) {
        checkGroup(parameters.group)
    }
    _ = decode(call, EmptyPayload.self, [])
    _ = decode(call, VarlinkService.DescriptionParameters.self, ["interface"])
}

/// GetToken's and SetToken's fast paths, which read plain strings from the message's bytes, give what the
/// parameters decode to, and refuse what their decoding refuses, naming the same parameter.
func checkFastPaths(_ call: VarlinkCall) {
    let group = Result { () throws(VarlinkError) in try call.stringParameter("group") }
    let groupDecoded = Result { () throws(VarlinkError) in try call.parameters(GroupParameters.self).group }
    invariant(group == groupDecoded, "stringParameter(group) reads otherwise than GroupParameters decode")
    let setToken = Result { () throws(VarlinkError) -> [String] in
        let (group, token) = try call.stringParameters("group", "token")
        return [group, token]
    }
    let setTokenDecoded = Result { () throws(VarlinkError) -> [String] in
        let parameters = try call.parameters(SetTokenParameters.self)
        return [parameters.group, parameters.token.value]
    }
    invariant(setToken == setTokenDecoded, "stringParameters(group, token) reads otherwise than SetTokenParameters")
}

/// A call shows its method and flags, and nothing of its parameters (they may hold a token): it describes and
/// dumps as the same call without them.
func checkDescription(_ call: VarlinkCall) {
    let header: [String: Any] = ["method": call.method, "more": call.more, "oneway": call.oneway]
    guard let json = try? JSONSerialization.data(withJSONObject: header),
        let bare = try? VarlinkCall(decoding: Array(json))
    else {
        invariant(false, "a call's method and flags do not make a call")
        return
    }
    var dumped = ("", "")
    dump(call, to: &dumped.0)
    dump(bare, to: &dumped.1)
    invariant(call.description == bare.description && dumped.0 == dumped.1, "a call's description shows parameters")
}

/// The names of the members of the `parameters` object of the call being checked.
nonisolated(unsafe) var sentParameters: Set<String> = []

/// The parameters as `type`, or nil when the daemon would answer InvalidParameter naming one of `names`, a
/// parameter the call sent that is not one of them (`parameters` itself). A call decodes only when every
/// parameter it sent is one of `names`. Decoded parameters encode and decode back to the same value.
func decode<Parameters: Codable & Hashable>(_ call: VarlinkCall, _ type: Parameters.Type, _ names: Set<String>)
    -> Parameters?
{
    let parameters: Parameters
    do {
        parameters = try call.parameters(type)
    } catch {
        guard case .invalidParameter(let name) = error else {
            invariant(false, "\(type) failed with \(error.name), not InvalidParameter")
            return nil
        }
        invariant(
            names.contains(name) || name == "parameters" || sentParameters.contains(name),
            "\(type): InvalidParameter names '\(name)'")
        checkReply(VarlinkReplyEncoder.error(error))
        return nil
    }
    invariant(sentParameters.isSubset(of: names), "\(type) decoded with a parameter it does not take")
    do {
        checkReply(try VarlinkReplyEncoder.reply(parameters))
        let encoded = Array(#"{"method":"fuzz.Check","parameters":"#.utf8) + Array(try JSONEncoder().encode(parameters))
        let again = try VarlinkCall(decoding: encoded + Array("}".utf8)).parameters(type)
        invariant(again == parameters, "\(type) does not survive encoding and decoding")
    } catch {
        invariant(false, "\(type) decoded but does not encode and decode back: \(error)")
    }
    return parameters
}

/// A group name is valid exactly when it is 1-128 bytes of `A-Z a-z 0-9 . _ -` not starting with a dot.
func checkGroup(_ name: String) {
    let bytes = Array(name.utf8)
    let allowed = Set(Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-".utf8))
    let valid =
        (1...AppGroup.maximumLength).contains(bytes.count) && bytes.first != UInt8(ascii: ".")
        && bytes.allSatisfy(allowed.contains)
    do {
        let group = try AppGroup(wire: name)
        invariant(valid && group.name == name, "accepted an invalid group name")
    } catch {
        invariant(!valid, "refused a valid group name: \(error)")
        guard case .invalidGroupName = error else {
            invariant(false, "a bad group name gave \(error.name)")
            return
        }
        checkReply(VarlinkReplyEncoder.error(error))
    }
}

/// A reply is one JSON object and a single NUL, at its end.
func checkReply(_ reply: [UInt8]) {
    invariant(reply.last == 0 && reply.firstIndex(of: 0) == reply.count - 1, "a reply is not one NUL-ended frame")
    let object = try? JSONSerialization.jsonObject(with: Data(reply.dropLast()))
    invariant(object is [String: Any], "a reply is not a JSON object")
}

@main
enum FuzzVarlink {
    static func main() { FuzzTarget.main("fuzz-varlink", check) }
}
