// SPDX-License-Identifier: Apache-2.0
internal import NIOCore
import Synchronization

/// The messages handed to one event loop and not yet written, for all of its connections: the first message
/// of a burst schedules one task on the loop, which writes every message handed over by then, in order, and
/// flushes each connection once. A thousand connections on one loop sharing an event cost one task, not a
/// thousand.
final class PendingWrites: Sendable {
    private struct Write {
        var channel: any Channel
        var activity: ConnectionActivity
        var message: [UInt8]
    }

    private let loop: any EventLoop
    private let queue = Mutex<[Write]>([])

    init(loop: any EventLoop) { self.loop = loop }

    /// Hands `message` over for `channel`, which must belong to this loop; returns at once.
    func append(_ message: [UInt8], for channel: any Channel, activity: ConnectionActivity) {
        activity.writeQueued()
        let first = queue.withLock { queue in
            queue.append(Write(channel: channel, activity: activity, message: message))
            return queue.count == 1
        }
        if first { loop.execute { self.writeAll() } }
    }

    /// On the loop: writes what was handed over, then flushes each connection written to.
    private func writeAll() {
        let writes = queue.withLock { queue in
            defer { queue = [] }
            return queue
        }
        var flushed = Set<ObjectIdentifier>()
        // An event fanned out is one array handed over for many connections: copied into one buffer they share.
        var shared: (message: [UInt8], buffer: ByteBuffer)?
        for write in writes {
            write.activity.writeDone()
            let buffer: ByteBuffer
            if let last = shared, Self.sameStorage(last.message, write.message) {
                buffer = last.buffer
            } else {
                buffer = ByteBuffer(bytes: write.message)
                shared = (write.message, buffer)
            }
            write.channel.write(buffer, promise: nil)
        }
        for write in writes where flushed.insert(ObjectIdentifier(write.channel)).inserted {
            write.channel.flush()
        }
    }

    /// Whether two arrays are one and the same storage (so the same bytes): the first keeps it alive, so its
    /// address cannot belong to another array meanwhile.
    static func sameStorage(_ first: [UInt8], _ second: [UInt8]) -> Bool {
        first.count == second.count
            && first.withUnsafeBufferPointer { a in
                second.withUnsafeBufferPointer { b in a.baseAddress == b.baseAddress }
            }
    }
}
