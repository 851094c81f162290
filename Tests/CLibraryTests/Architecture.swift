// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// An architecture libexponea-auth is built and tested for. Most devices are arm64 or armhf: their test programs
/// are built with Debian's cross compilers and run under qemu-user, against the same native daemon as the
/// machine's own (issue 38, part 3). A missing compiler or emulator fails the test, naming what to install
/// (`scripts/install-deps` installs them); it is never skipped.
enum Architecture: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case native
    case arm64
    case armhf

    /// The architectures of the devices, built and run under emulation here.
    static let cross: [Architecture] = [.arm64, .armhf]

    var testDescription: String { rawValue }

    /// The GNU triplet of its cross compiler; nil for the machine's own.
    var triplet: String? {
        switch self {
        case .native: nil
        case .arm64: "aarch64-linux-gnu"
        case .armhf: "arm-linux-gnueabihf"
        }
    }

    /// Its C compiler.
    var compiler: String { triplet.map { "/usr/bin/\($0)-gcc" } ?? "/usr/bin/cc" }

    /// qemu-user's emulator for it, and the root of its C library (`-L`); nil for the machine's own.
    var emulator: (path: String, root: String)? {
        switch self {
        case .native: nil
        case .arm64: ("/usr/bin/qemu-aarch64", "/usr/aarch64-linux-gnu")
        case .armhf: ("/usr/bin/qemu-arm", "/usr/arm-linux-gnueabihf")
        }
    }

    /// The Debian packages that bring its compiler and emulator.
    var packages: String {
        switch self {
        case .native: "gcc, libc6-dev"
        case .arm64: "gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user"
        case .armhf: "gcc-arm-linux-gnueabihf, libc6-dev-armhf-cross, qemu-user"
        }
    }

    /// Fails, naming what to install, when its compiler or emulator is missing.
    func requireToolchain() throws {
        for tool in [compiler] + (emulator.map { [$0.path, $0.root + "/lib"] } ?? []) {
            guard FileManager.default.fileExists(atPath: tool) else {
                throw MissingToolchain(architecture: self, tool: tool)
            }
        }
    }

    struct MissingToolchain: Error, CustomStringConvertible {
        var architecture: Architecture
        var tool: String
        var description: String {
            "libexponea-auth's \(architecture) tests need \(tool), which is missing: scripts/install-deps installs "
                + "it (\(architecture.packages))"
        }
    }
}

/// A test program of `libexponea-auth/tests`, built for one architecture: how to run it.
struct TestProgram {
    /// What runs: the program itself, or qemu-user's emulator.
    var executable: String
    /// The emulator's arguments and the program, before the program's own.
    var prefix: [String]

    /// The arguments that run it with `arguments` of its own.
    func arguments(_ arguments: [String]) -> [String] { prefix + arguments }
}

extension CLibrary {
    /// A test program of `libexponea-auth/tests`, built from the library's sources for `architecture`, into a
    /// folder of its own (`.build/libexponea-auth` for the machine's own, `.build/libexponea-auth-ARCH` else).
    static func testProgram(_ name: String, for architecture: Architecture = .native) throws -> TestProgram {
        try architecture.requireToolchain()
        try build()
        let directory = buildDirectory + (architecture == .native ? "" : "-\(architecture)")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let binary = directory + "/" + name
        let sources = try FileManager.default.contentsOfDirectory(atPath: source + "/src")
            .filter { $0.hasSuffix(".c") }.map { source + "/src/" + $0 }
        // As the Makefile builds the library: a 64-bit time_t on armhf too.
        let compile = try ChildProcess.run(
            architecture.compiler,
            [
                "-g", "-O1", "-D_GNU_SOURCE", "-D_FILE_OFFSET_BITS=64", "-D_TIME_BITS=64", "-I", source + "/include",
                "-I", source + "/src", source + "/tests/\(name).c", "-o", binary, "-lpthread",
            ] + sources)
        guard compile.status == 0 else { throw BuildFailure(output: compile.standardError) }
        guard let emulator = architecture.emulator else { return TestProgram(executable: binary, prefix: []) }
        return TestProgram(executable: emulator.path, prefix: ["-L", emulator.root, binary])
    }
}
