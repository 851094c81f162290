// SPDX-License-Identifier: Apache-2.0
import ArgumentParser
import AuthCore
import ExponeaAuth

#if canImport(Glibc)
    import Glibc
#endif

extension AuthCtl {
    struct Metrics: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "metrics",
            abstract: "Show the daemon's figures (io.systemd.Metrics): groups, refreshes, calls, store.",
            usage: "authctl metrics [<pattern>] [--json | --prometheus] [<options>]",
            discussion: """
                Lists the figures the daemon serves over io.systemd.Metrics: a table of name, object (the \
                app group), fields and value. Per-group figures are shown for the groups this user may \
                use; root sees every group. PATTERN, a shell glob, keeps the families whose name matches \
                it, with or without the prefix com.exponea.Auth. (for example 'store_*').

                --json prints {"metrics": [{name, object, fields, value}]}. --prometheus prints \
                Prometheus' text format, names as exponea_authd_<name>, with the HELP and TYPE lines \
                from Describe, for node_exporter's textfile collector (see authctl(1)).
                """
        )

        @OptionGroup var options: DaemonOptions

        @Flag(help: "Print Prometheus' text exposition format instead of a table.")
        var prometheus = false

        @Argument(help: "Show only the families whose name matches this glob.")
        var pattern: String?

        func validate() throws {
            if prometheus && options.json { throw ValidationError("--json and --prometheus exclude each other") }
        }

        func run() async throws {
            let (metrics, families) = try await options.withClient { client in
                (try await client.metrics(), try await client.metricFamilies())
            }
            let shown = metrics.filter { matches($0.name) }
            if options.json {
                printLine(jsonLine(["metrics": shown.map(Self.json)]))
            } else if prometheus {
                let text = PrometheusText.format(shown, families: families.filter { matches($0.name) })
                if !text.isEmpty { printLine(text) }
            } else if shown.isEmpty {
                printLine(pattern.map { "No figures match '\($0)'." } ?? "No figures.")
            } else {
                let rows = shown.map { metric in
                    [
                        metric.name, metric.object ?? "-",
                        metric.fields.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                            .joined(separator: ",").nonEmpty ?? "-",
                        metric.value.description,
                    ]
                }
                printLine(ListGroups.table([["NAME", "OBJECT", "FIELDS", "VALUE"]] + rows))
            }
        }

        private func matches(_ name: String) -> Bool {
            guard let pattern else { return true }
            let prefix = "com.exponea.Auth."
            let short = name.hasPrefix(prefix) ? String(name.dropFirst(prefix.count)) : name
            return fnmatch(pattern, name, 0) == 0 || fnmatch(pattern, short, 0) == 0
        }

        private static func json(_ metric: MetricsInterface.Metric) -> JSONValue {
            let value: JSONValue =
                switch metric.value {
                case .string(let text): .string(text)
                default: .number(metric.value.description)
                }
            return .object([
                "name": .string(metric.name),
                "object": metric.object.map { .string($0) } ?? .null,
                "fields": .object(metric.fields.mapValues { .string($0) }),
                "value": value,
            ])
        }
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
