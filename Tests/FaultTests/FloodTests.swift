// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

/// One unprivileged user floods the daemon in system mode: with one-way calls, with pipelined calls whose
/// replies it never reads, with calls queued behind a subscription, and with every connection its share
/// allows. The daemon's memory stays within 16 MiB of what it held before, its log within a few lines, and
/// another user is served throughout.
@Suite(
    "Fault: one user floods the daemon", .serialized, .enabled(if: getuid() == 0, "needs root for other users"),
    .offPool)
struct FloodTests {
    static let bob: UInt32 = 4242
    static let alice: UInt32 = 4343
    /// The growth allowed under any flood of one user.
    static let marginKiB = 16 * 1024

    /// A daemon in system mode where alice may use "shop" and bob "bobs", each with a token.
    final class Session {
        let config: TemporaryDirectory
        let daemon: DaemonUnderTest
        let pid: Int32
        let token = TestJWT().token(expiringIn: 3600)
        let before: MemoryFigures

        init(arguments: [String] = []) throws {
            config = try TemporaryDirectory(prefix: "authd-etc")
            try """
            [AppGroup]
            Name=shop
            Users=\(FloodTests.alice)

            [AppGroup]
            Name=bobs
            Users=\(FloodTests.bob)
            """.write(toFile: config.appending("authd.conf"), atomically: true, encoding: .utf8)
            raiseOpenFileLimit()
            daemon = try DaemonUnderTest(arguments: arguments, configDirectory: config.path)
            pid = try #require(daemon.pid)
            let root = try FaultClient(path: daemon.socketPath)
            defer { root.close() }
            try root.call("SetToken", ["group": "shop", "token": token])
            try root.call("SetToken", ["group": "bobs", "token": token])
            // Warm up what the daemon makes once: its threads, the first task, the replies' caches.
            for _ in 0..<200 { try root.call("GetToken", ["group": "bobs"]) }
            // Reset the peak (VmHWM) to the resident size now: the peak read later is the flood's.
            try "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
            before = try MemoryFigures(pid: pid)
        }

        deinit {
            daemon.stop()
            config.remove()
        }

        /// The daemon's memory now, checked against what it held before: its peak (VmHWM) must stay within the
        /// margin of its resident size before the flood.
        func expectBounded(_ what: String) throws -> MemoryFigures {
            let now = try MemoryFigures(pid: pid)
            let grown = now.peakKiB - before.residentKiB
            print("Flood, \(what): daemon RSS \(before.residentKiB) KiB idle, \(now) under the flood (+\(grown) KiB)")
            #expect(kill(pid, 0) == 0, "the daemon died")
            #expect(grown < FloodTests.marginKiB, "\(what): the daemon grew by \(grown) KiB")
            return now
        }

        /// The lines of the daemon's output that contain `text`.
        func lines(containing text: String) -> Int {
            daemon.output.split(separator: "\n").filter { $0.contains(text) }.count
        }
    }

    @Test func oneWayCallsOfAUserAllowedNothingAreBoundedAndLoggedInAFewLines() throws {
        let session = try Session()
        // 16 MB of one-way Preflights on a group bob may not use: each is refused, and none is answered.
        let flood = try Flooder(
            uid: Self.bob, socket: session.daemon.socketPath,
            plan: .init(
                message: #"{"method":"com.exponea.Auth.Preflight","oneway":true,"parameters":{"group":"shop"}}"#,
                quota: 16 << 20,
                final: #"{"method":"com.exponea.Auth.Preflight","parameters":{"group":"shop"}}"#
            ))
        defer { flood.stop() }
        let figures = try flood.figures()
        #expect(figures.held == 1 && figures.finalReplies == 1, "\(figures)")
        #expect(figures.sent == 16 << 20)
        _ = try session.expectBounded("16 MB of one-way Preflights")
        let denied = session.lines(containing: "Permission denied")
        print("Flood, one-way Preflights: \(denied) 'Permission denied' lines for \((16 << 20) / 84) calls")
        #expect(denied >= 1 && denied <= 20, "\(denied) lines")
    }

