// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The real daemon's life as systemd sees it: a STATUS that follows every change, one daemon per store, and a
/// SIGTERM honoured while the start-up is held up.
@Suite("exponea-authd lifecycle: status, store lock, stop during start-up", .offPool)
struct DaemonLifecycleTests {
    @Test func statusIsCurrentRightAfterATokenIsSetAndCleared() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let daemon = try fixture.start()
        defer { daemon.stop() }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1\nSTATUS=Holding 0 app groups") == true)

        let client = try VarlinkTestClient(path: fixture.socketPath)
        defer { client.close() }
        try client.call("SetToken", ["group": "shop", "token": TestJWT().token(expiringIn: 3600)])
        // No watchdog is set: the daemon has no timer that would refresh the status; the change itself does.
        let afterSet = fixture.notify.receive(containing: "Holding 1 app group (1 with a token)")
        #expect(afterSet?.hasPrefix("STATUS=") == true, "\(afterSet ?? "nothing")")
        try client.call("Anonymize", ["group": "shop"])
        #expect(fixture.notify.receive(containing: "Holding 1 app group (0 with a token)") != nil)
        #expect(daemon.stop(signal: SIGTERM) == 0)
    }

    @Test func aSecondDaemonOnTheSameStoreRefusesAndNamesTheFirst() throws {
        let fixture = try DaemonStartupTests.Fixture()
        let first = try fixture.start()
        defer { first.stop() }
        #expect(fixture.notify.receive()?.hasPrefix("READY=1") == true)

        let notify = try NotifySocket()
        let second = try BackgroundProcess(
            BuildProducts.executable("exponea-authd"),
            [
                "--user", "--log-target", "console", "--state-directory", fixture.stateDirectory, "--socket",
                fixture.root.appending("second.socket"),
            ],
            environment: [
                "HOME": fixture.root.path, "NOTIFY_SOCKET": notify.path, "CREDENTIALS_DIRECTORY": fixture.credentials,
            ]
        )
        #expect(second.waitForExit())
        #expect(second.stop() == 1)
        #expect(
            second.output.contains("is in use by another exponea-authd (pid \(first.pid))"), "\(second.output)")
        #expect(notify.receive(timeout: .milliseconds(100)) == nil)
        #expect(first.isRunning)

        // The lock goes with the process: once the first is gone, even by SIGKILL, a new one starts.
        first.stop(signal: SIGKILL)
        let third = try fixture.start()
        defer { third.stop() }
        #expect(fixture.notify.receive(containing: "READY=1") != nil, "\(third.output)")
        #expect(third.stop(signal: SIGTERM) == 0)
    }

    /// A start held up where a slow disk holds it: in the open of the store's key. Every file the start reads is
    /// opened without blocking (a FIFO in its place is refused, issue 18 item 4), so what holds it is a file
    /// system that does not answer: here a seccomp supervisor (`openHeld`) that lets every open(2) of the daemon
    /// through except that of `store.key`, which it never answers, as a hung network or FUSE file system would.
    @Test(.enabled(if: getuid() == 0, "reads the daemon's memory (the path it opens), which needs CAP_SYS_PTRACE"))
    func sigtermEndsAStartUpThatIsHeldUp() throws {
        let root = try TemporaryDirectory(prefix: "authd-held")
        defer { root.remove() }
        let state = root.appending("state")
        let notify = try NotifySocket()
        let supervisor = try BackgroundProcess(
            "/usr/bin/python3",
            [
                "-c", Self.openHeld, "store.key", BuildProducts.executable("exponea-authd"), "--user", "--log-target",
                "console", "--state-directory", state, "--socket", root.appending("io.socket"),
            ],
            environment: ["HOME": root.path, "NOTIFY_SOCKET": notify.path, "PATH": "/usr/bin:/bin"]
        )
        defer { supervisor.stop() }
        // Held up: the start's thread waits in its open of the key, for an answer that never comes. The supervisor
        // says so (or its output ends: it failed).
        let held = supervisor.waitForOutput(timeout: .seconds(20)) { $0.contains("HELD ") }
        let line = supervisor.output.split(separator: "\n").first { $0.hasPrefix("DAEMON ") }
        let pid = try #require(line.flatMap { Int32($0.dropFirst("DAEMON ".count)) }, "\(supervisor.output)")
        // The supervisor prints HELD once it has the open's notification, which the kernel queues just before the
        // daemon's thread goes to sleep on it: the thread's wait in /proc, which has no event, is polled until it
        // shows.
        let waiting =
            held && BackgroundProcess.waitUntil(timeout: .seconds(5)) { Self.threadWaits(in: pid, on: "seccomp") }
        try #require(waiting, "not held: \(supervisor.output)")

        kill(pid, SIGTERM)
        // The supervisor ends with the daemon, with its exit status.
        #expect(supervisor.waitForExit(timeout: .seconds(5)))
        #expect(supervisor.stop() == 0)
        #expect(supervisor.output.contains("Stopped during start-up"), "\(supervisor.output)")
        #expect(notify.receive(timeout: .milliseconds(100)) == nil)  // never READY
    }

    /// `python3 -c openHeld NAME PROGRAM ARGS...` runs PROGRAM under a seccomp filter that sends its every open(2)
    /// to this script (SECCOMP_RET_USER_NOTIF): an open of a file named NAME is never answered, any other goes
    /// on. Prints `DAEMON <pid>`, then `HELD <path>` once an open is held; ends with PROGRAM, with its status.
    static let openHeld = """
        import ctypes, os, platform, select, socket, struct, sys
        name, program = sys.argv[1].encode(), sys.argv[2:]
        # The audit architecture, seccomp(2), and open, openat, openat2 (whose path is argument 0, 1, 1).
        arch, seccomp, opens = {
            "x86_64": (0xC000003E, 317, {2: 0, 257: 1, 437: 1}),
            "aarch64": (0xC00000B7, 277, {56: 1, 437: 1}),
        }[platform.machine()]
        libc = ctypes.CDLL(None, use_errno=True)
        def statement(code, k, jt=0, jf=0):
            return struct.pack("HBBI", code, jt, jf, k)
        # Load arch; another arch: allow. Load nr; an open: notify; else allow.
        bpf = statement(0x20, 4) + statement(0x15, arch, 0, len(opens) + 1) + statement(0x20, 0)
        for index, number in enumerate(opens):
            bpf += statement(0x15, number, len(opens) - index, 0)
        bpf += statement(0x06, 0x7FFF0000) + statement(0x06, 0x7FC00000)
        parent, child = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            parent.close()
            filters = ctypes.create_string_buffer(bpf)
            fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxP", len(bpf) // 8, ctypes.addressof(filters)))
            if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
                os._exit(120)
            listener = libc.syscall(seccomp, 1, 8, fprog)  # SECCOMP_SET_MODE_FILTER, FILTER_FLAG_NEW_LISTENER
            if listener < 0:
                os.write(2, b"seccomp: errno %d\\n" % ctypes.get_errno())
                os._exit(121)
            socket.send_fds(child, [b"x"], [listener])
            os.execv(program[0], program)
        child.close()
        listener = socket.recv_fds(parent, 1, 1)[1][0]
        print("DAEMON %d" % pid, flush=True)
        RECV, SEND, CONTINUE = 0xC0502100, 0xC0182101, 1
        notification = ctypes.create_string_buffer(80)  # struct seccomp_notif
        poller = select.poll()
        poller.register(listener, select.POLLIN)
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if not poller.poll(100):
                continue
            ctypes.memset(notification, 0, 80)
            if libc.ioctl(listener, RECV, notification) != 0:
                continue
            request, tid, _, number = struct.unpack_from("QIIi", notification.raw)
            address = struct.unpack_from("6Q", notification.raw, 32)[opens[number]]
            try:
                with open("/proc/%d/mem" % tid, "rb", buffering=0) as memory:
                    memory.seek(address)
                    path = memory.read(4096).split(b"\\0", 1)[0]
            except OSError:
                path = b""
            if os.path.basename(path) == name:
                print("HELD %s" % path.decode(errors="replace"), flush=True)
                continue
            libc.ioctl(listener, SEND, ctypes.create_string_buffer(struct.pack("QqiI", request, 0, 0, CONTINUE)))
        sys.exit(os.waitstatus_to_exitcode(status))
        """

    /// Whether a thread of `pid` sleeps in a kernel function whose name contains `needle` (`wchan`).
    static func threadWaits(in pid: Int32, on needle: String) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.contains { task in
            let wchan = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/wchan", encoding: .utf8)) ?? ""
            return wchan.contains(needle)
        }
    }
}
