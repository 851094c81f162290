// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// The library's functions called directly, as C calls them: loaded into the test process with dlopen.
struct LoadedLibrary {
    typealias Client = OpaquePointer
    let open: @convention(c) (UnsafeMutablePointer<Client?>?, UnsafePointer<CChar>?, UnsafePointer<CChar>?) -> Int32
    let close: @convention(c) (Client?) -> Client?
    let getGroup: @convention(c) (Client?) -> UnsafePointer<CChar>?
    let strerror: @convention(c) (Int32) -> UnsafePointer<CChar>?
    let setUnavailableTimeout: @convention(c) (Client?, UInt64) -> Int32
    let getToken: @convention(c) (Client?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<UInt64>?) -> Int32
    let preflight:
        @convention(c) (
            Client?, UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<UInt64>?
        ) -> Int32
    let setToken: @convention(c) (Client?, UnsafePointer<CChar>?, UnsafeMutablePointer<UInt64>?) -> Int32
    let anonymize:
        @convention(c) (
            Client?, UnsafeMutablePointer<UInt32>?, UnsafeMutablePointer<Int32>?, UnsafeMutablePointer<Int32>?, Int
        ) -> Int32
    let clearLocalCustomerData: @convention(c) (Client?) -> Int32
    let waitForToken:
        @convention(c) (
            Client?, UInt64, UInt64, UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<UInt64>?
        ) -> Int32
    let setRetryWait: @convention(c) (Client?, UInt64) -> Int32

    /// `EXPONEA_AUTH_TOKEN_MAX + 1`: a buffer that always suffices.
    static let tokenBufferSize = 16384 + 1

    init() throws {
        try CLibrary.build()
        guard let handle = dlopen(CLibrary.library, RTLD_NOW | RTLD_LOCAL) else {
            throw Missing(name: String(cString: dlerror()))
        }
        func function<T>(_ name: String) throws -> T {
            guard let address = dlsym(handle, name) else { throw Missing(name: name) }
            return unsafeBitCast(address, to: T.self)
        }
        open = try function("exponea_auth_open")
        close = try function("exponea_auth_close")
        getGroup = try function("exponea_auth_get_group")
        strerror = try function("exponea_auth_strerror")
        setUnavailableTimeout = try function("exponea_auth_set_unavailable_timeout")
        getToken = try function("exponea_auth_get_token")
        preflight = try function("exponea_auth_preflight")
        setToken = try function("exponea_auth_set_token")
        anonymize = try function("exponea_auth_anonymize")
        clearLocalCustomerData = try function("exponea_auth_clear_local_customer_data")
        waitForToken = try function("exponea_auth_wait_for_token")
        setRetryWait = try function("exponea_auth_set_retry_wait")
    }

    /// A client of `group` on `socket`; fails the test when it cannot be made.
    func client(_ group: String = "shop", socket: String) throws -> Client {
        var client: Client?
        let result = open(&client, group, socket)
        try #require(result == 0, "exponea_auth_open: \(message(result))")
        return try #require(client)
    }

    func message(_ code: Int32) -> String { strerror(code).map { String(cString: $0) } ?? "(null)" }

    /// exponea_auth_get_token into a buffer of `size` bytes: its result, the token and the generation.
    func token(_ client: Client, size: Int = tokenBufferSize) -> (result: Int32, token: String, generation: UInt64) {
        var buffer = [CChar](repeating: 0, count: size)
        var generation: UInt64 = .max
        let result = getToken(client, &buffer, size, &generation)
        let text = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return (result, result > 0 ? String(decoding: text, as: UTF8.self) : "", generation)
    }

    struct Missing: Error, CustomStringConvertible {
        var name: String
        var description: String { "libexponea-auth: \(name)" }
    }
}

