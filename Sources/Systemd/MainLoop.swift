// SPDX-License-Identifier: Apache-2.0
import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// One sd-event loop (`sd-event(3)`), run by one thread: every source the daemon waits for (signals, the
/// wall-clock timer, the bus connection, messages from other threads, timers) is a source of it, so the thread
/// sleeps in one `epoll_wait` until the next one is due, and nothing polls.
///
/// The loop and its handlers belong to the thread that runs it (sd-event objects are not thread-safe), which is
/// why this class is not `Sendable`. Other threads reach it only through a ``LoopInbox``.
///
/// ```swift
/// let loop = try MainLoop()
/// try MainLoop.blockSignals([SIGTERM])          // first, before any other thread starts
/// try loop.onSignal(SIGTERM) { loop.exit() }
/// let inbox = try LoopInbox<String>()
/// try inbox.receive(on: loop) { message in print(message) }
/// let status = try loop.run()                   // until loop.exit(_:)
/// ```
public final class MainLoop {
    let event: OpaquePointer
    /// Every live source, kept until it is cancelled or the loop ends.
    private var sources: [ObjectIdentifier: EventSource] = [:]
    /// Whether a source's handler is running now.
    fileprivate(set) var isDispatching = false
    /// Set by the loop's executor when a handler queued work (``LoopExecutor/attach(to:)``): ``afterDispatch``
    /// runs it when the handler returns, before the loop waits again. A handler that queued nothing costs a test.
    var workQueuedByHandler = false
    var afterDispatch: (() -> Void)?

    /// Creates an empty loop for the calling thread.
    ///
    /// - Throws: ``SystemdError`` from `sd_event_new`.
    public init() throws(SystemdError) {
        var event: OpaquePointer?
        try Self.check(sd_event_new(&event), "sd_event_new", "cannot create the event loop")
        guard let event else {
            throw SystemdError(code: .eventLoop, function: "sd_event_new", errno: ENOMEM, context: "")
        }
        self.event = event
    }

    deinit {
        for source in sources.values { source.release() }
        sd_event_unref(event)
    }

    /// Blocks `signals` in the calling thread and in every thread it starts from now on, so that they stay
    /// pending until the loop takes them (``onSignal(_:_:)`` needs it). Call it before any other thread starts.
    public static func blockSignals(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Calls `handler` on the loop's thread each time `signal` arrives. The signal must be blocked in every
    /// thread (``blockSignals(_:)``).
    @discardableResult
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) throws(SystemdError) -> EventSource {
        let source = EventSource(loop: self) { _ in handler() }
        var pointer: OpaquePointer?
        try Self.check(
            sd_event_add_signal(
                event, &pointer, signal, { _, _, userdata in EventSource.fire(userdata) }, source.userdata),
            "sd_event_add_signal", "cannot watch the signal \(signal); is it blocked in every thread?")
        return keep(source, pointer)
    }

    /// Calls `handler` on the loop's thread each time `descriptor` is readable (level-triggered: read what is
    /// there, or it is called again at once).
    @discardableResult
    public func onReadable(_ descriptor: Int32, _ handler: @escaping () -> Void) throws(SystemdError) -> EventSource {
        try watch(descriptor, events: UInt32(EPOLLIN.rawValue)) { _ in handler() }
    }

    /// Calls `handler` on the loop's thread with the events (`EPOLLIN`, `EPOLLOUT`, `EPOLLHUP`, ...) each time
    /// `descriptor` has any of `events` (level-triggered); ``EventSource/setEvents(_:)`` changes what it waits
    /// for.
    public func watch(_ descriptor: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void)
        throws(SystemdError) -> EventSource
    {
        let source = EventSource(loop: self, handler: handler)
        var pointer: OpaquePointer?
        try Self.check(
            sd_event_add_io(
                event, &pointer, descriptor, events,
                { _, _, revents, userdata in EventSource.fire(userdata, revents) },
                source.userdata),
            "sd_event_add_io", "cannot watch the descriptor \(descriptor)")
        return keep(source, pointer)
    }

    /// Calls `handler` on the loop's thread once, `delay` from now (CLOCK_MONOTONIC, within `accuracy`: a
    /// coarse one lets sd-event wake once for several timers); ``EventSource/schedule(after:)`` arms it again.
    @discardableResult
    public func after(_ delay: Duration, accuracy: Duration = .milliseconds(1), _ handler: @escaping () -> Void)
        throws(SystemdError) -> EventSource
    {
        let source = EventSource(loop: self) { _ in handler() }
        var pointer: OpaquePointer?
        try Self.check(
            sd_event_add_time_relative(
                event, &pointer, CLOCK_MONOTONIC, Self.microseconds(delay), Self.microseconds(accuracy),
                { _, _, userdata in EventSource.fire(userdata) }, source.userdata),
            "sd_event_add_time_relative", "cannot arm a timer")
        return keep(source, pointer)
    }

