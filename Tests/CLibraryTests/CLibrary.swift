// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// libexponea-auth and its C examples, built once per test run with the library's own Makefile into the package's
/// build folder (`.build/libexponea-auth`), never into the source tree.
enum CLibrary {
    /// The repository.
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // Tests/CLibraryTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent().path
    /// The library's sources.
    static let source = repository + "/libexponea-auth"
    /// Where make builds it.
    static let buildDirectory = repository + "/.build/libexponea-auth"
    /// The shared library, by its soname.
    static let library = buildDirectory + "/libexponea-auth.so.1"

    /// make's outcome: a `static let` is made once, and every test that asks meanwhile waits for it. Bounded: a
    /// compiler that hangs fails the tests instead of holding them.
    private static let built: Result<Void, BuildFailure> = {
        do {
            let make = try BackgroundProcess(
                "/usr/bin/env", ["make", "-C", source, "BUILD=\(buildDirectory)", "all", "examples"])
            let ended = make.waitForExit(timeout: .seconds(300))
            let status = make.stop()
            _ = make.waitForOutput(timeout: .seconds(5)) { _ in false }  // read to its end
            return ended && status == 0 ? .success(()) : .failure(BuildFailure(output: make.output))
        } catch {
            return .failure(BuildFailure(output: "\(error)"))
        }
    }()

    /// Builds the library and the examples, once.
    static func build() throws { try built.get() }

    /// A C example, built.
    static func example(_ name: String) throws -> String {
        try build()
        return buildDirectory + "/examples/" + name
    }

    /// The library and its examples built for a device's architecture with its cross compiler
    /// (`.build/libexponea-auth-ARCH`): both architectures' outcomes, made once, when first asked for.
    private static let crossBuilt: [Architecture: Result<Void, BuildFailure>] = Dictionary(
        uniqueKeysWithValues: Architecture.cross.map { architecture in
            do {
                try architecture.requireToolchain()
                let make = try BackgroundProcess(
                    "/usr/bin/env",
                    [
                        "make", "-C", source, "CC=\(architecture.compiler)",
                        "BUILD=\(buildDirectory)-\(architecture)", "all", "examples",
                    ])
                let ended = make.waitForExit(timeout: .seconds(300))
                let status = make.stop()
                _ = make.waitForOutput(timeout: .seconds(5)) { _ in false }  // read to its end
                return (architecture, ended && status == 0 ? .success(()) : .failure(BuildFailure(output: make.output)))
            } catch {
                return (architecture, .failure(BuildFailure(output: "\(error)")))
            }
        })

    /// A C example, built for `architecture`: how to run it. A device's runs under qemu-user, with the library
    /// built beside it.
    static func example(_ name: String, for architecture: Architecture) throws -> TestProgram {
        guard let emulator = architecture.emulator else {
            return TestProgram(executable: try example(name), prefix: [])
        }
        try architecture.requireToolchain()
        try crossBuilt[architecture]?.get()
        let directory = "\(buildDirectory)-\(architecture)"
        return TestProgram(
            executable: emulator.path,
            prefix: ["-L", emulator.root, "-E", "LD_LIBRARY_PATH=\(directory)", directory + "/examples/" + name])
    }

    /// A script of `libexponea-auth/examples`.
    static func script(_ name: String) -> String { source + "/examples/" + name }

    struct BuildFailure: Error, CustomStringConvertible {
        var output: String
        var description: String { "make -C libexponea-auth failed:\n\(output)" }
    }
}

/// `test-backend.py`: the integrator's token backend and a strict event stream, on a port the kernel chose.
/// Killed when released.
final class TestBackend {
    let process: BackgroundProcess
    let port: Int

