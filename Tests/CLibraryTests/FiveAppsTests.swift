// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Five `poll-app`s of one group against the real daemon and the test backend: one fetch per expiry for all of
/// them, a claimant that dies replaced at once, and the current token on every request. The five-app run is made on
/// each architecture: arm64 and armhf apps under qemu-user, against the native daemon.
@Suite("libexponea-auth: five apps of one group", .offPool)
struct FiveAppsTests {
    /// A line `refresh for generation G (REASON): fetched`: G and REASON.
    static func fetch(_ line: String) -> (generation: String, reason: String)? {
        guard let match = line.wholeMatch(of: /refresh for generation ([0-9]+) \(([A-Za-z]+)\): fetched/) else {
            return nil
        }
        return (String(match.output.1), String(match.output.2))
    }

    @Test(arguments: Architecture.allCases)
    func oneFetchPerExpiryAndEveryRequestAnsweredWithTheCurrentToken(on architecture: Architecture) throws {
        let daemon = try DaemonUnderTest()
        // Tokens valid for 63 s: each is in its last minute 2-3 s after it was minted, and the daemon asks the
        // group for the next one (expiredSoon). 240 requests 50 ms apart make a run of 12 s or more: four or so
        // expiries, with requests close enough together that some carry a token the backend has just superseded
        // (minted its successor) before the daemon has it.
        let backend = try TestBackend(lifetime: 63)
        let apps = try (0..<5).map { _ in
            try ExampleApp.poll(["240", "50"], daemon: daemon, backend: backend, on: architecture)
        }
        let statuses = apps.map { $0.waitForExit(timeout: .seconds(90)) }

        // (c) The stream is strict: it answers 401 to any token but the newest one it minted. Every request ended
        // 200, so every one carried the current token, or was retried once with it.
        for (app, status) in zip(apps, statuses) {
            #expect(status == 0, "\(app.output)")
            #expect(
                app.lines.last == "requests=240 ok=240 failed=0 refreshes=\(app.lines.compactMap(Self.fetch).count)")
            let requests = app.lines.filter { $0.hasPrefix("request ") }
            #expect(requests.count == 240)
            for line in requests where !line.hasSuffix(": 200") { Issue.record("\(app.name): \(line)") }
        }

        // (a) One fetch per generation across the five apps: the backend counted none twice, and the apps' handlers
        // ran once each.
        let stats = try backend.stats()
        #expect(stats.fetchesPerGeneration.values.allSatisfy { $0 == 1 }, "\(stats.fetchesPerGeneration)")
        let fetches = apps.flatMap { $0.lines.compactMap(Self.fetch) }
        #expect(fetches.count == stats.fetches)
        #expect(Set(fetches.map(\.generation)) == Set(stats.fetchesPerGeneration.keys))
        // The first one, for the empty group; then at least two expiries, each refreshed once.
        #expect(fetches.filter { $0.reason == "notProvided" }.map(\.generation) == ["0"])
        let expiries = fetches.filter { $0.reason == "expiredSoon" }
        #expect(expiries.count >= 2, "\(fetches)")
        #expect(stats.expired == 0 && stats.forged == 0)
        #expect(stats.accepted == 5 * 240)
        #expect(!daemon.output.contains(TestBackend.tokenHeader))
    }

    @Test func aKilledClaimantIsReplacedAtOnceNotAfterItsLease() throws {
        // A lease far longer than the test: the claim of a claimant that hangs alive lasts 60 s.
        let daemon = try DaemonUnderTest(arguments: ["--refresh-lease", "60"])
        let backend = try TestBackend()
        // The only app: its request without a token makes the group ask for one, and its handler claims the
        // refresh and never ends it.
        let hanging = try ExampleApp.poll(["1", "100", "--hang"], daemon: daemon, backend: backend)
        defer { hanging.kill() }
        #expect(hanging.waitForLine { $0.hasPrefix("claimed generation ") }, "\(hanging.output)")
        // The handler learns how long its claim lasts: the daemon's --refresh-lease.
        #expect(hanging.lines.contains { $0.contains(" for a lease of 60000 ms; hanging") }, "\(hanging.output)")
        let claimed = hanging.lines.compactMap { $0.firstMatch(of: #/^claimed generation ([0-9]+) /#)?.output.1 }
        let generation = try #require(claimed.first.map(String.init))
        #expect(try backend.stats().fetches == 0)

        // Four more apps, a request every 250 ms. Barrier: each one's first request failed, so each had subscribed
        // and heard the group's request for a token, and its claim was refused while the hanging app held it.
        let others = try (0..<4).map { _ in try ExampleApp.poll(["8", "250"], daemon: daemon, backend: backend) }
        defer { for app in others { app.kill() } }
        for app in others {
            #expect(app.waitForLine { $0 == "request 1: 403" }, "\(app.output)")
        }
        #expect(try backend.stats().fetches == 0)

        let killed = ContinuousClock.now
        hanging.kill()
        // The claim ends with the claimant's connection, and another app fetches for the same generation, long
        // before the lease (a minute) could run out: only the claim's release hands it on within the wait's 10 s.
        let replaced = BackgroundProcess.waitUntilPrinted {
            others.contains { $0.lines.contains { Self.fetch($0)?.generation == generation } }
        }
        let elapsed = ContinuousClock.now - killed
        #expect(replaced, "no fetch \(elapsed) after the kill: \(others.map(\.output))")

        // Each app's next request got the new token.
        for app in others {
            #expect(app.waitForLine { $0.hasPrefix("request ") && $0.hasSuffix(": 200") }, "\(app.output)")
        }
        let fetches = others.flatMap { $0.lines.compactMap(Self.fetch) }
        #expect(fetches.map(\.generation) == [generation], "\(fetches)")
        #expect(try backend.stats().fetchesPerGeneration == [generation: 1])
        #expect(!daemon.output.contains(TestBackend.tokenHeader))
    }
}