    @Test func pipelinedCallsWhoseRepliesAreNeverReadAreBounded() throws {
        let session = try Session()
        // Every connection bob's share allows, each writing GetTokens as fast as the daemon takes them and
        // reading nothing.
        let flood = try Flooder(
            uid: Self.bob, socket: session.daemon.socketPath,
            plan: .init(
                connections: 256,
                message: #"{"method":"com.exponea.Auth.GetToken","parameters":{"group":"bobs"}}"#,
                quota: 1 << 20
            ))
        defer { flood.stop() }
        let figures = try flood.figures()
        #expect(figures.held == 256, "\(figures)")
        #expect(figures.stalled, "the daemon took 1 MB of calls on every connection without their replies being read")
        _ = try session.expectBounded("pipelined GetTokens on 256 connections, replies unread")
        let other = try FaultClient(path: session.daemon.socketPath)
        defer { other.close() }
        #expect(try other.call("GetToken", ["group": "shop"])["token"] as? String == session.token)
    }

    @Test func callsQueuedBehindASubscriptionAreBoundedAndTheSubscriptionStays() throws {
        let session = try Session()
        // The subscription runs until the connection ends: every call after it waits its turn.
        let flood = try Flooder(
            uid: Self.bob, socket: session.daemon.socketPath,
            plan: .init(
                connections: 256,
                prelude: #"{"method":"com.exponea.Auth.Subscribe","more":true,"parameters":{"group":"bobs"}}"#,
                message: #"{"method":"com.exponea.Auth.Preflight","parameters":{"group":"bobs"}}"#,
                quota: 1 << 20
            ))
        defer { flood.stop() }
        let figures = try flood.figures()
        #expect(figures.held == 256 && figures.closed == 0, "\(figures)")
        #expect(figures.stalled, "the daemon read 1 MB of calls queued behind each subscription")
        _ = try session.expectBounded("Subscribe, then 1 MB of Preflights on each of 256 connections")
        // The subscriptions are still there: a busy connection is not closed.
        let root = try FaultClient(path: session.daemon.socketPath)
        defer { root.close() }
        let groups = try root.call("ListGroups")["groups"] as? [[String: Any]] ?? []
        #expect(groups.first { $0["name"] as? String == "bobs" }?["subscribers"] as? Int == 256)
    }

    @Test func aUserAtItsShareAndFloodingLeavesOthersServed() throws {
        // The whole bound is 600: without a share per user, bob could hold every connection.
        let session = try Session(arguments: ["--max-connections", "600", "--max-connections-per-user", "256"])
        let flood = try Flooder(
            uid: Self.bob, socket: session.daemon.socketPath,
            plan: .init(
                connections: 700,
                message: #"{"method":"com.exponea.Auth.Preflight","oneway":true,"parameters":{"group":"shop"}}"#
            ))
        defer { flood.stop() }
        let figures = try flood.figures()
        #expect(figures.held == 256 && figures.refused == 444, "\(figures)")

        // alice is served, not refused, while bob holds his share and floods.
        let latencies = try Self.getTokens(
            as: Self.alice, group: "shop", count: 2000, socket: session.daemon.socketPath)
        #expect(latencies.tokens == 2000, "alice got \(latencies.tokens) of 2000 tokens: \(latencies.errors)")
        print(
            """
            Flood, bob at his share of 256 connections flooding one-way Preflights: alice's GetToken \
            p50 \(latencies.p50Microseconds) µs, p99 \(latencies.p99Microseconds) µs
            """)
        // 444 refusals and a flood of denied calls: a few lines, each with its count.
        let refusals = session.lines(containing: "Refusing a connection")
        #expect(refusals >= 1 && refusals <= 5, "\(refusals) refusal lines for 444 refused connections")
        #expect(session.daemon.output.contains("uid \(Self.bob) has 256 open"))
        _ = try session.expectBounded("bob at his share of 256 connections, flooding")
    }

    @Test func atTheOpenFileLimitTheDaemonWaitsInsteadOfSpinningAndServesOnceDescriptorsFree() throws {
        let daemon = try DaemonUnderTest()
        defer { daemon.stop() }
        let pid = try #require(daemon.pid)
        let limit = ProcessFigures.descriptors(of: pid) + 40
        let status = try ChildProcess.run("/usr/bin/prlimit", ["--pid", "\(pid)", "--nofile=\(limit):\(limit)"])
        try #require(status.status == 0, "\(status.standardError)")

        // Fill every descriptor the daemon may open, then some: those wait in the listening socket's queue.
        var clients: [FaultClient] = []
        defer { for client in clients { client.close() } }
        for _ in 0..<60 { clients.append(try FaultClient(path: daemon.socketPath, receiveTimeout: .seconds(30))) }
        #expect(
            daemon.waitForOutput(timeout: .seconds(20)) { $0.contains("Cannot accept connections") },
            "\(daemon.output.suffix(2000))")