@Suite("libexponea-auth: the C API, called directly", .offPool)
struct CAPITests {
    /// The two waits bounded at 5 s refuse a longer one alike, with -EINVAL, before anything is sent.
    @Test func aWaitPastFiveSecondsIsRefusedByBoth() throws {
        let library = try LoadedLibrary()
        let client = try library.client(socket: "/nonexistent/authd-test/io.socket")
        defer { _ = library.close(client) }
        var buffer = [CChar](repeating: 0, count: LoadedLibrary.tokenBufferSize)
        var generation: UInt64 = 0
        #expect(library.waitForToken(client, 0, 5_000_001, &buffer, buffer.count, &generation) == -EINVAL)
        #expect(library.setRetryWait(client, 5_000_001) == -EINVAL)
        #expect(library.setRetryWait(client, 5_000_000) == 0)
    }

    @Test func strerrorSaysWhatEachCodeMeansAndFallsBackToTheSystemsMessage() throws {
        let library = try LoadedLibrary()
        #expect(library.message(0) == "Success")
        #expect(library.message(-ENOKEY) == "The app group has no token, or none came in time")
        #expect(library.message(-EPERM).contains("not trusted"))
        #expect(library.message(-EINVAL).contains("group name"))
        #expect(library.message(-ENOBUFS).contains("EXPONEA_AUTH_TOKEN_MAX + 1"))
        // Codes of no meaning of its own: the C library's message.
        #expect(library.message(-EDOM) == String(cString: Glibc.strerror(EDOM)))
    }

    @Test func aGroupNameOutsideTheDaemonsRuleIsRefusedBeforeAnythingConnects() throws {
        let library = try LoadedLibrary()
        for name in ["", ".shop", "shop/cart", "shop cart", "shöp", String(repeating: "a", count: 129)] {
            var client: LoadedLibrary.Client?
            #expect(library.open(&client, name, "/nonexistent/io.socket") == -EINVAL, "\(name)")
            #expect(client == nil)
        }
        for name in ["shop", "com.example.shop", "A-1_b.c", String(repeating: "a", count: 128)] {
            let client = try library.client(name, socket: "/nonexistent/io.socket")
            #expect(library.getGroup(client).map { String(cString: $0) } == name)
            _ = library.close(client)
        }
    }

    @Test func anEmptyGroupHasNoTokenAndATokenSetIsReadBack() throws {
        let daemon = try DaemonUnderTest()
        let library = try LoadedLibrary()
        let client = try library.client(socket: daemon.socketPath)
        defer { _ = library.close(client) }

        let empty = library.token(client)
        #expect(empty.result == -ENOKEY && empty.generation == 0)
        var buffer = [CChar](repeating: 1, count: LoadedLibrary.tokenBufferSize)
        var state: Int32 = -1
        #expect(library.preflight(client, &buffer, buffer.count, &state, nil) == 0)
        #expect(state == 0 && buffer[0] == 0)  // EXPONEA_AUTH_STATE_NOT_PROVIDED, an empty string

        let token = TestJWT().token(expiringIn: 3600)
        var generation: UInt64 = 0
        #expect(library.setToken(client, token, &generation) == 0)
        #expect(generation == 1)
        #expect(library.setToken(client, "not.a-jwt", nil) == -EBADMSG)
        let read = library.token(client)
        #expect(read.result == Int32(token.utf8.count) && read.token == token && read.generation == 1)
        // A buffer one byte short of the token and its NUL.
        #expect(library.token(client, size: token.utf8.count).result == -ENOBUFS)
        #expect(library.preflight(client, &buffer, buffer.count, &state, nil) == Int32(token.utf8.count))
        #expect(state == 3)  // EXPONEA_AUTH_STATE_VALID
    }

    @Test(.enabled(if: getuid() == 0, "needs root to run a server as another user"))
    func aSocketServedByAnotherUserIsSentNothing() throws {
        let bob: UInt32 = 4243
        let directory = try TemporaryDirectory(prefix: "libexponea-auth-planted")
        defer { directory.remove() }
        #expect(chown(directory.path, bob, bob) == 0 && chmod(directory.path, 0o755) == 0)
        let server = try PlantedServer(path: directory.appending("io.socket"), uid: bob)
        defer { server.stop() }
        let library = try LoadedLibrary()
        let client = try library.client(socket: server.path)
        defer { _ = library.close(client) }
        #expect(library.setToken(client, TestJWT().token(expiringIn: 3600), nil) == -EPERM)
        #expect(library.token(client).result == -EPERM)
        // Both connections were closed before a byte was sent: neither the token nor a request for one.
        #expect(server.connections(atLeast: 2) == [0, 0])
    }

