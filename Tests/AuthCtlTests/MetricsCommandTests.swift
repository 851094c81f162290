// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// `authctl metrics` against the real daemon: its figures (io.systemd.Metrics) move with what they count, each
/// family is described, a caller sees only the groups it may use, and `--prometheus` is what Prometheus' own
/// parser reads.
@Suite("authctl metrics (io.systemd.Metrics)", .offPool)
struct MetricsCommandTests {
    static let token = TestJWT().token(expiringIn: 3600, ids: ["registered": "alice"])

    /// The figures `authctl metrics --json` lists, keyed by name, object and fields.
    static func figures(_ result: ChildProcess.Result) throws -> [String: Double] {
        #expect(result.status == 0, "\(result.standardError)")
        let metrics = try parseJSON(result.standardOutput)["metrics"] as? [[String: Any]] ?? []
        var figures: [String: Double] = [:]
        for metric in metrics {
            let name = (metric["name"] as? String ?? "").replacingOccurrences(of: "com.exponea.Auth.", with: "")
            let object = metric["object"] as? String
            let fields = (metric["fields"] as? [String: String] ?? [:]).sorted { $0.key < $1.key }
                .map { "\($0.key)=\($0.value)" }
            let key = ([name] + (object.map { ["group=\($0)"] } ?? []) + fields).joined(separator: " ")
            figures[key] = (metric["value"] as? NSNumber)?.doubleValue ?? 1
        }
        return figures
    }

    @Test func eachCounterMovesAfterWhatItCountsAndOnlyThen() throws {
        let fixture = try DaemonFixture()
        func metrics() throws -> [String: Double] { try Self.figures(fixture.authctl(["metrics", "--json"])) }

        let before = try metrics()
        #expect(before["groups state=valid"] == 0)
        #expect(before["store_writes_total"] == 0)
        #expect(before["calls_total method=SetToken result=ok"] == nil)
        #expect(before["version"] != nil)
        #expect(before["connections"] == 1)  // this call's own

        // The pre-flight of a group without a token asks for one (notProvided); listing does not count itself.
        #expect(try fixture.authctl(["preflight", "com.example.shop"]).status == 3)
        let asked = try metrics()
        #expect(asked["refreshes_asked_total group=com.example.shop reason=notProvided"] == 1)
        #expect(asked["refreshes_answered_total group=com.example.shop"] == 0)
        #expect(asked["calls_total method=Preflight result=ok"] == 1)
        #expect(asked["store_writes_total"] == 0)

        try fixture.set("com.example.shop", Self.token)
        let set = try metrics()
        #expect(set["store_writes_total"] == 1)
        #expect(set["store_write_duration_seconds_count"] == 1)
        #expect(set["calls_total method=SetToken result=ok"] == 1)
        #expect(set["generation group=com.example.shop"] == 1)
        #expect(set["groups state=valid"] == 1)
        #expect(set["refreshes_answered_total group=com.example.shop"] == 1)
        #expect(set["refresh_duration_seconds_count group=com.example.shop"] == 1)
        let left = set["token_seconds_left group=com.example.shop"] ?? 0
        #expect(left > 3500 && left <= 3600)

        // GetToken answered at once is counted too; a bad group name is counted by its error.
        #expect(try fixture.authctl(["get", "com.example.shop"]).status == 0)
        _ = try fixture.authctl(["get", "-bad-"])
        #expect(try fixture.authctl(["set", "com.example.shop"], input: "not a token\n").status != 0)
        let after = try metrics()
        #expect(after["calls_total method=GetToken result=ok"] == 1)
        #expect(after["calls_total method=SetToken result=MalformedToken"] == 1)
        #expect(after["store_writes_total"] == 1)  // the refused token wrote nothing
        #expect(after["refreshes_answered_total group=com.example.shop"] == 1)
    }

