// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import Foundation
import FuzzSupport

// The input is a token as SetToken or IdentifyCustomer pass it (a JSON string, so any UTF-8 text). StreamJWT
// parses it or names what is wrong: the error must match the input and never show it. A parsed token keeps its
// text exactly, parses again to the same value, and its header and claims, encoded anew, parse to the same.

/// Checks one input.
func check(_ input: [UInt8]) {
    let token = String(decoding: input, as: UTF8.self)
    let wire = CompactToken(token)
    invariant(!reveals(wire.description, token), "CompactToken's description shows the token")
    var dumped = ""
    dump(wire, to: &dumped)
    invariant(!reveals(String(reflecting: wire) + dumped, token), "CompactToken's debug output shows the token")

    let jwt: StreamJWT
    do {
        jwt = try StreamJWT(parsing: token)
    } catch {
        checkError(error, token)
        return
    }
    invariant(jwt.compact == token, "the compact form is not the token as given")
    // What SetToken's reply shows: the header and claims its parsing kept, the same as decoded anew.
    guard let kept = try? StreamJWT.decode(token) else {
        invariant(false, "StreamJWT.decode refuses what StreamJWT(parsing:) takes")
        return
    }
    invariant(
        kept.token == jwt && kept.header == jwt.header && kept.claims == jwt.claims,
        "StreamJWT.decode keeps another header or claims than the token's")
    invariant((try? StreamJWT(parsing: jwt.compact)) == jwt, "the compact form does not parse to the same token")
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    invariant(parts.count == 3, "parsed a token of \(parts.count) parts")
    // The description shows the header's fields, the whole seconds of exp and how many ids: no signature, no ids.
    let keyID = jwt.header.keyID.map { ", kid: \($0)" } ?? ""
    let seconds = Int64(jwt.claims.expiresAt.timeIntervalSince1970.rounded(.down))
    let count = jwt.claims.customerIds.count
    invariant(
        jwt.description == "StreamJWT(alg: \(jwt.header.algorithm)\(keyID), exp: \(seconds), ids: \(count) keys)",
        "the description shows more than the header, exp and the number of ids")

    // The header and claims, encoded anew, parse to the same values.
    var header: [String: String] = ["alg": jwt.header.algorithm]
    header["kid"] = jwt.header.keyID
    let payload = Claims(exp: jwt.claims.expiresAt.timeIntervalSince1970, ids: jwt.claims.customerIds)
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    guard let headerJSON = try? encoder.encode(header), let payloadJSON = try? encoder.encode(payload) else {
        invariant(false, "the parsed header or claims do not encode")
        return
    }
    let rebuilt = "\(base64URL(headerJSON)).\(base64URL(payloadJSON)).\(parts[2])"
    do {
        let again = try StreamJWT(parsing: rebuilt)
        invariant(again.header == jwt.header, "the header encoded anew parses differently")
        invariant(again.claims == jwt.claims, "the claims encoded anew parse differently")
    } catch {
        invariant(
            error == .tooLong(length: rebuilt.utf8.count), "the token encoded anew does not parse: \(error.code)")
    }

    // What the daemon sends about the token: claims on the wire, its state.
    let claims = ClaimsPayload(jwt)
    invariant(claims.expiresAt == jwt.claims.expiresAt.timeIntervalSince1970, "ClaimsPayload changes exp")
    guard let reply = try? VarlinkReplyEncoder.reply(claims),
        reply.firstIndex(of: 0) == reply.count - 1,
        let decoded = try? JSONDecoder().decode(Reply.self, from: Data(reply.dropLast()))
    else {
        invariant(false, "ClaimsPayload does not make a reply")
        return
    }
    invariant(decoded.parameters == claims, "ClaimsPayload does not survive a reply")
    // The reply that writes itself writes what its Encodable form does.
    var written = JSONWriter()
    let encoded = try? ParameterEncoder.encode(claims)
    invariant(
        (try? claims.write(into: &written)) != nil && written.bytes == encoded,
        "ClaimsPayload writes itself otherwise than ParameterEncoder writes it")
    for now in [Date(timeIntervalSince1970: 0), jwt.claims.expiresAt, Date.distantFuture] {
        _ = jwt.state(at: now)
    }
}

/// The payload claims the daemon reads.
struct Claims: Encodable {
    var exp: Double
    var ids: [String: String]
}

/// A reply as a client reads it.
struct Reply: Decodable {
    var parameters: ClaimsPayload
}

/// An error names what is wrong with `token`, and shows none of it.
func checkError(_ error: StreamJWTError, _ token: String) {
    invariant(!error.code.isEmpty && !error.description.isEmpty, "an error without code or description")
    invariant(!reveals(error.description, token), "the error shows the token: \(error.code)")
    invariant(!reveals("\(error)", token) && !reveals(String(reflecting: error), token), "the error shows the token")
    // The reply names the error and its code by design; a token may hold those words too ("...bearerPrefix...",
    // "m.exponea.Au": found by this target), so the check is of the reply without them.
    let malformed = VarlinkError.malformedToken(code: error.code, message: error.description)
    let shown = malformed.description.replacingOccurrences(of: malformed.name, with: " ")
        .replacingOccurrences(of: error.code, with: " ")
    invariant(!reveals(shown, token), "the MalformedToken reply shows the token")
    let length = token.utf8.count
    // JWS splits at the byte '.', also where a combining mark follows it (which String.split would not).
    let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false).count
    switch error {
    case .empty: invariant(length == 0, "a token of \(length) bytes called empty")
    case .tooLong(let reported):
        invariant(reported == length && length > StreamJWT.maximumLength, "tooLong(\(reported)) for \(length) bytes")
    case .bearerPrefix: invariant(token.hasPrefix("Bearer "), "bearerPrefix without the prefix")
    case .notThreeParts(let found): invariant(found == parts && found != 3, "notThreeParts(\(found)), \(parts) parts")
    default: invariant(length > 0 && length <= StreamJWT.maximumLength && parts == 3, "\(error.code) on the shape")
    }
}

/// Base64url without padding.
func base64URL(_ data: Data) -> String {
    data.base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

@main
enum FuzzJWT {
    static func main() { FuzzTarget.main("fuzz-jwt", check) }
}
