// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import ExponeaAuth

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

extension AuthCtl {
    struct Decode: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "decode",
            abstract: "Show the header and claims of a stream JWT read from standard input.",
            discussion: """
                Prints the algorithm, key id, expiry (in local time, with the time left), the token's \
                state and its customer ids. The signature is not checked: the key is the backend's.

                  authctl decode < token.jwt
                  printf '%s' "$TOKEN" | authctl decode --json

                Exit status: 0 when the token parses (even if it has expired), 1 when it does not.
                """
        )

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        func run() throws {
            // The one token reader (TokenInput), as `set -` and `identify --token-stdin` use.
            let text: String
            do {
                text = try TokenInput.read(path: nil, usage: "authctl decode < token.jwt")
            } catch {
                printError("authctl: \(error.message)")
                throw AuthCtlExit.failure
            }
            let jwt: StreamJWT
            do {
                jwt = try StreamJWT(parsing: text)
            } catch {
                printError("authctl: the token on standard input is not a stream JWT: \(error)")
                throw AuthCtlExit.failure
            }
            let now = Date()
            printLine(json ? Self.json(jwt, now: now) : Self.text(jwt, now: now))
        }

        static func text(_ jwt: StreamJWT, now: Date) -> String {
            let (header, customerIds, expiresAt) = (jwt.header, jwt.claims.customerIds, jwt.expiresAt)
            let left = expiresAt.timeIntervalSince(now)
            let relative = left > 0 ? "in \(duration(left))" : "\(duration(-left)) ago"
            var lines = [
                "algorithm:    \(header.algorithm)",
                "key id:       \(header.keyID ?? "(none)")",
                "expires:      \(localTime(expiresAt)) (\(relative))",
                "state:        \(jwt.state(at: now))",
                "customer ids:" + (customerIds.isEmpty ? " (none)" : ""),
            ]
            for (key, value) in customerIds.sorted(by: { $0.key < $1.key }) {
                lines.append("  \(key) = \(value)")
            }
            return lines.joined(separator: "\n")
        }

        /// `{algorithm, keyID, expiresAt, secondsLeft, state, customerIds}`; without keyID when the token has none.
        static func json(_ jwt: StreamJWT, now: Date) -> String {
            var members: [String: any JSONRepresentable] = [
                "algorithm": jwt.header.algorithm,
                "expiresAt": jwt.expiresAt.timeIntervalSince1970,
                "secondsLeft": jwt.expiresAt.timeIntervalSince(now).rounded(.down),
                "state": jwt.state(at: now).rawValue,
                "customerIds": jwt.claims.customerIds,
            ]
            if let keyID = jwt.header.keyID { members["keyID"] = keyID }
            return jsonLine(members)
        }

        /// `2026-11-23 01:02:03 +0100`, in the local time zone (`TZ`, else `/etc/localtime`).
        static func localTime(_ date: Date) -> String {
            var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
            var parts = tm()
            guard localtime_r(&seconds, &parts) != nil else { return "\(Int64(seconds))" }
            var buffer = [CChar](repeating: 0, count: 64)
            let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S %z", &parts)
            return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }

        /// `1d 2h 3m 4s`, leaving out leading zero units (`5m 0s`, `0s`).
        static func duration(_ seconds: TimeInterval) -> String {
            var rest = Int(seconds.rounded(.down))
            var parts: [String] = []
            for (suffix, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
                if rest >= size || !parts.isEmpty || size == 1 {
                    parts.append("\(rest / size)\(suffix)")
                }
                rest %= size
            }
            return parts.joined(separator: " ")
        }
    }
}
