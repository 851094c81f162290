// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// `cutfs.c` mounted on a directory: a file system that forgets, at a power cut, what was not fsynced.
final class CutFS {
    /// Whether this machine can mount it: `/dev/fuse`, libfuse3's headers (`libfuse3-dev`) and `fusermount3`
    /// (`fuse3`); scripts/install-deps installs both packages.
    static var isAvailable: Bool {
        FileManager.default.fileExists(atPath: "/dev/fuse")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/fusermount3")
            && FileManager.default.fileExists(atPath: "/usr/include/fuse3/fuse.h")
    }

    private let mountpoint: String
    private let process: SpawnedProcess

    /// Builds cutfs into `folder` and mounts it on `mountpoint` (an empty directory); returns once it serves.
    init(at mountpoint: String, buildingIn folder: String) throws {
        self.mountpoint = mountpoint
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("cutfs.c")
        let binary = folder + "/cutfs"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let compiler = try SpawnedProcess(
            "/bin/sh", ["-c", #"cc -O2 -Wall -o "$0" "$1" $(pkg-config --cflags --libs fuse3)"#, binary, source.path])
        guard compiler.wait() == 0 else { throw Failure("cannot build \(source.path) (libfuse3-dev installed?)") }

        let output = try SpawnPipe()
        process = try SpawnedProcess(binary, [mountpoint], standardOutput: .descriptor(output.writeEnd))
        Glibc.close(output.writeEnd)
        defer { Glibc.close(output.readEnd) }
        // It prints "mounted" once the kernel has handed it the mount.
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(output.readEnd, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        guard String(decoding: line, as: UTF8.self) == "mounted" else {
            throw Failure("cutfs did not mount on \(mountpoint) (exit status \(process.wait()))")
        }
    }

    /// The power cut: from now on every change and fsync fails.
    func cut() throws { try control("cut") }

    /// The power back, with what a disk would have kept.
    func restore() throws { try control("restore") }

    /// Unmounts it and ends its process, even while another process still holds a file of it: the unmount is
    /// lazy, and the process is killed. (A plain unmount fails with EBUSY while any process of the test run
    /// holds a descriptor on the mount, and then the process never ends. SIGKILL, as cutfs inherits the test
    /// thread's signal mask, which blocks SIGTERM.)
    func unmount() {
        let fusermount = try? SpawnedProcess("/usr/bin/fusermount3", ["-u", "-z", "-q", mountpoint])
        _ = fusermount?.wait()
        kill(process.pid, SIGKILL)
        _ = process.wait()
    }

    private func control(_ command: String) throws {
        // Close-on-exec: a process another test starts meanwhile must not inherit it and so hold the mount.
        let descriptor = open(mountpoint + "/.cutfs", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure("cannot open cutfs's control file: errno \(errno)") }
        defer { Glibc.close(descriptor) }
        let bytes = Array(command.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else {
            throw Failure("cannot \(command): errno \(errno)")
        }
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
