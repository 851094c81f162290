// SPDX-License-Identifier: Apache-2.0
/// Writes `io.systemd.Metrics.List` replies, one framed message per figure, into one buffer: every reply but the
/// last says `continues`, and a list with no figure is the error `NoSuchMetric`, as sd-varlink's sentinel
/// does. Written by hand: thousands of figures through JSONEncoder took tens of milliseconds.
public struct MetricsReplyWriter: Sendable {
    private var bytes: [UInt8] = []
    /// Whether a reply is written but not yet closed: it continues if another follows.
    private var open = false
    /// The figures written.
    public private(set) var count = 0

    public init() {}

    /// Makes room for `capacity` bytes in all (about 110 a figure).
    public mutating func reserveCapacity(_ capacity: Int) { bytes.reserveCapacity(capacity) }

    /// A family's name as the start of its replies, encoded once for all of its figures.
    public struct Family: Sendable {
        fileprivate var opening: [UInt8]

        public init(_ name: String) {
            var writer = MetricsReplyWriter()
            writer.append(#"{"parameters":{"name":"#)
            writer.appendString(name)
            opening = writer.bytes
        }
    }

    /// Appends one figure of family `name`; `fields` in the order given.
    public mutating func append(
        name: String, object: String? = nil, fields: [(String, String)] = [], value: MetricsInterface.Value
    ) {
        append(Family(name), object: object, fields: fields, value: value)
    }

    /// Appends one figure of `family`; `fields` in the order given.
    public mutating func append(
        _ family: Family, object: String? = nil, fields: [(String, String)] = [], value: MetricsInterface.Value
    ) {
        closeReply(continues: true)
        bytes.append(contentsOf: family.opening)
        if let object {
            append(#","object":"#)
            appendString(object)
        }
        append(#","value":"#)
        switch value {
        case .string(let text): appendString(text)
        case .unsigned(let number): appendDecimal(number, negative: false)
        case .signed(let number): appendDecimal(number.magnitude, negative: number < 0)
        case .double: bytes.append(contentsOf: value.description.utf8)
        }
        if !fields.isEmpty {
            append(#","fields":{"#)
            for (index, (key, value)) in fields.enumerated() {
                if index > 0 { append(",") }
                appendString(key)
                append(":")
                appendString(value)
            }
            append("}")
        }
        append("}")
        open = true
        count += 1
    }

    /// A whole number in decimal, without making a string of it.
    private mutating func appendDecimal(_ magnitude: UInt64, negative: Bool) {
        if negative { bytes.append(UInt8(ascii: "-")) }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for 20 digits
        var count = 0
        var rest = magnitude
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
                count += 1
            } while rest > 0
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }

    /// The framed replies; `NoSuchMetric` when no figure was written.
    public mutating func finish() -> [UInt8] {
        guard count > 0 else { return VarlinkReplyEncoder.error(.noSuchMetric) }
        closeReply(continues: false)
        return bytes
    }

    private mutating func closeReply(continues: Bool) {
        guard open else { return }
        append(continues ? #","continues":true}"# : "}")
        bytes.append(0)
        open = false
    }

    fileprivate mutating func append(_ literal: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// A JSON string: quotes, backslashes and control characters escaped. A string with none of them (every
    /// name, group and field the daemon writes) is copied whole: byte by byte was a quarter of List's time.
    fileprivate mutating func appendString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
        let copied = string.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
            for byte in utf8 where Self.needsEscape(byte) { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if copied == true {
            bytes.append(UInt8(ascii: "\""))
            return
        }
        for byte in string.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case ..<0x20:
                append(#"\u00"#)
                bytes.append(Self.hexDigit(byte >> 4))
                bytes.append(Self.hexDigit(byte & 0xf))
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
