// SPDX-License-Identifier: Apache-2.0
// An app of an app group, as a process of its own, for tests of several apps together: it links
// ExponeaAuth, registers an async JWT error handler, and is driven line by line on standard input.
//
// Usage: authd-test-app SOCKET GROUP [--sync]
//        authd-test-app --first-call SOCKET GROUP    one GetToken and exit (0, or 1 when it failed): what
//                                                    authd-bench times from process start
//        authd-test-app --bench SOCKET GetToken|Header GROUP COUNT
//                                                    COUNT calls of AuthDaemonClient.getToken (or of
//                                                    ExponeaAuthClient's authenticator.getAuthHeader()), then
//                                                    prints "p50_ns cpu_ns_per_call switches_per_call", as
//                                                    authd-bench's C client does
//
// Prints:  handler REASON            its JWT error handler runs (then waits for a handler command)
//          set GENERATION            the handler stored the token it was given
//          renewed true|false        the handler renewed its claim
//          refreshed GENERATION ID   a token was set for the group; ID is its ids' "registered" value
//          response STATUS           a request ended
// Reads:   token JWT                 the running handler stores JWT and returns
//          fail                      the running handler returns without a token
//          renew                     the running handler renews its claim and goes on waiting
//          accept ID                 the app's backend accepts only tokens whose "registered" id is ID
//          request                   sends one stream request through ExponeaAuthClient.execute
// A handler given no command hangs: that is how a test makes a claimant that is alive but stuck.
// Links FoundationEssentials only, as an app should be able to: authd-bench and the size check look at it.
import AuthCore
import ExponeaAuth
import HTTPTypes
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

@main
enum TestApp {
    static let auth: ExponeaAuthClient = {
        let arguments = CommandLine.arguments
        return ExponeaAuthClient(
            group: arguments[2], integration: .stream(StreamSettings(streamId: "stream-1")),
            socketPath: arguments[1], retryWait: .seconds(5))
    }()
    /// The lines for the running handler, in order.
    static let handlerLines = LineQueue()
    /// The registered id the app's backend accepts.
    static let accepted = Mutex("v1")

    @MainActor
    static func main() async throws {
        // Each mode runs in a function of its own: an async function's frame is laid out when it starts, so a
        // `main` holding every mode would make the first call pay for the metadata of the others' locals.
        let arguments = CommandLine.arguments
        if arguments.count == 4, arguments[1] == "--first-call" {
            exit(await firstCall(socket: arguments[2], group: arguments[3]) ? 0 : 1)
        }
        if arguments.count == 6, arguments[1] == "--bench", let count = Int(arguments[5]), count > 0 {
            exit(await bench(socket: arguments[2], method: arguments[3], group: arguments[4], count: count) ? 0 : 1)
        }
        guard arguments.count >= 3 else {
            let usage = Array("usage: authd-test-app SOCKET GROUP [--sync]\n".utf8)
            _ = usage.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
            exit(2)
        }
        try await runApp(sync: arguments.contains("--sync"))
    }

    /// One GetToken: whether the daemon answered it. On the main actor, as `main` is: a call that hopped to the
    /// global executor would start libdispatch's worker threads first.
    @MainActor
    static func firstCall(socket: String, group: String) async -> Bool {
        do {
            _ = try await AuthDaemonClient(socketPath: socket).getToken(group: group)
            return true
        } catch {
            return false
        }
    }

    /// The app the tests drive: its handler and requests follow the commands on standard input.
    static func runApp(sync: Bool) async throws {
        let reader = CommandReader()
        if sync {
            auth.setJwtErrorHandler { context in Task { await reader.runHandler(context) } }
        } else {
            auth.setAsyncJwtErrorHandler { context in await reader.runHandler(context) }
        }
        Task.detached {
            for await refresh in auth.tokenRefreshes {
                let token = try? await auth.daemon.getToken(group: auth.group)
                say("refreshed \(refresh.generation) \(token?.claims?.customerIds["registered"] ?? "-")")
            }
        }
        Task.detached {
            while let line = readLine() {
                if line.hasPrefix("accept ") {
                    accepted.withLock { $0 = String(line.dropFirst(7)) }
                } else if line == "request" {
                    Task { await request() }
                } else {
                    await handlerLines.push(line)
                }
            }
            exit(0)
        }
        // The app lives until its input ends (exit above) or it is killed; its main task has nothing more to do.
        while true { try await Task.sleep(for: .seconds(3600)) }
    }