    /// The first segment of every token the backend mints: their header, the same for all (Python's
    /// `json.dumps` of it, base64url). Output that contains it printed a token.
    static let tokenHeader = TestJWT.base64URL(Data(#"{"alg": "HS512", "typ": "JWT", "kid": "test"}"#.utf8))

    /// Starts it and waits for the port it prints first.
    ///
    /// - Parameter lifetime: The seconds a minted token is valid; one of 62-64 s is in its last minute
    ///   (`expiredSoon`) 2-4 s after it was minted, so that the daemon asks the group for a refresh every few
    ///   seconds.
    init(lifetime: Int = 3600) throws {
        process = try BackgroundProcess(
            "/usr/bin/python3", [CLibrary.script("test-backend.py"), "--lifetime", "\(lifetime)"],
            environment: ["PATH": "/usr/bin:/bin"])
        let started = process.waitForOutput(timeout: .seconds(10)) { !$0.isEmpty }
        guard started, let port = Int(process.output.prefix { $0 != "\n" }) else {
            process.stop()
            throw NotStarted(output: process.output)
        }
        self.port = port
    }

    deinit { process.stop() }

    /// What `GET /stats` says.
    struct Stats: Decodable {
        var fetches: Int
        /// Fetches by the generation the refresh handler refreshed.
        var fetchesPerGeneration: [String: Int]
        var requests: Int
        var accepted: Int
        var expired: Int
        var superseded: Int
        var missing: Int
        var forged: Int
        var rejectedOnPurpose: Int
    }

    func stats() throws -> Stats {
        let (status, body) = try request("GET", "/stats")
        guard status == 200 else { throw UnexpectedStatus(status: status) }
        return try JSONDecoder().decode(Stats.self, from: body)
    }

    /// Makes the stream answer the next request 401, whatever it carries.
    func rejectNext() throws {
        let (status, _) = try request("POST", "/control/reject-next")
        guard status == 200 else { throw UnexpectedStatus(status: status) }
    }

    /// One HTTP/1.0 request to the backend, read to the end of its answer (the backend closes after each);
    /// bounded by the socket's timeouts.
    private func request(_ method: String, _ path: String) throws -> (status: Int, body: Data) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(descriptor) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        for option in [SO_RCVTIMEO, SO_SNDTIMEO] {
            setsockopt(descriptor, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        let message = Array("\(method) \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n".utf8)
        guard send(descriptor, message, message.count, Int32(MSG_NOSIGNAL)) == message.count else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        let response = PipeReader.readToEndOfSocket(descriptor)
        let text = String(decoding: response, as: UTF8.self)
        guard let head = text.range(of: "\r\n\r\n"),
            let status = Int(text.split(separator: " ", maxSplits: 2).dropFirst().first ?? "")
        else { throw UnexpectedStatus(status: -1) }
        return (status, Data(text[head.upperBound...].utf8))
    }

    struct NotStarted: Error, CustomStringConvertible {
        var output: String
        var description: String { "test-backend.py did not print its port; it printed:\n\(output)" }
    }

    struct UnexpectedStatus: Error {
        var status: Int
    }
}

extension PipeReader {
    /// Reads a socket of the test's to its end (or its receive timeout), without closing it.
    static func readToEndOfSocket(_ descriptor: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                data.append(contentsOf: buffer[..<count])
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                return data
            }
        }
    }
}

/// An example app (`poll-app`, `events-app`) of the group `shop`, started against the daemon and the backend,
/// its output collected as it comes. Killed when released.
final class ExampleApp {
    let name: String
    let process: BackgroundProcess

    /// `poll-app shop PORT [arguments...]`, built for `architecture` (a device's runs under qemu-user).
    static func poll(
        _ arguments: [String], daemon: DaemonUnderTest, backend: TestBackend, on architecture: Architecture = .native
    ) throws -> ExampleApp {
        let program = try CLibrary.example("poll-app", for: architecture)
        return try ExampleApp(
            "poll-app", program.executable, program.arguments(["shop", "\(backend.port)"] + arguments),
            daemon: daemon)
    }

    /// `events-app shop [arguments...]`: prints the group's events as its handlers see them.
    static func events(_ arguments: [String] = [], daemon: DaemonUnderTest) throws -> ExampleApp {
        try ExampleApp("events-app", CLibrary.example("events-app"), ["shop"] + arguments, daemon: daemon)
    }

    private init(
        _ name: String, _ executable: String, _ arguments: [String], daemon: DaemonUnderTest,
        environment: [String: String] = [:]
    ) throws {
        self.name = name
        // The examples link the library from the build folder, and find the daemon's private socket as authctl
        // does.
        let base = [
            "EXPONEA_AUTHD_SOCKET": daemon.socketPath, "LD_LIBRARY_PATH": CLibrary.buildDirectory,
            "PATH": "/usr/bin:/bin",
        ]
        process = try BackgroundProcess(
            executable, arguments, environment: base.merging(environment) { _, new in new })
    }

    deinit { process.stop() }

    /// What it printed so far (standard output and error).
    var output: String { process.output }

    /// Its whole lines so far.
    var lines: [String] { output.split(separator: "\n").map(String.init) }

    /// Waits until a whole line it printed satisfies `condition`.
    func waitForLine(timeout: Duration = .seconds(10), _ condition: (Substring) -> Bool) -> Bool {
        process.waitForOutput(timeout: timeout) { $0.split(separator: "\n").contains(where: condition) }
    }

    /// Waits, at most `timeout`, until it exits; returns its exit status, or nil when it still ran (it is killed
    /// then). Either way its output is checked for the backend's tokens.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(30)) -> Int32? {
        let ended = process.waitForExit(timeout: timeout)
        let status = process.stop()
        // The output is read to its end, which comes a moment after the exit.
        _ = process.waitForOutput(timeout: .seconds(5)) { _ in false }
        expectNoToken()
        return ended ? status : nil
    }

    /// Kills it, and checks its output for the backend's tokens.
    func kill() {
        process.stop()
        expectNoToken()
    }

    /// The app must never print a token, not even the stale one.
    func expectNoToken(sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            !output.contains(TestBackend.tokenHeader), "\(name) printed a token:\n\(output)",
            sourceLocation: sourceLocation)
    }
}
