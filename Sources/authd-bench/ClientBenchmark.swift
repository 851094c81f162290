// SPDX-License-Identifier: Apache-2.0
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The client side, as apps and scripts see the daemon: the `ExponeaAuth` library's calls beside a small
/// blocking Varlink client in C (`Resources/c-client.c`, compiled here with `cc -O2`), in the same run.
///
/// - `AuthDaemonClient.getToken`, p50 per call, and the client's CPU time and context switches per call
///   (`getrusage` of the client process over its calls), beside the C client's GetToken;
/// - `ExponeaAuthClient`'s pre-flight + header (`authenticator.getAuthHeader()`), p50, beside the C client's
///   Preflight;
/// - the first call from process start: spawn to exit of `authd-test-app --first-call` (one GetToken), beside
///   the C client making one call, and beside two Swift programs linked as authd-test-app is, an empty one and
///   one that links FoundationEssentials. Measure the release build (`scripts/build-release --product
///   authd-bench`): the anchors take its linker and link flags from its build folder.
///
/// Both clients run as processes of their own (`authd-test-app --bench`, `c-client`), in alternating rounds;
/// the figures are medians over the rounds. Without `cc` or without `authd-test-app` built next to
/// authd-bench, the rows are skipped with a message.
struct ClientBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    /// One batch's figures, as both clients print them.
    struct Batch {
        var p50: Double
        var cpu: Double
        var switches: Double
    }

    func run(_ report: Report) throws {
        let folder = try settings.scratch.folder("client")
        guard let cClient = Self.compileCClient(into: folder) else { return }
        let app = (settings.daemon as NSString).deletingLastPathComponent + "/authd-test-app"
        guard FileManager.default.isExecutableFile(atPath: app) else {
            progress("  skipped: authd-test-app is not built next to exponea-authd (\(app))")
            return
        }
        let daemon = try settings.newDaemon("client-daemon")
        try daemon.start()
        defer { daemon.stop() }
        _ = try GetTokenTarget.prepare(daemon)
        let group = GetTokenTarget.group
        let socket = daemon.socketPath

        let rounds = settings.pick(full: 7, brief: 2)
        let calls = settings.pick(full: 5_000, brief: 300)
        let batches = try Self.alternating(
            [
                [cClient, socket, "GetToken", group, "\(calls)"],
                [app, "--bench", socket, "GetToken", group, "\(calls)"],
                [cClient, socket, "Preflight", group, "\(calls)"],
                [app, "--bench", socket, "Header", group, "\(calls)"],
            ], rounds: rounds)
        let (cGet, library, cPreflight, header) = (batches[0], batches[1], batches[2], batches[3])
        let starts = settings.pick(full: 41, brief: 5)
        let hello = Self.compileSwiftProgram(Self.emptyProgram, named: "swift-hello", into: folder, linkedAs: app)
        let foundation = Self.compileSwiftProgram(
            Self.foundationProgram, named: "swift-foundation", into: folder, linkedAs: app)
        var cStart: [Double] = []
        var appStart: [Double] = []
        var helloStart: [Double] = []
        var foundationStart: [Double] = []
        for _ in 0..<starts {
            cStart.append(try Self.timeToExit([cClient, socket, "GetToken", group, "1"]))
            appStart.append(try Self.timeToExit([app, "--first-call", socket, group]))
            if let hello { helloStart.append(try Self.timeToExit([hello.path])) }
            if let foundation { foundationStart.append(try Self.timeToExit([foundation.path])) }
        }

        report.add(
            Self.p50Row(
                "Library: AuthDaemonClient.getToken p50 (beside: C blocking client)", library, beside: cGet, goal: 1.3))
        let cpu = Self.median(library.map(\.cpu))
        let cCPU = Self.median(cGet.map(\.cpu))
        report.add(
            .init(
                measure: "Library: client CPU per GetToken (beside: C client)", value: microseconds(UInt64(cpu)),
                baseline: microseconds(UInt64(cCPU)), ratio: ratio(cpu, cCPU), goal: "<= 2x C client",
                met: cpu <= 2 * cCPU))
        let switches = Self.median(library.map(\.switches))
        let cSwitches = Self.median(cGet.map(\.switches))
        report.add(
            .init(
                measure: "Library: context switches per GetToken (beside: C client)",
                value: String(format: "%.2f", switches), baseline: String(format: "%.2f", cSwitches),
                ratio: ratio(switches, cSwitches)))
        report.add(
            Self.p50Row(
                "Library: ExponeaAuthClient pre-flight + header p50 (beside: C client's Preflight)", header,
                beside: cPreflight))
        let first = Self.median(appStart)
        let cFirst = Self.median(cStart)
        report.add(
            .init(
                measure: "Library: first call from process start, authd-test-app (beside: C one-shot client)",
                value: milliseconds(UInt64(first)), baseline: milliseconds(UInt64(cFirst)), ratio: ratio(first, cFirst),
                goal: "<= 2 ms (static build)", met: first <= 2_000_000))
        let anchors = [
            (hello, helloStart, "Swift runtime alone: an empty static async main"),
            (
                foundation, foundationStart,
                "Swift runtime and FoundationEssentials: an empty static async main linking it"
            ),
        ]
        for (program, starts, what) in anchors {
            guard let program else { continue }
            let start = Self.median(starts)
            let linked = program.linkedAsApp ? "linked as authd-test-app" : "plain swiftc -static-stdlib"
            report.add(
                .init(
                    measure: "\(what) (\(linked)), spawn to exit (beside: C one-shot client)",
                    value: milliseconds(UInt64(start)), baseline: milliseconds(UInt64(cFirst)),
                    ratio: ratio(start, cFirst)))
        }
    }

    /// The anchor for what the Swift runtime alone costs a process start.
    static let emptyProgram = "@main enum Hello { static func main() async {} }\n"
    /// The anchor for what the Swift runtime and FoundationEssentials, which the library's API uses (`Date`,
    /// `URL`, `Data`), cost a process start: the program links it and runs none of it.
    static let foundationProgram = """
        import FoundationEssentials
        @main enum Hello {
            static func main() async {
                if CommandLine.argc > 99 { print(Date.now, URL(string: "https://example.com") as Any, Data()) }
            }
        }

        """

    /// Compiles `program` (`swiftc -O -static-stdlib`), linked as `app` is when scripts/build-release built it
    /// (the linker and link flags it recorded in its build folder). Nil (with a message) without `swiftc`.
    static func compileSwiftProgram(_ program: String, named name: String, into folder: String, linkedAs app: String)
        -> (path: String, linkedAsApp: Bool)?
    {
        let source = folder + "/\(name).swift"
        let binary = folder + "/\(name)"
        guard FileManager.default.createFile(atPath: source, contents: Data(program.utf8)) else { return nil }
        let link = releaseLinkArguments(of: app)
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["swiftc", "-O", "-static-stdlib", "-parse-as-library", "-o", binary, source] + link
        compiler.standardError = FileHandle.nullDevice
        compiler.standardOutput = FileHandle.nullDevice
        guard (try? compiler.run()) != nil else {
            progress("  no swiftc: the row of \(name) is skipped")
            return nil
        }
        compiler.waitUntilExit()
        guard compiler.terminationStatus == 0 else {
            progress("  'swiftc -static-stdlib' failed for \(name): its row is skipped")
            return nil
        }
        return (binary, !link.isEmpty)
    }

    /// The linker and link flags scripts/build-release recorded in the build folder of `binary` (its
    /// `toolset.json` and `link-flags`), as swiftc arguments; empty when the binary was built otherwise.
    static func releaseLinkArguments(of binary: String) -> [String] {
        struct Toolset: Decodable {
            struct Linker: Decodable { var path: String }
            var linker: Linker
        }
        // The binary is in SCRATCH/<triple>/release.
        let scratch = URL(fileURLWithPath: binary).resolvingSymlinksInPath().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        guard let flags = try? String(contentsOf: scratch.appendingPathComponent("link-flags"), encoding: .utf8),
            let toolset = try? Data(contentsOf: scratch.appendingPathComponent("toolset.json")),
            let linker = try? JSONDecoder().decode(Toolset.self, from: toolset).linker.path
        else { return [] }
        // A folder to search (the static C++ runtime's) goes to swiftc itself: behind -Xlinker it comes after the
        // toolchain's own folders, and the shared libstdc++ would be linked.
        var arguments = ["-ld-path=\(linker)"]
        var words = flags.split(whereSeparator: \.isWhitespace).map(String.init)[...]
        while let word = words.popFirst() {
            if word == "-Xlinker", let next = words.first, next.hasPrefix("-L") {
                arguments.append(next)
                words.removeFirst()
            } else {
                arguments.append(word)
            }
        }
        return arguments
    }

    /// Compiles the C client into `folder`; nil (with a message) when there is no C compiler.
    static func compileCClient(into folder: String) -> String? {
        compileC("c-client", PackageResources.c_client_c, into: folder)
    }

    /// Compiles one of the benchmark's C anchors (`name`.c, from `source`) into `folder` with `cc -O2` and `flags`
    /// (into `output`, by default `name`); nil (with a message) when there is no C compiler, or the flags' libraries
    /// are missing.
    static func compileC(
        _ name: String, _ source: [UInt8], into folder: String, output: String? = nil, flags: [String] = []
    ) -> String? {
        let file = folder + "/\(name).c"
        let binary = folder + "/\(output ?? name)"
        guard writeClientSources(name, source, into: folder) else {
            progress("  skipped: cannot write \(file)")
            return nil
        }
        let compiler = Process()
        compiler.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        compiler.arguments = ["cc", "-O2", "-o", binary, file] + flags
        compiler.standardError = FileHandle.nullDevice
        do {
            try compiler.run()
            compiler.waitUntilExit()
        } catch {
            progress("  skipped: no C compiler (cc) to build the \(name) anchor: \(error)")
            return nil
        }
        guard compiler.terminationStatus == 0 else {
            let command = (["cc", "-O2", file] + flags).joined(separator: " ")
            progress(
                "  skipped: cannot build the \(output ?? name) anchor ('\(command)' failed; is cc, or libssl-dev, there?)"
            )
            return nil
        }
        return binary
    }

    /// Writes `name`.c into `folder`, with the headers the C clients and the C servers share
    /// (`Resources/bench-client.h`, `Resources/bench-server.h`).
    static func writeClientSources(_ name: String, _ source: [UInt8], into folder: String) -> Bool {
        FileManager.default.createFile(
            atPath: folder + "/bench-client.h", contents: Data(PackageResources.bench_client_h))
            && FileManager.default.createFile(
                atPath: folder + "/bench-server.h", contents: Data(PackageResources.bench_server_h))
            && FileManager.default.createFile(
                atPath: folder + "/bench-set-work.h", contents: Data(PackageResources.bench_set_work_h))
            && FileManager.default.createFile(atPath: folder + "/\(name).c", contents: Data(source))
    }

    /// A row of two clients' p50 per call (medians over the rounds' batches), with the first's goal as a multiple of
    /// the second's when there is one.
    static func p50Row(_ measure: String, _ batches: [Batch], beside anchor: [Batch], goal: Double? = nil) -> Report.Row
    {
        let value = median(batches.map(\.p50))
        let baseline = median(anchor.map(\.p50))
        return Report.Row(
            measure: measure, value: microseconds(UInt64(value)), baseline: microseconds(UInt64(baseline)),
            ratio: ratio(value, baseline), goal: goal.map { String(format: "<= %.1fx C client", $0) } ?? "",
            met: goal.map { value <= $0 * baseline })
    }

    /// Runs each command once to warm up, then all of them in turn `rounds` times; returns each command's batches,
    /// in the order of `commands`.
    static func alternating(_ commands: [[String]], rounds: Int) throws -> [[Batch]] {
        for command in commands { _ = try batch(command) }
        var batches = [[Batch]](repeating: [], count: commands.count)
        for _ in 0..<rounds {
            for (index, command) in commands.enumerated() { batches[index].append(try batch(command)) }
        }
        return batches
    }

    /// Runs a client process that prints "p50_ns cpu_ns_per_call switches_per_call".
    static func batch(_ command: [String]) throws -> Batch {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let fields = String(decoding: data, as: UTF8.self).split(separator: " ").compactMap {
            Double($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard process.terminationStatus == 0, fields.count == 3 else {
            throw BenchError.unexpectedReply(
                "\(command.joined(separator: " ")): \(String(decoding: data, as: UTF8.self))")
        }
        return Batch(p50: fields[0], cpu: fields[1], switches: fields[2])
    }

    /// Nanoseconds from `posix_spawn` to the end of `waitpid` of a process that must exit 0.
    static func timeToExit(_ command: [String]) throws -> Double {
        var arguments = command.map { strdup($0) } + [nil]
        defer { for argument in arguments { free(argument) } }
        var environment: [UnsafeMutablePointer<CChar>?] = [strdup("PATH=/usr/bin:/bin"), nil]
        defer { free(environment[0]) }
        var pid: pid_t = 0
        let start = monotonicNanoseconds()
        let spawned = posix_spawn(&pid, command[0], nil, nil, &arguments, &environment)
        guard spawned == 0 else { throw BenchError.system("posix_spawn \(command[0])", spawned) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let elapsed = monotonicNanoseconds() - start
        guard status == 0 else { throw BenchError.daemon("\(command.joined(separator: " ")) exited with \(status)") }
        return Double(elapsed)
    }

    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[(sorted.count - 1) / 2]
    }
}
