// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Reads a child's output pipe to its end on a thread of its own, with blocking reads, and hands each chunk to
/// a closure as it comes.
///
/// Not `FileHandle.readabilityHandler`: on Linux, tearing its dispatch read source down races libdispatch's
/// epoll bookkeeping, and the manager thread crashes on a freed note (swift-corelibs-libdispatch#949). A CI run
/// lost a whole test process to it. A blocking read registers nothing with libdispatch.
public enum PipeReader {
    /// Starts reading `descriptor` until end of file, calling `received` with each chunk and `ended` once at the
    /// end; then closes it. The thread owns the descriptor.
    public static func start(
        _ descriptor: Int32, received: @escaping @Sendable (Data) -> Void, ended: @escaping @Sendable () -> Void = {}
    ) {
        let thread = Thread {
            readChunks(descriptor, received)
            ended()
        }
        thread.start()
    }

    /// Reads `descriptor` to its end on this thread, and closes it.
    public static func readToEnd(_ descriptor: Int32) -> Data {
        var data = Data()
        readChunks(descriptor) { data.append($0) }
        return data
    }

    /// Reads `descriptor` until end of file (or an error other than EINTR), each chunk to `received`; closes it.
    private static func readChunks(_ descriptor: Int32, _ received: (Data) -> Void) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                received(Data(buffer[..<count]))
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        close(descriptor)
    }
}
