// SPDX-License-Identifier: Apache-2.0
// authd-store-writer: saves token records in a tight loop until it is killed, for the crash-safety test.
//
//     authd-store-writer <store-directory> [groups]
//     authd-store-writer <store-directory> <groups> --threads <clear-every>
//
// The store key comes from $CREDENTIALS_DIRECTORY/exponea-authd.store-key (as in the daemon). Each round raises a
// generation counter G and saves, for every group writer-<i>, a record whose every field carries G:
// generation G, changedAt G seconds after 1970, customer ids {"registered": "writer-G"} and a token whose ids
// are {"registered": "writer-G", "group": "writer-<i>"}. After a round is saved in full it prints "wrote G".
// It starts from the highest generation already stored, so several runs keep counting up.
//
// With --threads, each group has a thread of its own that saves its group's next generation over and over, as
// the daemon's store writers do for several groups at once, and prints "saved <group> <generation>" after each
// save returns; every <clear-every>th generation it then removes the record (a clear) and prints "removed <group>
// <generation>": the power-cut test's acknowledgements.

import AuthCore
import AuthStore
import Foundation
import Logging

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("authd-store-writer: \(message)\n".utf8))
    exit(1)
}

func base64URL(_ text: String) -> String {
    Data(text.utf8).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A well-formed (unsigned: the daemon never checks signatures) token for `group` at `generation`.
func token(group: AppGroup, generation: UInt64) -> StreamJWT {
    let header = #"{"alg":"HS512","typ":"JWT"}"#
    let payload = #"{"exp":4000000000,"ids":{"group":"\#(group.name)","registered":"writer-\#(generation)"}}"#
    do {
        return try StreamJWT(parsing: base64URL(header) + "." + base64URL(payload) + ".c2lnbmF0dXJl")
    } catch {
        fail("built a token that does not parse: \(error)")
    }
}

let arguments = CommandLine.arguments
let threaded = arguments.count == 5 && arguments[3] == "--threads"
let clearEvery = threaded ? UInt64(arguments[4]) ?? 0 : 0
guard (2...3).contains(arguments.count) || (threaded && clearEvery > 0) else {
    fail("usage: authd-store-writer <store-directory> [groups] | <store-directory> <groups> --threads <clear-every>")
}
let directory = arguments[1]
let groupCount = arguments.count == 3 ? Int(arguments[2]) ?? 0 : 4
guard groupCount > 0 else { fail("groups must be a positive number") }

let logger = Logger(label: "authd-store-writer")
let store: TokenStore
let groups: [AppGroup]
do {
    let key = try StoreKey.resolve(
        directory: directory, environment: ProcessInfo.processInfo.environment, logger: logger)
    store = try TokenStore(directory: directory, key: key, logger: logger)
    groups = try (0..<groupCount).map { try AppGroup("writer-\($0)") }
} catch {
    fail("\(error)")
}

/// Saves `group`'s next generation over and over, printing each once saved; every `clearEvery`th is removed again
/// once saved (a clear), printed once removed.
@Sendable func saveForever(_ group: AppGroup, from stored: UInt64, clearEvery: UInt64, in store: TokenStore) -> Never {
    var generation = stored
    while true {
        generation += 1
        let record = TokenRecord(
            group: group, token: token(group: group, generation: generation),
            customerIds: ["registered": "writer-\(generation)"], generation: generation,
            changedAt: Date(timeIntervalSince1970: Double(generation)))
        do {
            try store.save(record)
            acknowledge("saved", group, generation)
            if generation % clearEvery == 0 {
                try store.remove(group)
                acknowledge("removed", group, generation)
            }
        } catch {
            fail("\(error)")
        }
    }
}

/// Prints "<event> <group> <generation>" in one write(2), shorter than PIPE_BUF: lines of several threads do not
/// mix.
@Sendable func acknowledge(_ event: String, _ group: AppGroup, _ generation: UInt64) {
    let line = Array("\(event) \(group.name) \(generation)\n".utf8)
    _ = line.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

if threaded {
    for group in groups {
        let stored: UInt64
        do {
            stored = try store.load(group)?.generation ?? 0
        } catch {
            fail("\(error)")
        }
        let store = store
        Thread.detachNewThread { saveForever(group, from: stored, clearEvery: clearEvery, in: store) }
    }
    while true { pause() }
}

var generation: UInt64 = 0
for group in groups {
    do {
        if let record = try store.load(group) { generation = max(generation, record.generation) }
    } catch {
        fail("\(error)")
    }
}

while true {
    generation += 1
    for group in groups {
        let ids = ["registered": "writer-\(generation)"]
        let record = TokenRecord(
            group: group, token: token(group: group, generation: generation), customerIds: ids,
            generation: generation, changedAt: Date(timeIntervalSince1970: Double(generation)))
        do {
            try store.save(record)
        } catch {
            fail("\(error)")
        }
    }
    // Unbuffered: a line the test reads is a round that is on disk.
    FileHandle.standardOutput.write(Data("wrote \(generation)\n".utf8))
}
