// SPDX-License-Identifier: Apache-2.0
import AuthCore
import Crypto

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The on-disk form of a ``TokenRecord``.
///
/// ```
/// offset  size  field
///      0     4  magic "XATK"
///      4     1  format version (1)
///      5    12  AES-GCM nonce      \
///     17     n  ciphertext          } the sealed box, swift-crypto's `combined` form
///   17+n    16  AES-GCM tag        /
/// ```
///
/// Authenticated data: the 5 header bytes followed by the app group name (UTF-8), so a record copied to
/// another group's file name, or given another header, does not open. The plaintext is JSON:
///
/// ```
/// {"schema": 1, "group": "<name>", "token": "<compact JWT>" | null, "expiresAt": <the token's exp>,
///  "customerIds": {...}, "generation": <UInt64>, "changedAt": <seconds since 2001-01-01T00:00:00Z, Double>}
/// ```
///
/// `changedAt` is Foundation's reference-date interval so that the `Date` round-trips bit for bit.
/// `expiresAt` (Unix seconds) is written with every token since 0.2, so that start-up need not parse each
/// token's JSON again; a record without it (written by 0.1) has its token parsed.
///
/// Package-visible for the fuzz-record harness (`Fuzz/`), which decodes damaged records without a store.
package enum RecordCodec {
    static let magic: [UInt8] = Array("XATK".utf8)
    static let formatVersion: UInt8 = 1
    static let schemaVersion = 1
    static let headerLength = 5
    static let sealOverhead = 12 + 16

    package static func encode(_ record: TokenRecord, key: StoreKey) throws(TokenStoreError) -> [UInt8] {
        try encode(record, compactToken: record.token?.compact, key: key)
    }

    /// Encodes `record` with `compactToken` in place of its token: tests use it to store a token that does not
    /// parse, which no `TokenRecord` can hold.
    static func encode(
        _ record: TokenRecord, compactToken: String?, schema: Int = schemaVersion, key: StoreKey
    ) throws(TokenStoreError) -> [UInt8] {
        // The members in order of their names, as records have always been written.
        var json = JSONWriter(capacity: 256 + (compactToken?.utf8.count ?? 0))
        json.raw(#"{"changedAt":"#)
        guard json.number(record.changedAt.timeIntervalSinceReferenceDate) else {
            throw TokenStoreError(
                code: .encodingFailed,
                message: "cannot encode the token record for app group \(record.group): its change time is not a number"
            )
        }
        json.raw(#","customerIds":"#)
        json.stringMap(record.customerIds)
        if let token = record.token, compactToken == token.compact {
            json.raw(#","expiresAt":"#)
            // A token's expiry is a whole number of seconds, always finite.
            json.number(token.expiresAt.timeIntervalSince1970)
        }
        json.raw(#","generation":"#)
        json.integer(record.generation)
        json.raw(#","group":"#)
        json.string(record.group.name)
        json.raw(#","schema":"#)
        json.integer(Int64(schema))
        if let compactToken {
            json.raw(#","token":"#)
            json.string(compactToken)
        }
        json.raw("}")
        return try seal(json.bytes, group: record.group, key: key)
    }

    /// Seals `plaintext` as the record of `group`: the header, then the sealed box. The fuzz-record harness uses
    /// it to reach the decoding of the plaintext.
    package static func seal(_ plaintext: [UInt8], group: AppGroup, key: StoreKey) throws(TokenStoreError) -> [UInt8] {
        do {
            let header = magic + [formatVersion]
            let sealed = try AES.GCM.seal(
                plaintext, using: key.symmetricKey, authenticating: authenticatedData(header, group))
            guard let combined = sealed.combined else {
                throw TokenStoreError(code: .encodingFailed, message: "AES-GCM gave no combined sealed box")
            }
            return header + Array(combined)
        } catch let error as TokenStoreError {
            throw error
        } catch {
            // Sealing with a 256-bit key does not fail in practice.
            throw TokenStoreError(
                code: .encodingFailed,
                message: "cannot encode the token record for app group \(group): \(type(of: error))")
        }
    }

    package static func decode(_ bytes: [UInt8], group: AppGroup, key: StoreKey) throws(RecordDefect) -> TokenRecord {
        guard bytes.count >= headerLength + sealOverhead else { throw .truncated(length: bytes.count) }
        guard Array(bytes[0..<4]) == magic else { throw .badMagic }
        guard bytes[4] == formatVersion else { throw .unsupportedFormat(bytes[4]) }
        let header = Array(bytes[0..<headerLength])

        let plaintext: Data
        do {
            let box = try AES.GCM.SealedBox(combined: bytes[headerLength...])
            plaintext = try AES.GCM.open(box, using: key.symmetricKey, authenticating: authenticatedData(header, group))
        } catch {
            throw .authenticationFailed
        }

        // JSONValue rather than JSONDecoder, its members read as they are parsed rather than gathered in a
        // dictionary: reading every record at start-up is most of the daemon's start.
        guard let payload = ReadPayload(plaintext), let schema = payload.schema?.int else { throw .notJSON }
        guard schema == schemaVersion else { throw .unsupportedSchema(schema) }
        guard let name = payload.group?.string, let customerIds = payload.customerIds,
            let generation = payload.generation?.uint64, let changedAt = payload.changedAt?.double
        else { throw .notJSON }
        guard name == group.name else { throw .groupMismatch }
        guard changedAt.isFinite else { throw .badDate }
        var token: StreamJWT?
        switch payload.token {
        case nil, .null?:
            break
        case .string(let compact)?:
            do {
                if let expiresAt = payload.expiresAt?.double, expiresAt.isFinite {
                    token = try StreamJWT(stored: compact, expiresAt: Date(timeIntervalSince1970: expiresAt))
                } else {
                    token = try StreamJWT(parsing: compact)
                }
            } catch {
                throw .tokenUnparseable(error)
            }
        default:
            throw .notJSON
        }
        return TokenRecord(
            group: group, token: token, customerIds: customerIds, generation: generation,
            changedAt: Date(timeIntervalSinceReferenceDate: changedAt))
    }

    /// The members of a record's JSON that ``decode(_:group:key:)`` reads (``Payload``'s, as they were written); a
    /// member named twice counts with its last value, as in a dictionary.
    private struct ReadPayload {
        var schema, group, generation, changedAt, token, expiresAt: JSONValue?
        /// Nil also when it is not an object of strings.
        var customerIds: [String: String]?

        /// The members of `plaintext`; nil when it is not a JSON object.
        init?(_ plaintext: Data) {
            let parsed = plaintext.withUnsafeBytes { raw in
                JSONValue.readObject(raw.assumingMemoryBound(to: UInt8.self)) { name, value throws(JSONSyntaxError) in
                    switch name {
                    case "schema": self.schema = try value.value()
                    case "group": self.group = try value.value()
                    case "customerIds": self.customerIds = try value.stringMap()
                    case "generation": self.generation = try value.value()
                    case "changedAt": self.changedAt = try value.value()
                    case "token": self.token = try value.value()
                    case "expiresAt": self.expiresAt = try value.value()
                    default: break
                    }
                }
            }
            guard parsed else { return nil }
        }
    }

    private static func authenticatedData(_ header: [UInt8], _ group: AppGroup) -> [UInt8] {
        header + Array(group.name.utf8)
    }
}

/// Why a record file is unusable and goes to quarantine. Descriptions never show the record's content.
package enum RecordDefect: Error, Sendable, CustomStringConvertible {
    case notRegularFile
    case unreadable(SystemCallError)
    case tooLarge(limit: Int)
    case truncated(length: Int)
    case badMagic
    case unsupportedFormat(UInt8)
    case authenticationFailed
    case notJSON
    case unsupportedSchema(Int)
    case groupMismatch
    case badDate
    case tokenUnparseable(StreamJWTError)

    /// Whether the record was decrypted before this was found: the key is right.
    var isAfterDecryption: Bool {
        switch self {
        case .notJSON, .unsupportedSchema, .groupMismatch, .badDate, .tokenUnparseable: true
        default: false
        }
    }

    package var description: String {
        switch self {
        case .notRegularFile:
            "not a regular file"
        case .unreadable(let failure):
            "cannot be read (\(failure))"
        case .tooLarge(let limit):
            "larger than \(limit) bytes"
        case .truncated(let length):
            "truncated: \(length) bytes, shorter than any record"
        case .badMagic:
            "not a token record (wrong magic bytes)"
        case .unsupportedFormat(let version):
            "record format version \(version) is not supported (this daemon reads version \(RecordCodec.formatVersion))"
        case .authenticationFailed:
            "does not decrypt: written with another key, for another app group, or damaged"
        case .notJSON:
            "decrypted content is not a valid record"
        case .unsupportedSchema(let version):
            "record schema version \(version) is not supported (this daemon reads version \(RecordCodec.schemaVersion))"
        case .groupMismatch:
            "belongs to another app group"
        case .badDate:
            "change time is not a finite number"
        case .tokenUnparseable(let error):
            "stored token no longer parses: \(error)"
        }
    }
}
