// SPDX-License-Identifier: Apache-2.0
#if canImport(Glibc)
    import Glibc
#endif

/// A named, detached POSIX thread for the daemon's blocking loops (the expiry timer, the D-Bus connection, the
/// start-up), without Foundation's `Thread`.
enum DaemonThread {
    /// Starts `body` on a new thread named `name` (at most 15 bytes are kept, as the kernel allows).
    ///
    /// The thread inherits the calling thread's signal mask: started after ``SignalWaiter`` blocked the control
    /// signals, it never receives them.
    static func start(name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Body(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        defer { pthread_attr_destroy(&attributes) }
        let result = pthread_create(
            &thread, &attributes,
            { context in
                let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
                DaemonThread.name(body.name)
                body.body()
                return nil
            }, box)
        precondition(result == 0, "cannot start the thread \(name): \(String(cString: strerror(result)))")
    }

    /// Names the calling thread, as `ps -L` and `top -H` show it (pthread_setname_np is not in the Glibc module).
    private static func name(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = write(descriptor, bytes, bytes.count)
        close(descriptor)
    }

    private final class Body: Sendable {
        let name: String
        let body: @Sendable () -> Void

        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
