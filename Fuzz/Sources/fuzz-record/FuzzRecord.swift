// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthStore
import Foundation
import FuzzSupport

// The input is read twice: as the bytes of a record file, damaged as a disk or a person could leave it, and as
// the plaintext inside a record, sealed with the right key, so that the fuzzer reaches the JSON behind the
// authentication. Either decodes to a record that encodes and decodes back to the same, or names a defect that
// shows nothing of the record.

let group = try! AppGroup("shop")
let key = try! StoreKey(material: Array(repeating: 7, count: 32))

/// Checks one input.
func check(_ input: [UInt8]) {
    decode(input, plaintext: nil)
    guard let sealed = try? RecordCodec.seal(input, group: group, key: key) else {
        invariant(false, "a plaintext of \(input.count) bytes does not seal")
        return
    }
    decode(sealed, plaintext: input)
}

/// Decodes a record file; `plaintext` is what it holds, when known, for the secrets a defect must not show.
func decode(_ bytes: [UInt8], plaintext: [UInt8]?) {
    let record: TokenRecord
    do {
        record = try RecordCodec.decode(bytes, group: group, key: key)
    } catch {
        for secret in secrets(in: plaintext ?? []) {
            invariant(!reveals(error.description, secret), "the defect '\(error)' shows the record's content")
        }
        return
    }
    invariant(record.group == group, "decoded a record of another group")
    // The description and dump show nothing of the signature or the customer ids: they are the same with others.
    var other = record
    other.customerIds = record.customerIds.mapValues { String(repeating: "x", count: $0.utf8.count) }
    if let token = record.token {
        let parts = token.compact.split(separator: ".", omittingEmptySubsequences: false)
        let signature = String(repeating: "A", count: parts[2].utf8.count)
        other.token = try? StreamJWT(parsing: "\(parts[0]).\(parts[1]).\(signature)")
        invariant(other.token != nil, "the token with another signature does not parse")
    }
    var dumped = ("", "")
    dump(record, to: &dumped.0)
    dump(other, to: &dumped.1)
    invariant(
        record.description == other.description && dumped.0 == dumped.1, "the record's description shows its content")
    do {
        let again = try RecordCodec.decode(try RecordCodec.encode(record, key: key), group: group, key: key)
        invariant(again == record, "the record does not survive encoding and decoding")
    } catch {
        invariant(false, "a decoded record does not encode and decode back: \(error)")
    }
}

/// The token and customer ids of a plaintext record, but for those that are numbers (a defect may show the
/// schema version).
func secrets(in plaintext: [UInt8]) -> [String] {
    guard let object = try? JSONSerialization.jsonObject(with: Data(plaintext)) as? [String: Any] else { return [] }
    var strings = (object["customerIds"] as? [String: Any])?.values.compactMap { $0 as? String } ?? []
    if let token = object["token"] as? String { strings.append(token) }
    return strings.filter { Double($0) == nil }
}

@main
enum FuzzRecord {
    static func main() { FuzzTarget.main("fuzz-record", check) }
}
