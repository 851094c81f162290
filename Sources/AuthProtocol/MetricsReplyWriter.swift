// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// Writes `io.systemd.Metrics.List` replies, one framed message per figure, into one buffer: every reply but the
/// last says `continues`, and a list with no figure is the error `NoSuchMetric`, as sd-varlink's sentinel
/// does. Each family's opening is written once for all of its figures.
public struct MetricsReplyWriter: Sendable {
    private var json = JSONWriter()
    /// Whether a reply is written but not yet closed: it continues if another follows.
    private var open = false
    /// The figures written.
    public private(set) var count = 0

    public init() {}

    /// Makes room for `capacity` bytes in all (about 110 a figure).
    public mutating func reserveCapacity(_ capacity: Int) { json.bytes.reserveCapacity(capacity) }

    /// A family's name as the start of its replies, encoded once for all of its figures.
    public struct Family: Sendable {
        fileprivate var opening: [UInt8]

        public init(_ name: String) {
            var json = JSONWriter()
            json.raw(#"{"parameters":{"name":"#)
            json.string(name)
            opening = json.bytes
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
        json.bytes.append(contentsOf: family.opening)
        if let object {
            json.raw(#","object":"#)
            json.string(object)
        }
        json.raw(#","value":"#)
        switch value {
        case .string(let text): json.string(text)
        case .unsigned(let number): json.integer(number)
        case .signed(let number): json.integer(number)
        case .double(let number): if !json.number(number) { json.raw("0") }
        }
        if !fields.isEmpty {
            json.raw(#","fields":{"#)
            for (index, (key, value)) in fields.enumerated() {
                if index > 0 { json.raw(",") }
                json.string(key)
                json.raw(":")
                json.string(value)
            }
            json.raw("}")
        }
        json.raw("}")
        open = true
        count += 1
    }

    /// The framed replies; `NoSuchMetric` when no figure was written.
    public mutating func finish() -> [UInt8] {
        guard count > 0 else { return VarlinkReplyEncoder.error(.noSuchMetric) }
        closeReply(continues: false)
        return json.bytes
    }

    private mutating func closeReply(continues: Bool) {
        guard open else { return }
        json.raw(continues ? #","continues":true}"# : "}")
        json.bytes.append(0)
        open = false
    }
}
