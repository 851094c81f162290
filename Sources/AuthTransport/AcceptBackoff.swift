// SPDX-License-Identifier: Apache-2.0
import Logging
internal import NIOCore

#if canImport(Glibc)
    import Glibc
#endif

/// Stops accepting for a moment when accept(2) fails for want of resources (EMFILE, ENFILE, ENOBUFS, ENOMEM),
/// and logs it once per interval.
///
/// NIO's `AcceptBackoffHandler` does not help here: after a failed accept the server channel still has a read
/// pending, so NIO never asks the handler for the next read and polls the listening socket, which stays
/// readable, at once again: the loop spins. Turning auto-read off takes the socket out of the poll set; it goes
/// back in after the back-off, and the clients that waited in the listening queue are accepted then.
///
/// The server channel reads again after the back-off only if it is still the one that reads (``AcceptRotation``).
final class AcceptBackoff: ChannelInboundHandler {
    typealias InboundIn = Any

    private let backoff: TimeAmount
    private let logger: Logger
    private let throttle: LogThrottle
    private let rotation: AcceptRotation
    private let loop: Int
    private var pausing = false

    init(backoff: TimeAmount, logger: Logger, throttle: LogThrottle, rotation: AcceptRotation, loop: Int) {
        self.backoff = backoff
        self.logger = logger
        self.throttle = throttle
        self.rotation = rotation
        self.loop = loop
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let failure = error as? IOError, [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(failure.errnoCode) else {
            context.fireErrorCaught(error)
            return
        }
        if let count = throttle.admit("accept", uid: getuid()) {
            logger.warning(
                """
                Cannot accept connections: \(failure); trying again every \(backoff.nanoseconds / 1_000_000) ms \
                (raise LimitNOFILE= or lower --max-connections)\(LogThrottle.suffix(count))
                """,
                metadata: ["authd.count": "\(count)"]
            )
        }
        // Off at each failure, even while a back-off runs: the rotation may have turned reading on meanwhile.
        try? context.channel.syncOptions?.setOption(ChannelOptions.autoRead, value: false)
        guard !pausing else { return }
        pausing = true
        let channel = context.channel
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: backoff) { [rotation, loop] in
            handler.value.pausing = false
            guard rotation.isReading(loop) else { return }
            try? channel.syncOptions?.setOption(ChannelOptions.autoRead, value: true)
        }
    }
}
