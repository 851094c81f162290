// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import DequeModule

/// One connection's Varlink state, apart from its socket, its timer and its calls' handler: bytes in give the
/// calls whose turn it is, replies give bytes out, and the time, passed in, gives the timeouts.
///
/// ``ServerConnection`` does the I/O around it: it reads into ``received(_:)``, dispatches what ``nextCall(now:)``
/// returns, writes what ``withUnsentBytes(_:)`` holds, watches the socket for ``wantsInput`` and ``wantsOutput``,
/// and arms its timer for ``deadline``. The rules themselves, in order of the calls, the bounds and the timeouts,
/// are all here, and `VarlinkConnectionStateMachineTests` drive them with no socket, no thread and no clock.
///
/// Calls keep their order: one answered at its turn is done; one that runs later (``startedRunning()``) makes
/// the calls after it wait, and they come out of ``nextWaitingCall()`` when it has returned.
///
/// Bounded: the connection takes no call while it has ``ConnectionLimits/maximumCallsInFlight`` calls or
/// ``ConnectionLimits/maximumBytesInFlight`` bytes of calls in flight, or unsent output past
/// ``ConnectionLimits/maximumPendingOutput``; it pauses, and reads on (``resumeIfRoom()``) once half of that is
/// done.
struct VarlinkConnectionStateMachine {
    let limits: ConnectionLimits
    private var decoder: VarlinkFrameDecoder
    /// Calls read while an earlier one runs, waiting their turn as bytes.
    private var waiting: Deque<[UInt8]> = []
    /// Calls read and not finished (waiting or running), and their bytes with their NULs.
    private(set) var callsInFlight = 0
    private(set) var bytesInFlight = 0
    /// A call runs later (in the connection's task): the calls read after it wait.
    private(set) var callRunning = false
    /// Output not yet taken by the kernel, from ``written`` on.
    private var output: [UInt8] = []
    private var written = 0
    /// Stopped reading at a bound; reads on below half of it.
    private var paused = false
    /// The peer shut down its side: once the calls read are answered, the connection closes.
    private(set) var inputEnded = false
    private var closesOnceWritten = false
    private(set) var isClosed = false
    /// When the last whole message arrived (or the connection opened, or a busy connection's idle time ran out).
    private var lastMessage: MonotonicInstant
    /// When the first byte of a message still incomplete arrived.
    private var partialSince: MonotonicInstant?

    init(limits: ConnectionLimits, now: MonotonicInstant) {
        self.limits = limits
        self.decoder = VarlinkFrameDecoder(maximumMessageSize: limits.maximumMessageSize)
        self.lastMessage = now
    }

    // MARK: Input

    /// Bytes read from the peer.
    mutating func received(_ bytes: UnsafeRawBufferPointer) { decoder.append(bytes) }

    /// The peer shut down its side of the connection: the calls already read are still answered.
    mutating func endOfInput() { inputEnded = true }

    /// The next call whose turn it is now: a whole message, taken while the connection has room for it. A call
    /// read while another runs waits behind it, and this goes on to the next. Nil when no call can be taken now.
    ///
    /// The caller dispatches it, then says ``answered(size:)`` or ``startedRunning()``.
    ///
    /// - Throws: ``VarlinkFramingError`` when the peer sent a message past the bound; the connection must close.
    mutating func nextCall(now: MonotonicInstant) throws(VarlinkFramingError) -> [UInt8]? {
        while !isBlocked, let message = try decoder.nextMessage() {
            lastMessage = now
            callsInFlight += 1
            bytesInFlight += message.count + 1
            guard callRunning else { return message }
            waiting.append(message)
        }
        return nil
    }

    /// The call of `size` bytes (its NUL included) taken last was answered at its turn.
    mutating func answered(size: Int) {
        callsInFlight -= 1
        bytesInFlight -= size
    }

    /// The call taken last runs later: the calls read after it wait until it has returned.
    mutating func startedRunning() { callRunning = true }

    /// The running call of `size` bytes returned. The calls that waited behind it come from ``nextWaitingCall()``,
    /// each dispatched in turn, until one runs later again or none is left (``stoppedRunning()``).
    mutating func runningCallReturned(size: Int) { answered(size: size) }

    /// The call that waited longest, whose turn it is now that the call before it returned.
    mutating func nextWaitingCall() -> [UInt8]? { isClosed ? nil : waiting.popFirst() }

