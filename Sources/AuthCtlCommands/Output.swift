// SPDX-License-Identifier: Apache-2.0
import AuthCore
import ExponeaAuth

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Writes `message` and a newline to standard error, unbuffered.
func printError(_ message: String) {
    writeAll(STDERR_FILENO, Array((message + "\n").utf8))
}

/// Writes `line` and a newline to standard output, unbuffered, so that a reader of a pipe sees it at once.
/// (Not `print`: it boxes its arguments as `Any` and looks up their conformances, a cost on a command's first
/// line.)
func printLine(_ line: String) {
    writeAll(STDOUT_FILENO, Array((line + "\n").utf8))
}

/// Writes all of `bytes` to `descriptor`, retrying after a signal; gives up silently when the reader is gone.
private func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) {
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let count = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            offset += count
        }
    }
}

// MARK: JSON output

/// A value `--json` prints: each conformance says which JSON value it is, so the output is typed end to end
/// and written by ``JSONValue/text``.
protocol JSONRepresentable {
    /// This value as JSON.
    var json: JSONValue { get }
}

extension String: JSONRepresentable {
    var json: JSONValue { .string(self) }
}

extension Bool: JSONRepresentable {
    var json: JSONValue { .bool(self) }
}

extension Int: JSONRepresentable {
    var json: JSONValue { .number(String(self)) }
}

extension Int32: JSONRepresentable {
    var json: JSONValue { .number(String(self)) }
}

extension UInt64: JSONRepresentable {
    var json: JSONValue { .number(String(self)) }
}

extension Double: JSONRepresentable {
    /// An integral value (Unix seconds, mostly) without a fraction, as JSONSerialization writes it: `1900000000`,
    /// `1900000000.5`.
    var json: JSONValue {
        guard isFinite else { return .null }
        if rounded(.towardZero) == self, magnitude < 9_007_199_254_740_992 { return .number(String(Int64(self))) }
        return .number(description)
    }
}

extension JSONValue: JSONRepresentable {
    var json: JSONValue { self }
}

extension Optional: JSONRepresentable where Wrapped: JSONRepresentable {
    /// `null` when there is no value.
    var json: JSONValue { map(\.json) ?? .null }
}

extension Array: JSONRepresentable where Element: JSONRepresentable {
    var json: JSONValue { .array(map(\.json)) }
}

extension Dictionary: JSONRepresentable where Key == String, Value: JSONRepresentable {
    var json: JSONValue { .object(mapValues(\.json)) }
}

extension JSONValue {
    /// One line of JSON, as ``JSONWriter`` writes it: members sorted by name, no white space, `/` not escaped.
    var text: String {
        var json = JSONWriter()
        json.value(self)
        return String(decoding: json.bytes, as: UTF8.self)
    }
}

/// A JSON object on one line with sorted keys; an optional member that is nil is written as `null`.
func jsonLine(_ members: [String: any JSONRepresentable]) -> String {
    JSONValue.object(members.mapValues { $0.json }).text
}

/// `value` as a JSON string (RFC 8259), as ``JSONWriter`` escapes it.
func jsonString(_ value: String) -> String {
    var json = JSONWriter()
    json.string(value)
    return String(decoding: json.bytes, as: UTF8.self)
}

// MARK: Text output

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

/// `text` without the white space (space, tab, newline, carriage return) around it.
func trimmingWhiteSpace(_ text: some StringProtocol) -> String {
    let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "\r\n" }
    guard let first = text.firstIndex(where: { !isSpace($0) }) else { return "" }
    let last = text.lastIndex(where: { !isSpace($0) })!
    return String(text[first...last])
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
        let bytes: [UInt8]
        do {
            bytes = try readUpTo(StreamJWT.maximumLength + 2, from: descriptor)
        } catch {
            throw Failure(message: "cannot read \(name): \(String(cString: strerror(error.code)))")
        }
        let token = trimmingWhiteSpace(String(decoding: bytes, as: UTF8.self))
        if token.isEmpty {
            throw Failure(message: "no token on \(name); pass one like this: \(usage)")
        }
        if token.utf8.count > StreamJWT.maximumLength {
            throw Failure(
                message: "the token on \(name) is longer than \(StreamJWT.maximumLength) bytes, the most accepted")
        }
        return token
    }

    /// An errno from `read(2)`.
    struct ReadError: Error {
        var code: Int32
    }

    /// At most `limit` bytes from `descriptor`, until end of file.
    static func readUpTo(_ limit: Int, from descriptor: Int32) throws(ReadError) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let count = buffer.withUnsafeMutableBytes {
                Glibc.read(descriptor, $0.baseAddress, min($0.count, limit - bytes.count))
            }
            if count < 0 {
                if errno == EINTR { continue }
                throw ReadError(code: errno)
            }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[..<count])
        }
        return bytes
    }
}
