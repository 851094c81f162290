// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Systemd
import Testing

/// The peer's unit comes from the process that connected, through its pidfd, and never from another process that
/// took its pid afterwards (issue 40).
@Suite("A peer's systemd unit (pidfd, cgroup)", .offPool)
struct PeerUnitResolverTests {
    @Test(arguments: [
        ("/system.slice/shop-app.service", ProcessUnits(unit: "shop-app.service")),
        ("/system.slice/system-kiosk.slice/kiosk-1.service", ProcessUnits(unit: "kiosk-1.service")),
        ("/init.scope", ProcessUnits(unit: "init.scope")),
        ("/user.slice/user-1000.slice/session-3.scope", ProcessUnits(unit: "session-3.scope")),
        (
            "/user.slice/user-1000.slice/user@1000.service/app.slice/shop.service",
            ProcessUnits(unit: "user@1000.service", userUnit: "shop.service")
        ),
        (
            "/user.slice/user-1000.slice/user@1000.service/init.scope",
            ProcessUnits(unit: "user@1000.service", userUnit: "init.scope")
        ),
        ("/system.slice/docker.service/payload", ProcessUnits(unit: "docker.service")),
    ])
    func aPathNamesItsUnits(_ path: String, _ units: ProcessUnits) {
        #expect(ProcessUnits(cgroupPath: path) == units)
    }

    @Test(arguments: ["/", "", "/system.slice", "/user.slice/user-1000.slice", "/machine/payload.service"])
    func aPathWithoutAUnitNamesNone(_ path: String) {
        #expect(ProcessUnits(cgroupPath: path) == nil)
    }

    /// The index names a cgroup id (its directory's inode) by the units of its path, its own user's manager's
    /// units included, and reads the tree again for an id it does not know only when a directory it read has
    /// changed (a unit started), once per id.
    @Test func theIndexNamesCgroupIdsAndReadsAgainOnlyWhenADirectoryChanged() throws {
        let root = try TemporaryDirectory(prefix: "authd-cgroup")
        defer { root.remove() }
        func make(_ path: String) throws -> UInt64 {
            try FileManager.default.createDirectory(
                atPath: root.appending(path), withIntermediateDirectories: true)
            var info = stat()
            #expect(stat(root.appending(path), &info) == 0)
            return UInt64(info.st_ino)
        }
        let shop = try make("system.slice/shop-app.service")
        let user = try make("user.slice/user-1000.slice/user@1000.service/app.slice/app-shop.service")
        let delegated = try make("system.slice/docker.service/payload")
        let index = CgroupUnitIndex(root: root.path, userManager: "user@1000.service")
        #expect(index.units(ofCgroup: shop) == ProcessUnits(unit: "shop-app.service"))
        #expect(index.units(ofCgroup: user) == ProcessUnits(unit: "user@1000.service", userUnit: "app-shop.service"))
        #expect(index.readings == 1)
        // Below a unit's own cgroup (Delegate=): no unit, and nothing read changed, so no reading.
        #expect(index.units(ofCgroup: delegated) == nil)
        #expect(index.readings == 1)
        // A cgroup made below a unit's own is not watched: still no reading.
        #expect(index.units(ofCgroup: try make("system.slice/docker.service/payload/more")) == nil)
        #expect(index.readings == 1)
        // A unit started since: its slice changed, so the index reads again and finds it.
        let started = try make("system.slice/other-app.service")
        #expect(index.units(ofCgroup: started) == ProcessUnits(unit: "other-app.service"))
        #expect(index.readings == 2)
        #expect(index.units(ofCgroup: shop) == ProcessUnits(unit: "shop-app.service"))
        #expect(index.readings == 2)
    }

    /// A server prepares its index when it starts: the tree is read then, once, and the first lookup reads nothing.
    @Test func aPreparedIndexIsReadOnceBeforeItsFirstLookup() throws {
        let root = try TemporaryDirectory(prefix: "authd-cgroup-prepared")
        defer { root.remove() }
        try FileManager.default.createDirectory(
            atPath: root.appending("system.slice/shop-app.service"), withIntermediateDirectories: true)
        var info = stat()
        #expect(stat(root.appending("system.slice/shop-app.service"), &info) == 0)
        let index = CgroupUnitIndex(root: root.path)
        #expect(index.readings == 0)
        index.prepare()
        index.prepare()
        #expect(index.readings == 1)
        #expect(index.units(ofCgroup: UInt64(info.st_ino)) == ProcessUnits(unit: "shop-app.service"))
        #expect(index.readings == 1)
    }

    /// Another user's manager is delegated: its user may make as many cgroups there as it likes. The system
    /// daemon's index neither enters it nor watches it, so those cgroups cost no reading and hide nothing.
    @Test func anotherUsersOwnCgroupsCostNoReading() throws {
        let root = try TemporaryDirectory(prefix: "authd-cgroup-users")
        defer { root.remove() }
        let manager = root.appending("user.slice/user-1000.slice/user@1000.service")
        for index in 0..<40 {
            try FileManager.default.createDirectory(
                atPath: manager + "/app.slice/made-\(index).slice", withIntermediateDirectories: true)
        }
        try FileManager.default.createDirectory(
            atPath: root.appending("system.slice/shop-app.service"), withIntermediateDirectories: true)
        var info = stat()
        #expect(stat(root.appending("system.slice/shop-app.service"), &info) == 0)
        let index = CgroupUnitIndex(root: root.path)
        #expect(index.units(ofCgroup: UInt64(info.st_ino)) == ProcessUnits(unit: "shop-app.service"))
        // system.slice, shop-app.service, user.slice, user-1000.slice, user@1000.service: not its 41 slices.
        #expect(index.directoriesLastRead == 5)
        try FileManager.default.createDirectory(
            atPath: manager + "/app.slice/made-40.slice/new.service", withIntermediateDirectories: true)
        #expect(stat(manager + "/app.slice/made-40.slice/new.service", &info) == 0)
        #expect(index.units(ofCgroup: UInt64(info.st_ino)) == nil)
        #expect(index.readings == 1)
    }

