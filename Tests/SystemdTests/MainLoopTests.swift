// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Synchronization
import Systemd
import Testing

/// The sd-event loop, run on the test's own thread: messages from other threads arrive in order on the loop's
/// thread, a bounded inbox drops the oldest, timers fire, a deferred call runs once at the next turn, a bus is
/// driven by the loop alone.
@Suite("sd-event loop and its inbox", .offPool)
struct MainLoopTests {
    @Test func messagesFromOtherThreadsArriveInOrderOnTheLoopsThread() throws {
        let loop = try MainLoop()
        let inbox = try LoopInbox<Int>()
        let loopThread = pthread_self()
        var received: [Int] = []
        var onLoopThread = true
        try inbox.receive(on: loop) { number in
            onLoopThread = onLoopThread && pthread_equal(pthread_self(), loopThread) != 0
            received.append(number)
            if number == 999 { loop.exit(7) }
        }
        Thread.detachNewThread {
            for number in 0..<1000 { inbox.send(number) }
        }
        #expect(try loop.run() == 7)
        #expect(received == Array(0..<1000))
        #expect(onLoopThread)
    }

    @Test func aBoundedInboxDropsTheOldest() throws {
        let loop = try MainLoop()
        let inbox = try LoopInbox<Int>(limit: 3)
        for number in 0..<10 { inbox.send(number) }  // before the loop runs: it is far behind
        var received: [Int] = []
        try inbox.receive(on: loop) { number in
            received.append(number)
            if number == 9 { loop.exit() }
        }
        _ = try loop.run()
        #expect(received == [7, 8, 9])
    }

    @Test func aTimerFiresOnceAndCanBeArmedAgain() throws {
        let loop = try MainLoop()
        var fired = 0
        var timer: EventSource?
        timer = try loop.after(.milliseconds(1)) {
            fired += 1
            if fired == 2 { loop.exit() } else { timer?.schedule(after: .milliseconds(1)) }
        }
        _ = try loop.run()
        #expect(fired == 2)
    }

    @Test func aCallDeferredToTheNextTurnRunsOnceBeforeLaterEvents() throws {
        let loop = try MainLoop()
        var first: [Int32] = [0, 0]
        var second: [Int32] = [0, 0]
        #expect(pipe(&first) == 0 && pipe(&second) == 0)
        defer { for descriptor in first + second { close(descriptor) } }
        var order: [String] = []
        var firstSource: EventSource?
        firstSource = try loop.onReadable(first[0]) {
            firstSource?.cancel()
            try? loop.nextTurn { order.append("deferred") }
            // Readable from now on, but pending only at the loop's next wait: after the deferred call.
            _ = write(second[1], "x", 1)
            order.append("handler")
        }
        try loop.onReadable(second[0]) {
            order.append("later event")
            // A deferred call that fired again would come before this one.
            try? loop.nextTurn { loop.exit() }
        }
        _ = write(first[1], "x", 1)
        _ = try loop.run()
        #expect(order == ["handler", "deferred", "later event"])
    }

    @Test func theLoopDrivesABusConnectionItsNameAndItsLoss() throws {
        let bus = try PrivateBus()
        let loop = try MainLoop()
        let connection = try BusConnection(address: bus.address)
        try loop.attach(connection)
        var outcome: [String] = []
        try connection.onDisconnect {
            outcome.append("disconnected")
            loop.exit()
        }
        try connection.requestName("com.exponea.AuthD1") { error in
            outcome.append(error == nil ? "owned" : "refused: \(error!)")
            bus.stop()  // the bus goes away: the connection notices on the loop
        }
        _ = try loop.run()
        #expect(outcome == ["owned", "disconnected"])
    }
}