        // The daemon is not spinning: it used under a tenth of a CPU over a second (32 % before the back-off).
        let cpuBefore = try Self.cpuTicks(of: pid)
        let window = ContinuousClock.now
        usleep(1_000_000)  // a measuring window, not an ordering
        let elapsed = ContinuousClock.now - window
        let used = Double(try Self.cpuTicks(of: pid) - cpuBefore) / Double(sysconf(Int32(_SC_CLK_TCK)))
        let share = used / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        print("Flood, at the open file limit: the daemon used \(Int(share * 100)) % of a CPU")
        #expect(share < 0.1, "the daemon spins at the open file limit: \(Int(share * 100)) % of a CPU")
        let lines = daemon.output.split(separator: "\n").filter { $0.contains("Cannot accept connections") }.count
        #expect(lines <= 2, "\(lines) lines about accept(2)")

        // Once descriptors are free, the clients that waited are served.
        for client in clients.prefix(30) { client.close() }
        let waiting = clients.last!
        let reply = try waiting.call("org.varlink.service.GetInfo")
        #expect(reply["product"] as? String == "exponea-authd")
    }

    /// utime + stime of `pid`, in clock ticks.
    static func cpuTicks(of pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // After the command name in parentheses: state is field 3, utime 14, stime 15.
        let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    struct Latencies: Decodable {
        var tokens: Int
        var errors: [String]
        var p50Microseconds: Int
        var p99Microseconds: Int
    }

    /// Calls GetToken `count` times in a row as `uid`, on one connection, and returns the round trips' p50 and p99.
    static func getTokens(as uid: UInt32, group: String, count: Int, socket: String) throws -> Latencies {
        let script = """
            import json, socket, sys, time
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.settimeout(20)
            connection.connect(sys.argv[1])
            call = json.dumps({"method": "com.exponea.Auth.GetToken", "parameters": {"group": sys.argv[2]}}).encode() + b"\\0"
            samples, tokens, errors, data = [], 0, [], b""
            for _ in range(int(sys.argv[3])):
                started = time.perf_counter_ns()
                try:
                    connection.sendall(call)
                    while b"\\0" not in data:
                        chunk = connection.recv(65536)
                        if not chunk:
                            raise OSError("closed by the daemon")
                        data += chunk
                except OSError as error:
                    errors.append(str(error))
                    break
                samples.append(time.perf_counter_ns() - started)
                reply, data = data.split(b"\\0", 1)
                if b'"token"' in reply:
                    tokens += 1
                elif len(errors) < 5:
                    errors.append(reply.decode())
            samples.sort()
            pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] // 1000 if samples else -1
            print(json.dumps({"tokens": tokens, "errors": errors, "p50Microseconds": pick(0.5), "p99Microseconds": pick(0.99)}))
            """
        let result = try ChildProcess.run(
            "/usr/bin/setpriv",
            [
                "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", script, socket, group,
                "\(count)",
            ],
            input: "",
            environment: ["PATH": "/usr/bin:/bin", "HOME": "/"]
        )
        guard result.status == 0 else { throw Flooder.FlooderFailure(output: result.standardError) }
        return try JSONDecoder().decode(Latencies.self, from: Data(result.standardOutput.utf8))
    }
}

/// A process's resident memory now and at its peak, from `/proc/PID/status`.
struct MemoryFigures: CustomStringConvertible {
    /// `VmRSS`, in KiB.
    var residentKiB: Int
    /// `VmHWM`: the most it was ever resident, in KiB.
    var peakKiB: Int

    init(pid: Int32) throws {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        residentKiB = field("VmRSS")
        peakKiB = field("VmHWM")
    }

    var description: String { "RSS \(residentKiB) KiB, peak \(peakKiB) KiB" }
}
