// SPDX-License-Identifier: Apache-2.0
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// libexponea-auth, the C library, beside the C client that speaks Varlink by hand (`Resources/c-client.c`), in the
/// same run: `Resources/c-lib-client.c` makes the same calls through the library, so the two differ by the
/// library alone.
///
/// - `exponea_auth_get_token` and `exponea_auth_preflight`, p50 per call, beside the C client's GetToken and
///   Preflight (alternating rounds, medians over them); the Python package's `Client.get_token` beside the library's
///   (`python/bench/py-lib-client.py` with Debian's python3), when both are there;
/// - a one-shot process (exec, open, one GetToken, exit): its time from spawn to exit, and its peak RSS after the
///   answer (`VmHWM`, which the client prints: `wait4`'s `ru_maxrss` keeps the peak of the image before exec,
///   here the benchmark's own), beside the C client's one-shot.
///
/// The library is built from `libexponea-auth/` in the source tree (`make`, `-O2`), found from this file's path;
/// without it or without `cc`, the rows are skipped with a message.
struct CLibraryBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        let folder = try settings.scratch.folder("clib")
        guard let cClient = ClientBenchmark.compileCClient(into: folder),
            let libClient = Self.buildLibraryClient(into: folder)
        else { return }
        let daemon = try settings.newDaemon("clib-daemon")
        try daemon.start()
        defer { daemon.stop() }
        _ = try GetTokenTarget.prepare(daemon)
        let group = GetTokenTarget.group
        let socket = daemon.socketPath

        let rounds = settings.pick(full: 7, brief: 2)
        let calls = settings.pick(full: 5_000, brief: 300)
        var commands = [
            [cClient, socket, "GetToken", group, "\(calls)"], [libClient, socket, "GetToken", group, "\(calls)"],
            [cClient, socket, "Preflight", group, "\(calls)"], [libClient, socket, "Preflight", group, "\(calls)"],
        ]
        // The Python package's Client.get_token, through the same library (python/bench/py-lib-client.py).
        let python = Self.pythonClient(library: folder + "/libexponea-auth/libexponea-auth.so.1")
        if let python { commands.append(python + [socket, "GetToken", group, "\(calls)"]) }
        let batches = try ClientBenchmark.alternating(commands, rounds: rounds)
        let (cGet, libGet, cPreflight, libPreflight) = (batches[0], batches[1], batches[2], batches[3])
        var cStarts: [Double] = []
        var libStarts: [Double] = []
        var cPeaks: [Double] = []
        var libPeaks: [Double] = []
        for _ in 0..<settings.pick(full: 41, brief: 5) {
            cStarts.append(try ClientBenchmark.timeToExit([cClient, socket, "GetToken", group, "1"]))
            libStarts.append(try ClientBenchmark.timeToExit([libClient, socket, "GetToken", group, "1"]))
            cPeaks.append(try Self.peakKiB([cClient, socket, "GetToken", group, "0"]))
            libPeaks.append(try Self.peakKiB([libClient, socket, "GetToken", group, "0"]))
        }

        report.add(
            ClientBenchmark.p50Row(
                "C library: exponea_auth_get_token p50 (beside: C client speaking Varlink by hand)", libGet,
                beside: cGet, goal: 1.1))
        report.add(
            ClientBenchmark.p50Row(
                "C library: exponea_auth_preflight p50 (beside: C client's Preflight)", libPreflight, beside: cPreflight
            ))
        if python != nil {
            report.add(
                ClientBenchmark.p50Row(
                    "Python package: Client.get_token p50 (beside: exponea_auth_get_token, the C library)", batches[4],
                    beside: libGet, goal: 1.5))
        }
        let start = ClientBenchmark.median(libStarts)
        let cStart = ClientBenchmark.median(cStarts)
        report.add(
            .init(
                measure: "C library: exec to first answer, one-shot process, spawn to exit (beside: C one-shot client)",
                value: milliseconds(UInt64(start)), baseline: milliseconds(UInt64(cStart)),
                ratio: String(format: "%+.2f ms", (start - cStart) / 1e6), goal: "<= +0.5 ms",
                met: start - cStart <= 500_000))
        let rss = ClientBenchmark.median(libPeaks)
        let cRSS = ClientBenchmark.median(cPeaks)
        report.add(
            .init(
                measure: "C library: peak RSS of the one-shot process (beside: C one-shot client)",
                value: String(format: "%.0f KiB", rss), baseline: String(format: "%.0f KiB", cRSS),
                ratio: String(format: "%+.0f KiB", rss - cRSS), goal: "<= +1024 KiB", met: rss - cRSS <= 1024))
    }

    /// The library's sources: `libexponea-auth/` beside `Sources/`, found from this file's path at build time.
    static let librarySources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("libexponea-auth").path

    /// The command that runs `python/bench/py-lib-client.py` of the source tree with Debian's python3 and `library`;
    /// nil with a message when either is missing.
    static func pythonClient(library: String) -> [String]? {
        let script = URL(fileURLWithPath: librarySources).deletingLastPathComponent()
            .appendingPathComponent("python/bench/py-lib-client.py").path
        guard FileManager.default.fileExists(atPath: script),
            FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
        else {
            progress("  Python row skipped: no \(script) or no /usr/bin/python3")
            return nil
        }
        return ["/usr/bin/python3", script, library]
    }

    /// Builds the library into `folder` and the client against it (with an rpath to it); nil with a message when
    /// either cannot be built.
    static func buildLibraryClient(into folder: String) -> String? {
        let build = folder + "/libexponea-auth"
        guard run(["make", "-s", "-C", librarySources, "BUILD=\(build)", "CFLAGS=-O2"]) else {
            progress("  skipped: 'make -C \(librarySources)' failed: no libexponea-auth sources or no C compiler")
            return nil
        }
        let source = folder + "/c-lib-client.c"
        let binary = folder + "/c-lib-client"
        guard ClientBenchmark.writeClientSources("c-lib-client", PackageResources.c_lib_client_c, into: folder),
            run([
                "cc", "-O2", "-I", librarySources + "/include", "-o", binary, source, "-L", build, "-lexponea-auth",
                "-Wl,-rpath,\(build)",
            ])
        else {
            progress("  skipped: cannot compile c-lib-client against \(build)")
            return nil
        }
        return binary
    }

    private static func run(_ command: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = command
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// The peak RSS, in KiB, that a client run with COUNT 0 prints after its one answer.
    static func peakKiB(_ command: [String]) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard process.terminationStatus == 0, let kib = Double(text), kib > 0 else {
            throw BenchError.unexpectedReply("\(command.joined(separator: " ")): \(text)")
        }
        return kib
    }
}