    /// `count` timed calls; prints their p50 and the process's CPU time and context switches per call.
    static func bench(socket: String, method: String, group: String, count: Int) async -> Bool {
        var samples: [UInt64] = []
        samples.reserveCapacity(count)
        var before = rusage()
        var after = rusage()
        do {
            if method == "Header" {
                let auth = ExponeaAuthClient(
                    group: group, integration: .stream(StreamSettings(streamId: "bench")), socketPath: socket)
                defer { auth.close() }
                _ = try await auth.authenticator.getAuthHeader()
                getrusage(RUSAGE_SELF.rawValue, &before)
                for _ in 0..<count {
                    let start = ContinuousClock.now
                    _ = try await auth.authenticator.getAuthHeader()
                    samples.append(nanoseconds(ContinuousClock.now - start))
                }
                getrusage(RUSAGE_SELF.rawValue, &after)
            } else {
                let daemon = AuthDaemonClient(socketPath: socket)
                _ = try await daemon.getToken(group: group)
                getrusage(RUSAGE_SELF.rawValue, &before)
                for _ in 0..<count {
                    let start = ContinuousClock.now
                    _ = try await daemon.getToken(group: group)
                    samples.append(nanoseconds(ContinuousClock.now - start))
                }
                getrusage(RUSAGE_SELF.rawValue, &after)
            }
        } catch {
            say("error \(error)")
            return false
        }
        samples.sort()
        func micros(_ time: timeval) -> Double { Double(time.tv_sec) * 1e6 + Double(time.tv_usec) }
        let cpu =
            (micros(after.ru_utime) - micros(before.ru_utime) + micros(after.ru_stime) - micros(before.ru_stime))
            * 1000
        let switches = after.ru_nvcsw - before.ru_nvcsw + after.ru_nivcsw - before.ru_nivcsw
        let perCall = (Double(switches) / Double(count) * 1000).rounded() / 1000
        say("\(samples[(count + 1) / 2 - 1]) \(Int(cpu / Double(count))) \(perCall)")
        return true
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(duration.components.seconds) * 1_000_000_000 + UInt64(duration.components.attoseconds / 1_000_000_000)
    }

    static func say(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
    }

    /// One stream request to a backend that accepts only the tokens of the accepted customer.
    static func request() async {
        let transport: HTTPTransport = { request, _ in
            let bearer = request.headerFields[.authorization].map { String($0.dropFirst("Bearer ".count)) }
            let id = bearer.flatMap { try? StreamJWT(parsing: $0) }?.claims.customerIds["registered"]
            let ok = id != nil && id == accepted.withLock { $0 }
            return (HTTPResponse(status: ok ? .ok : .unauthorized), Data("{}".utf8))
        }
        do {
            let (response, _) = try await auth.execute(.trackEvents, body: Data("{}".utf8), transport: transport)
            say("response \(response.status.code)")
        } catch {
            say("response error \(error)")
        }
    }
}

/// Lines waiting for a handler, handed out in order; handlers waiting for a line are served in order.
actor LineQueue {
    private var buffered: [String] = []
    private var waiting: [CheckedContinuation<String, Never>] = []

    func push(_ line: String) {
        if waiting.isEmpty {
            buffered.append(line)
        } else {
            waiting.removeFirst().resume(returning: line)
        }
    }

    func next() async -> String {
        if !buffered.isEmpty { return buffered.removeFirst() }
        return await withCheckedContinuation { waiting.append($0) }
    }
}

/// Runs the JWT error handler on the main actor, taking its commands one line at a time.
@MainActor
final class CommandReader {
    func runHandler(_ context: JwtErrorContext) async {
        TestApp.say("handler \(context.reason.rawValue)")
        while true {
            let line = await TestApp.handlerLines.next()
            if line.hasPrefix("token ") {
                do {
                    try await TestApp.auth.setSdkAuthToken(String(line.dropFirst(6)))
                    TestApp.say("set \(try await TestApp.auth.daemon.getToken(group: TestApp.auth.group).generation)")
                } catch {
                    TestApp.say("error \(error)")
                }
                return
            } else if line == "fail" {
                return
            } else if line == "renew" {
                TestApp.say("renewed \((try? await TestApp.auth.renewRefreshClaim()) ?? false)")
            }
        }
    }
}
