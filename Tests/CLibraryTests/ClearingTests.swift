// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// Anonymize and the wipe through the C library, and what the apps of the group see of them (`events-app`, which
/// waits in `exponea_auth_wait()`): their flush handlers, the apps that did not confirm, the cleared handler, and the
/// token-refreshed handler before it.
@Suite("libexponea-auth: anonymize, clear and the apps' handlers", .offPool)
struct ClearingTests {
    /// Three apps that flush at once, later, and never; each subscribed.
    static func apps(_ daemon: DaemonUnderTest) throws -> [ExampleApp] {
        let apps = try [[], ["--flush-later"], ["--never-flush"]].map { try ExampleApp.events($0, daemon: daemon) }
        for app in apps { #expect(app.waitForLine { $0 == "subscribed" }, "\(app.output)") }
        return apps
    }

    @Test func anonymizeWaitsForEveryAppsFlushAndReportsTheOneThatNeverConfirmed() throws {
        let daemon = try DaemonUnderTest(arguments: ["--flush-timeout", "1"])
        let apps = try Self.apps(daemon)
        defer { for app in apps { app.kill() } }
        let (atOnce, later, never) = (apps[0], apps[1], apps[2])
        let library = try LoadedLibrary()
        let client = try library.client(socket: daemon.socketPath)
        defer { _ = library.close(client) }

        // Every app's token-refreshed handler hears a token set by another client.
        #expect(library.setToken(client, TestJWT().token(expiringIn: 3600), nil) == 0)
        for app in apps { #expect(app.waitForLine { $0 == "refreshed 1" }, "\(app.output)") }

        var asked: UInt32 = 0
        var pids = [Int32](repeating: 0, count: 4)
        var reasons = [Int32](repeating: 0, count: 4)
        let unconfirmed = library.anonymize(client, &asked, &pids, &reasons, 4)
        #expect(unconfirmed == 1, "\(library.message(unconfirmed))")
        #expect(asked == 3)
        // The app that never confirmed, by its pid, and why: the daemon's flush timeout ran out
        // (EXPONEA_AUTH_UNCONFIRMED_TIMED_OUT).
        #expect(pids[0] == never.process.pid && reasons[0] == 1)
        for app in apps { #expect(app.waitForLine { $0 == "cleared anonymize" }, "\(app.output)") }
        // The two others flushed before they confirmed, so before the clear; the third was asked and never did.
        for app in [atOnce, later] {
            #expect(app.lines.suffix(3) == ["flush requested", "flushed", "cleared anonymize"], "\(app.output)")
        }
        #expect(never.lines.suffix(2) == ["flush requested", "cleared anonymize"], "\(never.output)")
        #expect(library.token(client).result == -ENOKEY)
    }

    @Test func anAppThatAnonymizesFlushesItselfInsideTheCall() throws {
        // A flush not confirmed within 1 s would be reported: the app's own flush must run while it waits.
        let daemon = try DaemonUnderTest(arguments: ["--flush-timeout", "1"])
        let app = try ExampleApp.events(["--anonymize"], daemon: daemon)
        defer { app.kill() }
        #expect(app.waitForLine { $0.hasPrefix("anonymized ") }, "\(app.output)")
        #expect(app.waitForLine { $0 == "cleared anonymize" }, "\(app.output)")
        // The cleared event may come inside the call or after it.
        let lines = app.lines.filter { $0 != "cleared anonymize" }
        #expect(lines.suffix(3) == ["flush requested", "flushed", "anonymized asked=1 unconfirmed=0"], "\(app.output)")
    }

    @Test func theWipeAsksNoAppToFlushAndTellsEveryOne() throws {
        let daemon = try DaemonUnderTest()
        let apps = try Self.apps(daemon)
        defer { for app in apps { app.kill() } }
        let library = try LoadedLibrary()
        let client = try library.client(socket: daemon.socketPath)
        defer { _ = library.close(client) }
        #expect(library.setToken(client, TestJWT().token(expiringIn: 3600), nil) == 0)

        #expect(library.clearLocalCustomerData(client) == 0)
        for app in apps {
            #expect(app.waitForLine { $0 == "cleared clearLocalCustomerData" }, "\(app.output)")
            #expect(!app.lines.contains("flush requested"))
        }
        #expect(library.token(client).result == -ENOKEY)
    }
}
