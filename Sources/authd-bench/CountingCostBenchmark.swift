// SPDX-License-Identifier: Apache-2.0
import Foundation

/// What counting the calls for the metrics costs a GetToken, in instructions, by valgrind's callgrind: the
/// counter's function (`CallCounters.count`, inclusive) beside the daemon's whole work for one GetToken, both
/// from the same run of the release binary. Instructions, not time: the count does not change with the machine's
/// noise. Skipped (with a line saying so) where valgrind or objcopy is missing.
struct CountingCostBenchmark {
    let settings: BenchSettings
    init(_ settings: BenchSettings) { self.settings = settings }

    func run(_ report: Report) throws {
        guard let valgrind = Self.find("valgrind"), let objcopy = Self.find("objcopy"),
            let annotate = Self.find("callgrind_annotate")
        else {
            progress("  skipped: needs valgrind (apt-get install valgrind) and objcopy")
            return
        }
        let calls = settings.pick(full: 5_000, brief: 200)
        let folder = try settings.scratch.folder("counting")
        // valgrind 3.19 cannot read the debug information lld writes; the symbol table is enough.
        let binary = folder + "/exponea-authd"
        try Self.run(objcopy, ["--strip-debug", settings.daemon, binary])
        let socket = folder + "/io.socket"
        let output = folder + "/callgrind.out"
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: valgrind)
        // A dump as each connection is taken on: the third file holds the second connection's calls, GetTokens
        // only (the first sets the token; the third connection makes the dump).
        daemon.arguments = [
            "--tool=callgrind", "--dump-instr=no", "--callgrind-out-file=\(output)",
            "--dump-before=*ServerConnectionC5start*", binary, "--user", "--log-target", "console",
            "--state-directory", folder + "/state", "--socket", socket,
        ]
        daemon.environment = ["HOME": folder, "PATH": "/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/none"]
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        defer {
            kill(daemon.processIdentifier, SIGKILL)
            daemon.waitUntilExit()
        }
        let setter = try Self.connect(socket)
        let token = BenchToken.make(exp: Int(Date().timeIntervalSince1970) + 3600, customer: 1)
        try setter.call(Requests.setToken("bench", token))
        let getter = try UnixStream(connectingTo: socket)
        for _ in 0..<calls { try getter.call(Requests.getToken("bench")) }
        let last = try UnixStream(connectingTo: socket)
        try last.call(Array(#"{"method":"org.varlink.service.GetInfo"}"#.utf8) + [0])
        let part = output + ".3"
        guard FileManager.default.fileExists(atPath: part) else {
            throw BenchError.daemon("callgrind wrote no \(part)")
        }
        // Every function (threshold 100 %): by default the list stops at 99 % of the total, and a count that
        // costs less than the last 1 % would read as nothing.
        let annotated = try Self.run(annotate, ["--inclusive=yes", "--threshold=100", part])
        let total = Self.instructions(annotated, containing: "PROGRAM TOTALS")
        let counting = Self.instructions(annotated, containing: "CallCounters")
        let perCall = Double(total) / Double(calls)
        let countingPerCall = Double(counting) / Double(calls)
        let share = countingPerCall / perCall
        report.add(
            .init(
                measure: "Counting's cost per GetToken, callgrind instructions (CallCounters, inclusive; beside: "
                    + "the daemon's whole GetToken)",
                value: String(format: "%.0f", countingPerCall), baseline: String(format: "%.0f", perCall),
                ratio: String(format: "%.2f%%", share * 100), goal: "<= 2%", met: share <= 0.02))
    }

    /// The first number of the first line of callgrind_annotate's output that contains `text`.
    private static func instructions(_ annotated: String, containing text: String) -> Int {
        let line = annotated.split(separator: "\n").first { $0.contains(text) } ?? ""
        let number = line.trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? ""
        return Int(number.replacingOccurrences(of: ",", with: "")) ?? 0
    }

    /// Connects, waiting while valgrind starts the daemon (it takes seconds).
    private static func connect(_ socket: String) throws -> UnixStream {
        let deadline = Date().addingTimeInterval(60)
        while true {
            if let stream = try? UnixStream(connectingTo: socket) { return stream }
            guard Date() < deadline else { throw BenchError.daemon("the daemon under valgrind did not listen") }
            usleep(100_000)
        }
    }

    private static func find(_ tool: String) -> String? {
        ["/usr/bin/", "/bin/", "/usr/local/bin/"].map { $0 + tool }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }

    @discardableResult
    private static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw BenchError.daemon("\(tool) \(arguments.joined(separator: " ")) failed")
        }
        return String(decoding: data, as: UTF8.self)
    }
}