    /// No call runs any more: the next call read is dispatched at its turn.
    mutating func stoppedRunning() { callRunning = false }

    /// The end of a turn of reading: pauses the connection at a bound, starts timing a message that came in
    /// part, and marks a connection whose peer ended its input to close once its replies are written.
    ///
    /// - Returns: whether ``deadline`` moved.
    mutating func endTurn(now: MonotonicInstant) -> Bool {
        if isBlocked {
            paused = !isClosed
            // What is buffered waits for room: the peer is not late.
            partialSince = nil
        } else if inputEnded {
            // Every whole message is taken; what is left can never end.
            if !callRunning { closesOnceWritten = true }
        } else if decoder.pendingByteCount > 0 {
            if partialSince == nil {
                partialSince = now
                return true
            }
        } else {
            partialSince = nil
        }
        return false
    }

    // MARK: Flow

    /// Whether the connection may not take another call now.
    var isBlocked: Bool {
        isClosed || paused || callsInFlight >= limits.maximumCallsInFlight
            || bytesInFlight >= limits.maximumBytesInFlight || unsentByteCount > limits.maximumPendingOutput
    }

    /// A connection paused at a bound reads on once its calls in flight and its unsent output are down to half
    /// their bounds. Returns whether it did: the messages buffered are then to be taken (``nextCall(now:)``)
    /// before more is read, which would grow the buffer without bound.
    mutating func resumeIfRoom() -> Bool {
        guard paused, callsInFlight <= limits.maximumCallsInFlight / 2,
            bytesInFlight <= limits.maximumBytesInFlight / 2,
            unsentByteCount <= limits.maximumPendingOutput / 2
        else { return false }
        paused = false
        return true
    }

    /// Whether to watch the socket for input: the peer has not ended it and the connection takes calls.
    var wantsInput: Bool { !inputEnded && !isBlocked }

    /// Whether to watch the socket for room to write: output waits.
    var wantsOutput: Bool { written < output.count }

    // MARK: Output

    /// Queues one framed message (JSON and its NUL) to send after every one before it.
    ///
    /// - Returns: false when the peer does not read: its unsent output is past four times the bound. Past the
    ///   bound the connection takes no call, so only calls in flight and a subscription's events add output. One
    ///   message larger than the bound (a long ListGroups) is let through whole.
    mutating func append(_ message: [UInt8]) -> Bool {
        guard !isClosed else { return true }
        if written == output.count {
            output.removeAll(keepingCapacity: output.capacity <= 64 * 1024)
            written = 0
        }
        output.append(contentsOf: message)
        return output.count - written - message.count < limits.closingOutput
    }

    /// The bytes queued and not yet sent.
    var unsentByteCount: Int { output.count - written }

    /// Calls `body` with the bytes queued and not yet sent. `mutating`, though it changes nothing: the connection
    /// calls it on its stored state, which a non-mutating call would copy first.
    mutating func withUnsentBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        output.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[written...])) }
    }

    /// The kernel took `count` of the unsent bytes.
    mutating func sent(_ count: Int) { written += count }

    /// Whether the connection is to close now: its peer ended its input, every call is answered and every reply
    /// sent.
    var isDone: Bool { closesOnceWritten && written == output.count }

    // MARK: Timeouts

    /// When ``timeout(now:)`` has something to say: the idle timeout, or sooner a message's bound.
    var deadline: MonotonicInstant {
        var deadline = lastMessage + limits.idleTimeout
        if let partialSince { deadline = min(deadline, partialSince + limits.messageTimeout) }
        return deadline
    }

    /// Why a connection's time ran out.
    enum Timeout: Equatable {
        /// A message took longer than ``ConnectionLimits/messageTimeout`` to arrive whole.
        case slowMessage
        /// No call in flight and no whole message for ``ConnectionLimits/idleTimeout``.
        case idle
    }

    /// What the time says at `now`: nil while the connection may stay open (arm the timer for ``deadline``
    /// again). A connection with a call in flight (a subscription, a wait) is busy, however quiet.
    mutating func timeout(now: MonotonicInstant) -> Timeout? {
        if let partialSince, now >= partialSince + limits.messageTimeout { return .slowMessage }
        if now >= lastMessage + limits.idleTimeout {
            guard callsInFlight > 0 else { return .idle }
            lastMessage = now
        }
        return nil
    }

    // MARK: Closing

    /// The connection closed: nothing more is taken or sent.
    mutating func close() {
        isClosed = true
        output = []
        written = 0
    }
}
