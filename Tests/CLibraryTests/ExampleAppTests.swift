// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The library's example apps, one at a time, against the real daemon and the test backend: the SDK's request
/// policy through C (`poll-app`). The Python example (`python-app.py`) is the Python package's tests'
/// (`python/tests/test_example.py`), from the source tree, pip and the Debian package alike.
@Suite("libexponea-auth: the example apps against the daemon", .offPool)
struct ExampleAppTests {
    @Test func pollAppFetchesOnA403WithoutATokenAndRetriesWithTheNewToken() throws {
        let daemon = try DaemonUnderTest()
        let backend = try TestBackend()
        let app = try ExampleApp.poll(["3", "100"], daemon: daemon, backend: backend)
        #expect(app.waitForExit() == 0, "\(app.output)")
        // The first request goes without a token (403); the daemon asks the group for one, the app's own handler
        // fetches it while the report waits, and the one retry carries it.
        #expect(
            app.lines == [
                "refresh for generation 0 (notProvided): fetched",
                "request 1: 403, retried: 200",
                "request 2: 200",
                "request 3: 200",
                "requests=3 ok=3 failed=0 refreshes=1",
            ], "\(app.output)")
        let stats = try backend.stats()
        #expect(stats.fetchesPerGeneration == ["0": 1])
        #expect(stats.missing == 1 && stats.accepted == 3 && stats.requests == 4)
        #expect(!daemon.output.contains(TestBackend.tokenHeader))
    }

    @Test func pollAppRefreshesAfterA401AndRetriesWithTheNewToken() throws {
        let daemon = try DaemonUnderTest()
        let backend = try TestBackend()
        let first = try ExampleApp.poll(["1"], daemon: daemon, backend: backend)
        #expect(first.waitForExit() == 0, "\(first.output)")
        #expect(try backend.stats().fetchesPerGeneration == ["0": 1])

        // The group has a valid token (generation 1), which the stream now refuses once.
        try backend.rejectNext()
        let app = try ExampleApp.poll(["2", "100"], daemon: daemon, backend: backend)
        #expect(app.waitForExit() == 0, "\(app.output)")
        #expect(
            app.lines == [
                "refresh for generation 1 (invalid): fetched",
                "request 1: 401, retried: 200",
                "request 2: 200",
                "requests=2 ok=2 failed=0 refreshes=1",
            ], "\(app.output)")
        let stats = try backend.stats()
        #expect(stats.rejectedOnPurpose == 1)
        #expect(stats.fetchesPerGeneration == ["0": 1, "1": 1])
        #expect(!daemon.output.contains(TestBackend.tokenHeader))
    }
}
