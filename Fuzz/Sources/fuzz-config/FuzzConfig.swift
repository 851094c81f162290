// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthDaemon
import Foundation
import FuzzSupport

// The input is the text of one authd.conf (or drop-in). AccessPolicy parses it or names the file and line of the
// first bad one; a file read twice gives the same rules; a file with CRLF line ends reads as with LF; every
// warning names the file and a line of it.

/// Users and groups without NSS: a few names, and numbers as themselves.
struct FakeUsers: UserDatabase {
    func uid(ofUser name: String) -> UInt32? { ["root": 0, "shop-app": 1001, "widget": 1002][name] }
    func gid(ofGroup name: String) -> UInt32? { ["root": 0, "shop-apps": 2001][name] }
}

/// What a policy or its error says, to compare two readings.
enum Reading: Equatable {
    case rules([AppGroup: AccessPolicy.Rule], warnings: Int)
    case error(line: Int, message: String)
}

/// Checks one input.
func check(_ input: [UInt8]) {
    let text = String(decoding: input, as: UTF8.self)
    let lines = text.utf8.count { $0 == UInt8(ascii: "\n") } + 1
    let once = read([("a.conf", text)], lines: lines)

    if case .rules(let rules, let warnings) = once {
        // Sections add up, so the same file twice allows the same, with every warning twice.
        let twice = read([("a.conf", text), ("b.conf", text)], lines: lines)
        invariant(twice == .rules(rules, warnings: 2 * warnings), "a file read twice gives other rules")
    }
    // The same text with the other line ends (when it has no CR of its own) reads the same.
    let lf = text.replacingOccurrences(of: "\r\n", with: "\n")
    if !lf.contains("\r") {
        let other = lf == text ? text.replacingOccurrences(of: "\n", with: "\r\n") : lf
        invariant(read([("a.conf", other)], lines: lines) == once, "CRLF line ends read differently from LF")
    }
}

/// Reads `files`, checking that every message names a file and one of its `lines`.
func read(_ files: [(name: String, text: String)], lines: Int) -> Reading {
    let names = Set(files.map(\.name))
    let policy: AccessPolicy
    do {
        policy = try AccessPolicy(files: files, users: FakeUsers())
    } catch {
        invariant(names.contains(error.file), "an error names the file '\(error.file)'")
        invariant((1...lines).contains(error.line), "an error names line \(error.line) of \(lines)")
        invariant(error.description.hasPrefix("\(error.file):\(error.line): "), "an error does not say where")
        return .error(line: error.line, message: error.message)
    }
    for warning in policy.warnings {
        let place = warning.split(separator: ":", maxSplits: 2)
        let line = place.count == 3 ? Int(place[1]) : nil
        invariant(
            names.contains(String(place[0])) && line.map { (1...lines).contains($0) } == true,
            "a warning does not say where: \(warning)")
    }
    for (group, rule) in policy.rules {
        for uid in rule.uids where uid != 0 {
            invariant(policy.allows(Caller(pid: 1, uid: uid, gid: uid), group: group), "a listed user is refused")
        }
        for gid in rule.gids {
            let primary = Caller(pid: 1, uid: 4_000_000_000, gid: gid)
            let supplementary = Caller(pid: 1, uid: 4_000_000_000, gid: 4_000_000_000, groups: [gid])
            invariant(policy.allows(primary, group: group), "a primary group is refused")
            invariant(policy.allows(supplementary, group: group), "a supplementary group is refused")
        }
    }
    return .rules(policy.rules, warnings: policy.warnings.count)
}

@main
enum FuzzConfig {
    static func main() { FuzzTarget.main("fuzz-config", check) }
}
