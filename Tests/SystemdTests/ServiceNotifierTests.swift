// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Systemd
import Testing

@Suite("sd_notify", .serialized, .offPool)
struct ServiceNotifierTests {
    @Test func sendsEachStateAsTheProtocolSpellsIt() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = ServiceNotifier()
        #expect(notifier.isEnabled)

        #expect(notifier.notify(.ready, .status("Holding 2 app groups")))
        #expect(socket.receive() == "READY=1\nSTATUS=Holding 2 app groups")

        #expect(notifier.notify(.watchdog))
        #expect(socket.receive() == "WATCHDOG=1")

        #expect(notifier.notify(.reloading))
        #expect(socket.receive() == "RELOADING=1")

        #expect(notifier.notify(.stopping, .status("Stopping")))
        #expect(socket.receive() == "STOPPING=1\nSTATUS=Stopping")
    }

    @Test func aStatusCannotInjectAnotherAssignment() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }

        #expect(ServiceNotifier().notify(.status("evil\nREADY=1\rMAINPID=1")))
        #expect(socket.receive() == "STATUS=evil READY=1 MAINPID=1")
    }

    @Test func withoutANotifySocketNothingIsSent() {
        unsetenv("NOTIFY_SOCKET")
        let notifier = ServiceNotifier()
        #expect(!notifier.isEnabled)
        #expect(!notifier.notify(.ready))
        #expect(throws: Never.self) { try notifier.send([.ready]) }
    }

    @Test func aMissingSocketIsAnErrorThatSaysSo() {
        setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        #expect {
            try ServiceNotifier().send([.ready])
        } throws: { error in
            let error = error as? SystemdError
            return error?.code == .notify && error?.function == "sd_notify" && error?.errno == ENOENT
        }
    }

    @Test func watchdogIntervalFollowsWatchdogUsec() {
        unsetenv("WATCHDOG_PID")
        setenv("WATCHDOG_USEC", "3000000", 1)
        #expect(ServiceNotifier().watchdogInterval == .seconds(3))
        setenv("WATCHDOG_PID", "1", 1)  // meant for another process
        #expect(ServiceNotifier().watchdogInterval == nil)
        unsetenv("WATCHDOG_PID")
        unsetenv("WATCHDOG_USEC")
        #expect(ServiceNotifier().watchdogInterval == nil)
    }
}
