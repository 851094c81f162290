// SPDX-License-Identifier: Apache-2.0
import ExponeaAuth

/// Prometheus' text exposition format (version 0.0.4) for the daemon's figures.
///
/// `com.exponea.Auth.<name>` becomes `exponea_authd_<name>`; the object (an app group) becomes the label
/// `group`, and each field a label. A family of type `string` (the version) becomes a gauge of value 1 with the
/// text as a label, Prometheus' "info" idiom; a `_count` and `_sum` pair becomes one summary.
enum PrometheusText {
    static let prefix = "exponea_authd_"

    static func format(_ metrics: [MetricsInterface.Metric], families: [MetricsInterface.Family]) -> String {
        let described = Dictionary(families.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        // Every figure of a family together, families in the order they first came.
        var order: [String] = []
        var byFamily: [String: [MetricsInterface.Metric]] = [:]
        for metric in metrics {
            if byFamily[metric.name] == nil { order.append(metric.name) }
            byFamily[metric.name, default: []].append(metric)
        }
        var lines: [String] = []
        var written: Set<String> = []
        for family in order where !written.contains(family) {
            // A `_count` and `_sum` pair is one summary (without quantiles): Prometheus' type for them.
            if family.hasSuffix("_count"), byFamily[String(family.dropLast(6)) + "_sum"] != nil {
                let base = String(family.dropLast(6))
                let name = metricName(base)
                if let description = described[base + "_sum"]?.description {
                    lines.append("# HELP \(name) \(escapeHelp(description))")
                }
                lines.append("# TYPE \(name) summary")
                for part in [family, base + "_sum"] {
                    lines += samples(byFamily[part] ?? [], named: metricName(part), family: part)
                    written.insert(part)
                }
                continue
            }
            let name = metricName(family)
            if let description = described[family]?.description {
                lines.append("# HELP \(name) \(escapeHelp(description))")
            }
            lines.append("# TYPE \(name) \(described[family]?.type == .counter ? "counter" : "gauge")")
            lines += samples(byFamily[family] ?? [], named: name, family: family)
            written.insert(family)
        }
        return lines.joined(separator: "\n")
    }

    /// One line per figure: the object as the label `group`, each field a label; a text as a label of value 1.
    private static func samples(_ metrics: [MetricsInterface.Metric], named name: String, family: String) -> [String] {
        metrics.map { metric in
            var labels: [(String, String)] = []
            if let object = metric.object { labels.append(("group", object)) }
            labels += metric.fields.sorted { $0.key < $1.key }.map { (labelName($0.key), $0.value) }
            let value: String
            if case .string(let text) = metric.value {
                labels.append((labelName(String(family.split(separator: ".").last ?? "value")), text))
                value = "1"
            } else {
                value = metric.value.description
            }
            let rendered = labels.map { "\($0.0)=\"\(escapeLabel($0.1))\"" }.joined(separator: ",")
            return labels.isEmpty ? "\(name) \(value)" : "\(name){\(rendered)} \(value)"
        }
    }

    /// `com.exponea.Auth.calls_total` → `exponea_authd_calls_total`; any other character than `[a-zA-Z0-9_]`
    /// becomes `_`.
    static func metricName(_ family: String) -> String {
        let short = family.hasPrefix("com.exponea.Auth.") ? String(family.dropFirst("com.exponea.Auth.".count)) : family
        return prefix + sanitized(short)
    }

    private static func labelName(_ name: String) -> String {
        let clean = sanitized(name)
        return clean.first?.isNumber == true ? "_" + clean : clean
    }

    private static func sanitized(_ name: String) -> String {
        String(
            name.unicodeScalars.map { scalar -> Character in
                scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || scalar == "_")
                    ? Character(scalar) : "_"
            })
    }

    private static func escapeHelp(_ text: String) -> String {
        text.replacingAll("\\", with: "\\\\").replacingAll("\n", with: "\\n")
    }

    private static func escapeLabel(_ text: String) -> String {
        escapeHelp(text).replacingAll("\"", with: "\\\"")
    }
}

extension String {
    /// Every occurrence of `target` replaced (FoundationEssentials has no `replacingOccurrences`).
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
