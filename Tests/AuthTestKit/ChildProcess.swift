// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Runs an executable to completion with the given standard input, capturing its output.
public struct ChildProcess {
    /// What a finished process left behind.
    public struct Result: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
    }

    /// Runs `executable` with `arguments`, feeding `input` on standard input.
    ///
    /// - Parameter environment: Replaces the environment when given; the parent's is inherited otherwise.
    public static func run(
        _ executable: String,
        _ arguments: [String] = [],
        input: String = "",
        environment: [String: String]? = nil
    ) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let stdin = Pipe()
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stderr
        try process.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
        nonisolated(unsafe) var errorData = Data()
        let errorRead = DispatchSemaphore(value: 0)
        let errorReader = Thread {
            errorData = stderr.fileHandleForReading.readDataToEndOfFile()
            errorRead.signal()
        }
        errorReader.start()
        let outputData = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // Bounded: a grandchild that keeps standard error open must not hang the test.
        guard errorRead.wait(timeout: .now() + 30) == .success else { throw StandardErrorStillOpen() }
        return Result(
            status: process.terminationStatus,
            standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData, as: UTF8.self)
        )
    }

    /// The child exited but its standard error stayed open for 30 s (a process it started holds it).
    public struct StandardErrorStillOpen: Error {}
}