    /// Calls `handler` once on the loop's thread at its next turn, before any event that is not pending yet
    /// (`sd_event_add_defer`): after the handler running now, and everything on its way out of it.
    public func nextTurn(_ handler: @escaping () -> Void) throws(SystemdError) {
        let source = EventSource(loop: self) { _ in handler() }
        source.endsAfterFiring = true
        var pointer: OpaquePointer?
        try Self.check(
            sd_event_add_defer(event, &pointer, { _, userdata in EventSource.fire(userdata) }, source.userdata),
            "sd_event_add_defer", "cannot defer a call to the next turn")
        keep(source, pointer)
    }

    /// Lets the loop drive `bus`: its socket and its timeouts become sources of this loop, and its method
    /// handlers, filters and tracks run on the loop's thread.
    public func attach(_ bus: BusConnection) throws(SystemdError) {
        try Self.check(
            sd_bus_attach_event(bus.bus, event, Int32(SD_EVENT_PRIORITY_NORMAL)), "sd_bus_attach_event",
            "cannot attach the bus connection to the event loop")
    }

    /// Ends ``run()`` after the current handler returns, with `status`.
    public func exit(_ status: Int32 = 0) {
        sd_event_exit(event, status)
    }

    /// How many times the loop has waited and dispatched (sd-event's iteration count): a turn of the loop.
    public var iteration: UInt64 {
        var iteration: UInt64 = 0
        _ = sd_event_get_iteration(event, &iteration)
        return iteration
    }

    /// Runs the loop on the calling thread until ``exit(_:)``.
    ///
    /// - Returns: The status given to ``exit(_:)``.
    /// - Throws: ``SystemdError`` when waiting or dispatching fails.
    public func run() throws(SystemdError) -> Int32 {
        let result = sd_event_loop(event)
        try Self.check(result, "sd_event_loop", "the event loop failed")
        return result
    }

    // MARK: Sources

    @discardableResult
    private func keep(_ source: EventSource, _ pointer: OpaquePointer?) -> EventSource {
        source.pointer = pointer
        sources[ObjectIdentifier(source)] = source
        return source
    }

    fileprivate func forget(_ source: EventSource) {
        sources[ObjectIdentifier(source)] = nil
    }

    static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        return UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
    }

    static func check(_ result: Int32, _ function: String, _ context: String) throws(SystemdError) {
        if result < 0 { throw SystemdError(code: .eventLoop, function: function, returned: result, context: context) }
    }
}

/// A source of a ``MainLoop``: a signal, a readable descriptor, a timer or a call deferred to the next turn, with
/// its handler. It lives until ``cancel()``, the loop's end, or (a deferred call) its one call.
public final class EventSource {
    fileprivate var pointer: OpaquePointer?
    private unowned let loop: MainLoop
    private let handler: (UInt32) -> Void
    /// Whether the source goes once its handler ran (``MainLoop/nextTurn(_:)``).
    fileprivate var endsAfterFiring = false

    fileprivate init(loop: MainLoop, handler: @escaping (UInt32) -> Void) {
        self.loop = loop
        self.handler = handler
    }

    /// What sd-event hands back to the callback: this object, unretained (the loop keeps it alive).
    fileprivate var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    fileprivate static func fire(_ userdata: UnsafeMutableRawPointer?, _ events: UInt32 = 0) -> Int32 {
        guard let userdata else { return 0 }
        // A handler may cancel its own source, which lets the loop release it: hold it until the call returns.
        let source = Unmanaged<EventSource>.fromOpaque(userdata).takeUnretainedValue()
        let loop = source.loop
        loop.isDispatching = true
        withExtendedLifetime(source) {
            source.handler(events)
            if source.endsAfterFiring { source.cancel() }
        }
        loop.isDispatching = false
        if loop.workQueuedByHandler {
            loop.workQueuedByHandler = false
            loop.afterDispatch?()
        }
        return 0
    }

    /// Sets the events an I/O source waits for (`EPOLLIN`, `EPOLLOUT`). With none it still hears `EPOLLHUP` and
    /// `EPOLLERR`, which epoll always reports: a peer that goes away is seen while its connection does not read.
    public func setEvents(_ events: UInt32) {
        guard let pointer else { return }
        sd_event_source_set_io_events(pointer, events)
    }

    /// Arms a timer source again, `delay` from now.
    public func schedule(after delay: Duration) {
        guard let pointer else { return }
        sd_event_source_set_time_relative(pointer, MainLoop.microseconds(delay))
        sd_event_source_set_enabled(pointer, Int32(SD_EVENT_ONESHOT))
    }

    /// Stops watching: the handler is not called again.
    public func cancel() {
        release()
        loop.forget(self)
    }

    fileprivate func release() {
        if let pointer { sd_event_source_disable_unref(pointer) }
        pointer = nil
    }
}