    /// A peer that connected and exited before the accept, its pid then held by a process of another unit: its
    /// pidfd (SO_PEERPIDFD) is of the exited process, so the daemon names no unit, never the other one; a peer that
    /// still runs is named by its own. Both ways: the pidfd's cgroup (PIDFD_GET_INFO), and /proc/PID/cgroup checked
    /// with the pidfd (kernels before 6.13), with a /proc in which the pid now belongs to other-app.service.
    @Test(arguments: [true, false])
    func aPeerWhosePidWasTakenIsNeverNamedByTheNewProcess(asksThePidfd: Bool) throws {
        let directory = try TemporaryDirectory(prefix: "authd-peer")
        defer { directory.remove() }
        let path = directory.appending("s")
        let listener = try Self.listen(at: path)
        defer { close(listener) }
        let proc = directory.appending("proc")
        let resolver = PeerUnitResolver(
            index: CgroupUnitIndex(root: directory.path), procRoot: proc, asksThePidfd: asksThePidfd)

        // The peer connects and exits; it is reaped before the daemon accepts.
        let gone = try Self.connector(path, staysUntilInputCloses: false)
        #expect(gone.process.wait() == 0)
        let goneSocket = accept(listener, nil, nil)
        defer { close(goneSocket) }
        try Self.fakeCgroup(of: gone.process.pid, in: proc, "0::/system.slice/other-app.service\n")
        #expect(resolver.units(ofPeer: goneSocket, pid: gone.process.pid) == nil)

        // The positive twin: a peer that still runs is named by its unit (in /proc, in the way that reads it).
        let alive = try Self.connector(path, staysUntilInputCloses: true)
        defer {
            close(alive.input)
            alive.process.wait()
        }
        let aliveSocket = accept(listener, nil, nil)
        defer { close(aliveSocket) }
        try Self.fakeCgroup(of: alive.process.pid, in: proc, "0::/system.slice/shop-app.service\n")
        let found = resolver.units(ofPeer: aliveSocket, pid: alive.process.pid)
        if asksThePidfd {
            // This test's process is in no unit of the index's (an empty directory): found, and named by none.
            #expect(found == nil)
            #expect(resolver.index.readings == 1)
        } else {
            #expect(found == ProcessUnits(unit: "shop-app.service"))
        }
    }

    /// The pidfd's process must be the one whose pid was read: a pidfd of an exited process refuses a pid that a
    /// running process now holds, whatever /proc says of it.
    @Test func aPidfdOfAnExitedProcessRefusesThePidsNewHolder() throws {
        let directory = try TemporaryDirectory(prefix: "authd-reuse")
        defer { directory.remove() }
        let proc = directory.appending("proc")
        let exited = try SpawnedProcess("/bin/true", [])
        let process = try #require(ProcessDescriptor.open(exited.pid))
        #expect(exited.wait() == 0)
        #expect(!process.isRunning)
        #expect(process.cgroupInfo() == .exited)
        // This process (running) stands for the pid's new holder, in other-app.service.
        try Self.fakeCgroup(of: getpid(), in: proc, "0::/system.slice/other-app.service\n")
        for asks in [true, false] {
            let resolver = PeerUnitResolver(
                index: CgroupUnitIndex(root: directory.path), procRoot: proc, asksThePidfd: asks)
            #expect(resolver.units(of: process, pid: getpid()) == nil)
            let running = try #require(ProcessDescriptor.open(getpid()))
            #expect(running.isRunning)
            #expect(
                resolver.units(of: running, pid: getpid()) == (asks ? nil : ProcessUnits(unit: "other-app.service")))
        }
    }

    /// A bus peer's process is opened by its pid: one of another uid than the bus said is refused.
    @Test func aProcessOfAnotherUidIsRefused() throws {
        let directory = try TemporaryDirectory(prefix: "authd-uid")
        defer { directory.remove() }
        let resolver = PeerUnitResolver(index: CgroupUnitIndex(root: directory.path))
        let own = try #require(ProcessDescriptor.open(getpid()))
        guard case .cgroup(_, let euid) = own.cgroupInfo() else { return }  // a kernel before 6.13
        #expect(euid == geteuid())
        #expect(resolver.units(of: own, pid: getpid(), uid: geteuid() &+ 1) == nil)
    }

    // MARK: Helpers

    private static func listen(at path: String) throws -> Int32 {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            bytes.copyBytes(from: path.utf8.prefix(bytes.count - 1))
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0, Glibc.listen(descriptor, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
        return descriptor
    }

    /// A process that connects to `path`, then exits, or stays until its standard input closes.
    private static func connector(
        _ path: String, staysUntilInputCloses stays: Bool
    ) throws -> (process: SpawnedProcess, input: Int32) {
        let pipe = try SpawnPipe()
        let script =
            "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])"
            + (stays ? "; sys.stdin.read()" : "")
        let process = try SpawnedProcess(
            "/usr/bin/python3", ["-c", script, path], standardInput: .descriptor(pipe.readEnd))
        close(pipe.readEnd)
        return (process, pipe.writeEnd)
    }

    private static func fakeCgroup(of pid: Int32, in proc: String, _ text: String) throws {
        try FileManager.default.createDirectory(atPath: "\(proc)/\(pid)", withIntermediateDirectories: true)
        try text.write(toFile: "\(proc)/\(pid)/cgroup", atomically: false, encoding: .utf8)
    }
}
