// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Testing

@testable import AuthTransport

/// A connection's rules with no socket, no thread and no clock: bytes in, calls out in their turn, replies in,
/// bytes out, and the timeouts at instants the test names.
@Suite("Varlink connection state machine")
struct VarlinkConnectionStateMachineTests {
    /// Any instant: the machine reads no clock, so the tests' times are this plus what they say.
    let start = MonotonicInstant(nanoseconds: 1_000_000_000)

    /// The machine under test, in a class so that `#expect` may call its mutating methods.
    final class Harness {
        var state: VarlinkConnectionStateMachine
        init(_ state: VarlinkConnectionStateMachine) { self.state = state }

        // The mutating calls `#expect` takes apart, passed through.
        func append(_ message: [UInt8]) -> Bool { state.append(message) }
        func resumeIfRoom() -> Bool { state.resumeIfRoom() }
        func nextWaitingCall() -> [UInt8]? { state.nextWaitingCall() }
        func endTurn(now: MonotonicInstant) -> Bool { state.endTurn(now: now) }
    }

    func machine(_ limits: ConnectionLimits = ConnectionLimits()) -> Harness {
        Harness(VarlinkConnectionStateMachine(limits: limits, now: start))
    }

    static func call(_ method: String) -> [UInt8] { Array(#"{"method":"\#(method)"}"#.utf8) + [0] }

    static func receive(_ bytes: [UInt8], into machine: Harness) {
        bytes.withUnsafeBytes { machine.state.received($0) }
    }

    /// Every call whose turn it is now, each answered at once.
    static func answerAll(_ machine: Harness, now: MonotonicInstant) throws
        -> [String]
    {
        var methods: [String] = []
        while let message = try machine.state.nextCall(now: now) {
            methods.append(try VarlinkCall(decoding: message).method)
            machine.state.answered(size: message.count + 1)
        }
        return methods
    }

    static func unsent(_ machine: Harness) -> [UInt8] {
        machine.state.withUnsentBytes { Array($0) }
    }

    @Test func aCallReceivedByteByByteIsOneCall() throws {
        let machine = machine()
        for byte in Self.call("test.Peer") {
            #expect(try machine.state.nextCall(now: start) == nil)
            Self.receive([byte], into: machine)
        }
        let message = try #require(try machine.state.nextCall(now: start))
        #expect(try VarlinkCall(decoding: message).method == "test.Peer")
        #expect(machine.state.callsInFlight == 1)
        #expect(machine.state.bytesInFlight == Self.call("test.Peer").count)
        machine.state.answered(size: message.count + 1)
        #expect(machine.state.callsInFlight == 0 && machine.state.bytesInFlight == 0)
    }

    @Test func aMessagePastTheBoundIsAFramingError() {
        var limits = ConnectionLimits()
        limits.maximumMessageSize = 1024
        let machine = machine(limits)
        Self.receive(Array(repeating: UInt8(ascii: " "), count: 1025), into: machine)
        #expect(throws: VarlinkFramingError.messageTooLarge(limit: 1024)) { try machine.state.nextCall(now: start) }
    }

    @Test func callsReadWhileOneRunsWaitBehindItInOrder() throws {
        let machine = machine()
        Self.receive(Self.call("test.Wait") + Self.call("test.A") + Self.call("test.B"), into: machine)
        let first = try #require(try machine.state.nextCall(now: start))
        machine.state.startedRunning()
        // The two behind it are read and counted, but not given out while it runs.
        #expect(try machine.state.nextCall(now: start) == nil)
        #expect(machine.state.callsInFlight == 3)
        machine.state.runningCallReturned(size: first.count + 1)
        var order: [String] = []
        while let message = machine.state.nextWaitingCall() {
            order.append(try VarlinkCall(decoding: message).method)
            machine.state.answered(size: message.count + 1)
        }
        machine.state.stoppedRunning()
        #expect(order == ["test.A", "test.B"])
        #expect(machine.state.callsInFlight == 0)
        // The next call read is given out at once again.
        Self.receive(Self.call("test.C"), into: machine)
        #expect(try machine.state.nextCall(now: start) != nil)
    }

    @Test func atItsBoundOfCallsInFlightTheConnectionStopsReadingUntilHalfAreDone() throws {
        var limits = ConnectionLimits()
        limits.maximumCallsInFlight = 4
        let machine = machine(limits)
        // Four calls and four more: the first runs, three wait behind it, and the bound stops the rest.
        for _ in 0..<8 { Self.receive(Self.call("test.Wait"), into: machine) }
        let first = try #require(try machine.state.nextCall(now: start))
        machine.state.startedRunning()
        #expect(try machine.state.nextCall(now: start) == nil)
        #expect(machine.state.callsInFlight == 4)
        #expect(machine.state.endTurn(now: start) == false)
        #expect(!machine.state.wantsInput)
        // One done leaves three, over half the bound: still paused.
        machine.state.runningCallReturned(size: first.count + 1)
        #expect(!machine.resumeIfRoom())
        // Two done: half the bound; it reads on, and the calls buffered come first.
        let second = try #require(machine.nextWaitingCall())
        machine.state.answered(size: second.count + 1)
        #expect(machine.resumeIfRoom())
        #expect(machine.state.wantsInput)
        let taken = try Self.answerAll(machine, now: start)
        // Still behind the running call: two of the calls buffered join the queue, up to the bound again.
        #expect(taken.isEmpty)
        #expect(machine.state.callsInFlight == 4)
        #expect(!machine.state.wantsInput)
    }

    @Test func atItsBoundOfBytesInFlightOneCallIsStillLetThrough() throws {
        var limits = ConnectionLimits()
        limits.maximumBytesInFlight = 8
        let machine = machine(limits)
        Self.receive(Self.call("test.Long") + Self.call("test.Next"), into: machine)
        #expect(try machine.state.nextCall(now: start) != nil)
        #expect(try machine.state.nextCall(now: start) == nil)
        #expect(machine.state.isBlocked)
    }

    @Test func aPeerThatEndsItsInputGetsItsRepliesThenTheConnectionIsDone() throws {
        let machine = machine()
        Self.receive(Self.call("test.Now") + Self.call("test.Later"), into: machine)
        machine.state.endOfInput()
        let now = try #require(try machine.state.nextCall(now: start))
        machine.state.answered(size: now.count + 1)
        #expect(machine.append(Array(#"{"parameters":{}}"#.utf8) + [0]))
        let later = try #require(try machine.state.nextCall(now: start))
        machine.state.startedRunning()
        _ = machine.state.endTurn(now: start)
        // A call still runs: not done, though the input ended.
        #expect(!machine.state.isDone)
        #expect(!machine.state.wantsInput)
        machine.state.runningCallReturned(size: later.count + 1)
        #expect(machine.state.nextWaitingCall() == nil)
        machine.state.stoppedRunning()
        #expect(machine.append(Array(#"{"parameters":{"later":true}}"#.utf8) + [0]))
        _ = machine.state.endTurn(now: start)
        // Both replies wait to be sent: done only once the kernel took them.
        #expect(!machine.state.isDone)
        let bytes = Self.unsent(machine)
        #expect(bytes.split(separator: 0).count == 2)
        machine.state.sent(bytes.count - 1)
        #expect(!machine.state.isDone)
        machine.state.sent(1)
        #expect(machine.state.isDone)
    }

    @Test func unsentOutputStopsCallsAtItsBoundAndClosesAtFourTimesIt() throws {
        var limits = ConnectionLimits()
        limits.maximumPendingOutput = 100
        let machine = machine(limits)
        let reply = Array(repeating: UInt8(ascii: "x"), count: 59) + [0]
        for _ in 0..<3 { Self.receive(Self.call("test.Now"), into: machine) }
        // The first call's reply is under the bound; the second's passes it, so the third is not taken.
        #expect(try machine.state.nextCall(now: start) != nil)
        machine.state.answered(size: Self.call("test.Now").count)
        #expect(machine.append(reply))
        #expect(try machine.state.nextCall(now: start) != nil)
        machine.state.answered(size: Self.call("test.Now").count)
        #expect(machine.append(reply))
        #expect(try machine.state.nextCall(now: start) == nil)
        _ = machine.state.endTurn(now: start)
        #expect(!machine.state.wantsInput)
        #expect(machine.state.wantsOutput)
        // Events a subscription streams still queue, up to four times the bound; past it the peer does not read.
        while machine.state.unsentByteCount < limits.closingOutput { #expect(machine.append(reply)) }
        #expect(!machine.append(reply))
        // Once the kernel has taken all but half the bound, the connection reads on.
        machine.state.sent(machine.state.unsentByteCount - 50)
        #expect(machine.resumeIfRoom())
        #expect(try Self.answerAll(machine, now: start) == ["test.Now"])
    }

    @Test func oneMessageLargerThanTheOutputBoundGoesOutWhole() {
        var limits = ConnectionLimits()
        limits.maximumPendingOutput = 100
        let machine = machine(limits)
        let large = Array(repeating: UInt8(ascii: "y"), count: 1000) + [0]
        #expect(machine.append(large))
        #expect(Self.unsent(machine) == large)
        machine.state.sent(large.count)
        #expect(!machine.state.wantsOutput)
    }

    @Test func aMessageThatTakesTooLongToArriveWhole() throws {
        var limits = ConnectionLimits()
        limits.messageTimeout = .seconds(10)
        let machine = machine(limits)
        let sent = start + .seconds(1)
        Self.receive(Array(#"{"method":"#.utf8), into: machine)
        #expect(try machine.state.nextCall(now: sent) == nil)
        // The part's first byte starts the message's bound, and the timer moves to it.
        #expect(machine.endTurn(now: sent))
        #expect(machine.state.deadline == sent + .seconds(10))
        // More bytes of the same message do not restart it.
        Self.receive(Array(#""test"#.utf8), into: machine)
        #expect(machine.state.endTurn(now: sent + .seconds(5)) == false)
        #expect(machine.state.timeout(now: sent + .seconds(9)) == nil)
        #expect(machine.state.timeout(now: sent + .seconds(10)) == .slowMessage)
    }

    @Test func onlyAWholeMessageResetsTheIdleTimeout() throws {
        var limits = ConnectionLimits()
        limits.idleTimeout = .seconds(300)
        limits.messageTimeout = .seconds(3600)
        let machine = machine(limits)
        #expect(machine.state.deadline == start + .seconds(300))
        // A byte now and then never makes a whole message: the connection stays idle since it opened.
        for second in stride(from: 10, to: 300, by: 10) {
            Self.receive([UInt8(ascii: " ")], into: machine)
            _ = try machine.state.nextCall(now: start + .seconds(second))
            _ = machine.state.endTurn(now: start + .seconds(second))
        }
        #expect(machine.state.timeout(now: start + .seconds(299)) == nil)
        #expect(machine.state.timeout(now: start + .seconds(300)) == .idle)
        // A whole message restarts it.
        let other = self.machine(limits)
        Self.receive(Self.call("test.Now"), into: other)
        #expect(try Self.answerAll(other, now: start + .seconds(200)) == ["test.Now"])
        #expect(other.state.timeout(now: start + .seconds(300)) == nil)
        #expect(other.state.deadline == start + .seconds(500))
    }

    @Test func aConnectionWithACallInFlightIsBusyHoweverQuiet() throws {
        var limits = ConnectionLimits()
        limits.idleTimeout = .seconds(300)
        let machine = machine(limits)
        Self.receive(Self.call("test.Subscribe"), into: machine)
        #expect(try machine.state.nextCall(now: start) != nil)
        machine.state.startedRunning()
        // Its idle time runs out, but the call is in flight: the next deadline is one idle time later.
        #expect(machine.state.timeout(now: start + .seconds(300)) == nil)
        #expect(machine.state.deadline == start + .seconds(600))
    }

    @Test func aClosedConnectionTakesAndSendsNothing() throws {
        let machine = machine()
        Self.receive(Self.call("test.Wait") + Self.call("test.Next"), into: machine)
        let first = try #require(try machine.state.nextCall(now: start))
        machine.state.startedRunning()
        _ = try machine.state.nextCall(now: start)
        #expect(machine.append(Array("{}".utf8) + [0]))
        machine.state.close()
        #expect(machine.state.isClosed)
        #expect(!machine.state.wantsInput && !machine.state.wantsOutput)
        machine.state.runningCallReturned(size: first.count + 1)
        #expect(machine.state.nextWaitingCall() == nil)
        #expect(machine.state.unsentByteCount == 0)
        #expect(try machine.state.nextCall(now: start) == nil)
    }
}