    /// Claims, subscriptions, records set aside and refused connections, each counted after it happened.
    @Test func claimsSubscribersRecordsSetAsideAndRefusalsAreCounted() throws {
        let fixture = try DaemonFixture(arguments: ["--max-connections", "3"])
        func metrics() throws -> [String: Double] { try Self.figures(fixture.authctl(["metrics", "--json"])) }
        let before = try metrics()
        #expect(before["subscribers"] == 0)
        #expect(before["connections_refused_total reason=serverFull"] == 0)
        #expect(before["refresh_claims_total group=shop outcome=granted"] == nil)

        let claimant = try UnixClient(path: fixture.socketPath)
        defer { claimant.close() }
        let claim = #"{"method":"com.exponea.Auth.ClaimRefresh","parameters":{"group":"shop","generation":0}}"#
        #expect(try claimant.exchange(claim).contains(#""granted":true"#))
        let subscriber = try UnixClient(path: fixture.socketPath)
        defer { subscriber.close() }
        try subscriber.send(#"{"method":"com.exponea.Auth.Subscribe","parameters":{"group":"shop"},"more":true}"#)
        #expect(try subscriber.receiveReply().contains(#""kind":"state""#))
        let claimed = try metrics()
        #expect(claimed["refresh_claims_total group=shop outcome=granted"] == 1)
        #expect(claimed["refresh_claims_total group=shop outcome=released"] == nil)
        #expect(claimed["subscribers"] == 1)

        let release = #"{"method":"com.exponea.Auth.ReleaseRefresh","parameters":{"group":"shop","generation":0}}"#
        #expect(try claimant.exchange(release).contains(#""released":true"#))
        // Two connections held and authctl's own: a fourth is refused at once.
        let third = try UnixClient(path: fixture.socketPath)  // closed below, to make room for authctl
        #expect(try third.exchange(#"{"method":"org.varlink.service.GetInfo"}"#).contains("exponea-authd"))
        let refused = try UnixClient(path: fixture.socketPath)
        defer { refused.close() }
        #expect(try refused.receiveUntilClosed(timeout: .seconds(5)))
        third.close()
        let after = try metrics()
        #expect(after["refresh_claims_total group=shop outcome=released"] == 1)
        #expect(after["connections_refused_total reason=serverFull"] == 1)
        #expect(after["store_records_set_aside_total"] == 0)
    }

    @Test func aRecordSetAsideAtStartIsCounted() throws {
        let daemon = try DaemonUnderTest(start: false)
        try FileManager.default.createDirectory(
            atPath: daemon.stateDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let bad = daemon.stateDirectory + "/news.token"
        try Data("not a record".utf8).write(to: URL(fileURLWithPath: bad))
        chmod(bad, 0o600)
        try daemon.start()
        let result = try ChildProcess.run(
            BuildProducts.executable("authctl"), ["metrics", "--json", "store_*"],
            environment: ["EXPONEA_AUTHD_SOCKET": daemon.socketPath, "PATH": "/usr/bin:/bin"])
        #expect(try Self.figures(result)["store_records_set_aside_total"] == 1)
    }

    @Test func everyListedFamilyIsDescribedAndPrometheusReadsTheOutput() throws {
        let fixture = try DaemonFixture()
        try fixture.set("com.example.shop", Self.token)
        #expect(try fixture.authctl(["preflight", "com.example.other"]).status == 3)
        let listed =
            try parseJSON(fixture.authctl(["metrics", "--json"]).standardOutput)["metrics"] as? [[String: Any]]
        let names = Set((listed ?? []).compactMap { $0["name"] as? String })
        #expect(names.count > 15)

        let prometheus = try fixture.authctl(["metrics", "--prometheus"])
        #expect(prometheus.status == 0, "\(prometheus.standardError)")
        // Describe, asked over the socket: every family List returns is among its replies.
        let describe = """
            import json, socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b'{"method":"io.systemd.Metrics.Describe","more":true}\\0')
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
                replies = [json.loads(m) for m in data.split(b"\\0")[:-1]]
                if replies and not replies[-1].get("continues"): break
            for reply in replies:
                print(reply["parameters"]["name"], reply["parameters"]["type"])
            """
        let described = try ChildProcess.run("/usr/bin/python3", ["-c", describe, fixture.socketPath])
        #expect(described.status == 0, "\(described.standardError)")
        let families = Set(
            described.standardOutput.split(separator: "\n").compactMap {
                $0.split(separator: " ").first.map(String.init)
            })
        #expect(names.isSubset(of: families), "not described: \(names.subtracting(families))")
        #expect(described.standardOutput.contains("com.exponea.Auth.version string"))
        #expect(described.standardOutput.contains("com.exponea.Auth.calls_total counter"))

        let parse = """
            import sys
            from prometheus_client.parser import text_string_to_metric_families
            families = list(text_string_to_metric_families(sys.stdin.read()))
            for family in families:
                for sample in family.samples:
                    print(family.type, sample.name, sample.labels.get("group", "-"), sample.value)
            """
        let parsed = try ChildProcess.run(Python.varlink, ["-c", parse], input: prometheus.standardOutput)
        #expect(parsed.status == 0, "\(parsed.standardError)")
        let samples = parsed.standardOutput
        #expect(samples.contains("gauge exponea_authd_generation com.example.shop 1\n"), "\(samples)")
        #expect(samples.contains("gauge exponea_authd_version - 1\n"))
        #expect(samples.contains("counter exponea_authd_store_writes_total - 1\n"))
        #expect(samples.contains("summary exponea_authd_store_write_duration_seconds_count - 1\n"))
        #expect(samples.contains("counter exponea_authd_refreshes_asked_total com.example.other 1\n"))

        // A pattern keeps the families it matches, with or without the prefix.
        let store = try Self.figures(fixture.authctl(["metrics", "--json", "store_*"]))
        #expect(!store.isEmpty && store.keys.allSatisfy { $0.hasPrefix("store_") }, "\(store.keys)")
        #expect(try fixture.authctl(["metrics", "--json", "--prometheus"]).status == 2)
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run authctl as another user"))
    func aCallerSeesNoFigureOfAGroupItMayNotUse() throws {
        let config = try TemporaryDirectory(prefix: "authd-etc")
        defer { config.remove() }
        try "[AppGroup]\nName=vault\nUsers=0\n\n[AppGroup]\nName=lobby\nUsers=0 65534\n".write(
            toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: config.path)
        let fixture = try DaemonFixture(configDirectory: config.path)
        try fixture.set("vault", Self.token)
        try fixture.set("lobby", Self.token)

        let root = try Self.figures(fixture.authctl(["metrics", "--json"]))
        #expect(root["generation group=vault"] == 1 && root["generation group=lobby"] == 1)
        #expect(root["groups state=valid"] == 2)

        let nobody = try PlantedSocketTests.authctl(
            ["metrics", "--json"], as: 65534, environment: fixture.environment)
        let seen = try Self.figures(nobody)
        #expect(seen["generation group=lobby"] == 1)
        #expect(!seen.keys.contains { $0.contains("vault") }, "\(seen.keys)")
        #expect(seen["groups state=valid"] == 1)
        #expect(!nobody.standardOutput.contains("vault"))
    }
}