    @Test func callsFromEightThreadsBesideTheLoopThreadRaceNothingUnderThreadSanitizer() throws {
        let daemon = try DaemonUnderTest()
        try CLibrary.build()
        let binary = CLibrary.buildDirectory + "/threads-tsan"
        let sources = try FileManager.default.contentsOfDirectory(atPath: CLibrary.source + "/src")
            .filter { $0.hasSuffix(".c") }.map { CLibrary.source + "/src/" + $0 }
        let compile = try ChildProcess.run(
            "/usr/bin/cc",
            [
                "-fsanitize=thread", "-g", "-O1", "-D_GNU_SOURCE", "-I", CLibrary.source + "/include", "-I",
                CLibrary.source + "/src", CLibrary.source + "/tests/threads.c", "-o", binary, "-lpthread",
            ] + sources)
        try #require(compile.status == 0, "\(compile.standardError)")
        // Address-space randomization off (setarch -R): some kernels' layouts are not ThreadSanitizer's.
        let run = try ChildProcess.run(
            "/usr/bin/setarch", ["-R", binary, daemon.socketPath, "shop"],
            input: TestJWT().token(expiringIn: 3600) + "\n")
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput == "ok refreshed=6\n", "\(run.standardOutput)")
        #expect(!run.standardError.contains("ThreadSanitizer"), "\(run.standardError)")
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/c++"), "needs a C++ compiler"))
    func theHeaderIsValidCPlusPlusAndLinksFromIt() throws {
        try CLibrary.build()
        let directory = try TemporaryDirectory(prefix: "libexponea-auth-cxx")
        defer { directory.remove() }
        let program = """
            #include <exponea-auth.h>
            #include <string>
            int main() {
                exponea_auth *auth = nullptr;
                std::string message = exponea_auth_strerror(exponea_auth_open(&auth, ".bad", nullptr));
                exponea_auth_close(auth);
                return message.find("group name") == std::string::npos;
            }
            """
        try program.write(toFile: directory.appending("app.cpp"), atomically: true, encoding: .utf8)
        let compile = try ChildProcess.run(
            "/usr/bin/c++",
            [
                "-std=c++11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I", CLibrary.source + "/include",
                directory.appending("app.cpp"), "-o", directory.appending("app"), "-L", CLibrary.buildDirectory,
                "-lexponea-auth", "-Wl,-rpath," + CLibrary.buildDirectory,
            ])
        try #require(compile.status == 0, "\(compile.standardError)")
        #expect(try ChildProcess.run(directory.appending("app")).status == 0)
    }

    @Test func theJSONReaderHoldsItsInvariantsOnEveryInputOfItsFuzzCorpus() throws {
        try CLibrary.build()
        let binary = CLibrary.buildDirectory + "/fuzz-c-json-replay"
        let compile = try ChildProcess.run(
            "/usr/bin/cc",
            [
                "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g", "-O1", "-D_GNU_SOURCE", "-I",
                CLibrary.source + "/include", "-I", CLibrary.source + "/src", CLibrary.source + "/tests/fuzz-json.c",
                CLibrary.source + "/src/json.c", "-o", binary,
            ])
        try #require(compile.status == 0, "\(compile.standardError)")
        let corpus = CLibrary.repository + "/Fuzz/corpus/fuzz-c-json"
        let count = try FileManager.default.contentsOfDirectory(atPath: corpus).count
        let run = try ChildProcess.run(binary, [corpus])
        #expect(run.status == 0, "\(run.standardError)")
        #expect(run.standardOutput == "fuzz-c-json: \(count) inputs\n")
    }

    @Test func withoutADaemonACallFailsWhenTheUnavailableBoundEnds() throws {
        let directory = try TemporaryDirectory(prefix: "libexponea-auth")
        defer { directory.remove() }
        let library = try LoadedLibrary()
        let client = try library.client(socket: directory.appending("io.socket"))
        defer { _ = library.close(client) }
        #expect(library.setUnavailableTimeout(client, 0) == 0)
        #expect(library.token(client).result == -ENOENT)
    }
}
