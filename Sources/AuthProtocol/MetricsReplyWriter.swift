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

    /// Appends one figure of family `name`; `fields` in the order given.
    public mutating func append(
        name: String, object: String? = nil, fields: [(String, String)] = [], value: MetricsInterface.Value
    ) {
        closeReply(continues: true)
        append(#"{"parameters":{"name":"#)
        appendString(name)
        if let object {
            append(#","object":"#)
            appendString(object)
        }
        append(#","value":"#)
        switch value {
        case .string(let text): appendString(text)
        default: bytes.append(contentsOf: value.description.utf8)
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

    /// Appends `metric`, its fields sorted by name.
    public mutating func append(_ metric: MetricsInterface.Metric) {
        append(
            name: metric.name, object: metric.object, fields: metric.fields.sorted { $0.key < $1.key },
            value: metric.value)
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

    private mutating func append(_ literal: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// A JSON string: quotes, backslashes and control characters escaped.
    private mutating func appendString(_ string: String) {
        bytes.append(UInt8(ascii: "\""))
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

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
