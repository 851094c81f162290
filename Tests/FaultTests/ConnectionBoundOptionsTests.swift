// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The per-connection bounds are the daemon's options (`--idle-timeout`, `--max-calls-in-flight`), checked at
/// start like the others.
@Suite("Fault: the connection bounds are options", .offPool)
struct ConnectionBoundOptionsTests {
    @Test func anIdleConnectionIsClosedAfterTheIdleTimeoutGivenAndASubscriberIsNot() throws {
        let daemon = try DaemonUnderTest(arguments: ["--idle-timeout", "1"])
        defer { _ = daemon.stop() }
        let subscriber = try FaultClient(path: daemon.socketPath)
        defer { subscriber.close() }
        try subscriber.send("com.exponea.Auth.Subscribe", ["group": "shop"], more: true)
        _ = try subscriber.reply()  // the group's state: the subscription is running
        let idle = try FaultClient(path: daemon.socketPath)
        defer { idle.close() }
        // The default (300 s) would keep it far past this bound.
        #expect(idle.closedByPeer(within: .seconds(20)))
        // By now the subscriber has been connected longer than the idle connection was: it is a call in flight.
        #expect(!subscriber.closedByPeer(within: .milliseconds(200)))
    }

    @Test(arguments: [["--idle-timeout", "0"], ["--max-calls-in-flight", "0"], ["--max-calls-in-flight", "1025"]])
    func aBoundOutOfRangeStopsTheStartAndSaysWhy(_ arguments: [String]) throws {
        let result = try ChildProcess.run(BuildProducts.executable("exponea-authd"), ["--user"] + arguments)
        #expect(result.status != 0)
        #expect(result.standardError.contains("\(arguments[0]) needs a number"))
    }
}
