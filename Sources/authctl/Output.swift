// SPDX-License-Identifier: Apache-2.0
import ExponeaAuth
import Foundation

/// Writes `message` and a newline to standard error.
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Writes `line` and a newline to standard output and flushes it, so that a reader of a pipe sees it at once.
func printLine(_ line: String) {
    print(line)
    fflush(nil)
}

/// Encodes a JSON object on one line with sorted keys. Use `NSNull()` for null.
func jsonLine(_ object: [String: Any]) -> String {
    do {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    } catch {
        // Only strings, numbers, booleans, arrays, dictionaries and NSNull are passed in.
        preconditionFailure("not JSON: \(error)")
    }
}

/// `value`, or JSON null.
func orNull(_ value: Any?) -> Any { value ?? NSNull() }

/// `2026-11-23 01:02:03 +0100 (in 59m 3s)` or `(... 5s ago)`.
func expiryText(_ expiresAt: Date, now: Date = Date()) -> String {
    let left = expiresAt.timeIntervalSince(now)
    let relative =
        left > 0 ? "in \(AuthCtl.Decode.duration(left))" : "\(AuthCtl.Decode.duration(-left)) ago"
    return "\(AuthCtl.Decode.localTime(expiresAt)) (\(relative))"
}

/// `cookie=c-1,registered=jane`, sorted by key.
func customerIdsText(_ ids: [String: String]) -> String {
    ids.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
}

/// Reads a token, at most ``StreamJWT/maximumLength`` bytes and surrounding white space.
enum TokenInput {
    /// Why no token could be read.
    struct Failure: Error {
        var message: String
    }

    /// The token from `path`, or from standard input when `path` is nil or `-`; white space around it removed.
    ///
    /// - Parameter usage: How to pass a token, for the message when there is none.
    static func read(path: String?, usage: String) throws(Failure) -> String {
        let source = path.flatMap { $0 == "-" ? nil : $0 }
        let descriptor: Int32
        if let source {
            descriptor = open(source, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw Failure(message: "cannot open \(source): \(String(cString: strerror(errno)))")
            }
        } else {
            descriptor = STDIN_FILENO
            if isatty(descriptor) == 1 {
                printError("authctl: reading a token from standard input (end with Ctrl-D)")
            }
        }
        defer { if source != nil { close(descriptor) } }
        let name = source ?? "standard input"
        let limit = StreamJWT.maximumLength + 2
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let count = buffer.withUnsafeMutableBytes {
                Foundation.read(descriptor, $0.baseAddress, min($0.count, limit - bytes.count))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw Failure(message: "cannot read \(name): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[..<count])
        }
        let token = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if token.isEmpty {
            throw Failure(message: "no token on \(name); pass one like this: \(usage)")
        }
        if token.utf8.count > StreamJWT.maximumLength {
            throw Failure(
                message: "the token on \(name) is longer than \(StreamJWT.maximumLength) bytes, the most accepted")
        }
        return token
    }
}

/// `value` as a JSON string (RFC 8259): quotes, backslashes and control characters escaped.
func jsonString(_ value: String) -> String {
    var text = "\""
    for scalar in value.unicodeScalars {
        switch scalar {
        case "\"": text += "\\\""
        case "\\": text += "\\\\"
        case "\n": text += "\\n"
        case "\r": text += "\\r"
        case "\t": text += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: text.unicodeScalars.append(scalar)
        }
    }
    return text + "\""
}
