// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The benchmark's table: one row per figure, with its same-run baseline and goal where it has them.
final class Report {
    struct Row {
        var measure: String
        var value: String
        var baseline: String = ""
        var ratio: String = ""
        var goal: String = ""
        /// nil when the row has no goal.
        var met: Bool? = nil
    }

    private(set) var rows: [Row] = []

    func add(_ row: Row) {
        rows.append(row)
        var line = "  \(row.measure): \(row.value)"
        if !row.baseline.isEmpty { line += " (floor \(row.baseline), \(row.ratio))" }
        if let met = row.met { line += met ? " [goal \(row.goal): met]" : " [goal \(row.goal): MISSED]" }
        progress(line)
    }

    /// The table as Markdown.
    var markdown: String {
        var lines = [
            "| measure | exponea-authd | floor (same run) | ratio | goal | |",
            "|---|---:|---:|---:|---|---|",
        ]
        for row in rows {
            let verdict = row.met.map { $0 ? "met" : "**missed**" } ?? ""
            lines.append(
                "| \(row.measure) | \(row.value) | \(row.baseline) | \(row.ratio) | \(row.goal) | \(verdict) |")
        }
        return lines.joined(separator: "\n")
    }

    var missed: [Row] { rows.filter { $0.met == false } }
}

/// A line on standard error, so the table on standard output stays clean.
func progress(_ line: String) {
    var line = line + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// Microseconds from nanoseconds, for the table.
func microseconds(_ nanoseconds: UInt64) -> String {
    let value = Double(nanoseconds) / 1_000
    return value < 100 ? String(format: "%.1f µs", value) : String(format: "%.0f µs", value)
}

/// Milliseconds from nanoseconds, for the table.
func milliseconds(_ nanoseconds: UInt64) -> String { String(format: "%.2f ms", Double(nanoseconds) / 1e6) }

/// `a / b` as "2.1x".
func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? String(format: "%.1fx", a / b) : "" }

#if canImport(Glibc)
    import Glibc
#endif
