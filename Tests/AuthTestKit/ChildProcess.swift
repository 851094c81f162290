// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

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
        let stdin = try SpawnPipe()
        let stdout = try SpawnPipe()
        let stderr = try SpawnPipe()
        let process: SpawnedProcess
        do {
            process = try SpawnedProcess(
                executable, arguments, environment: environment, standardInput: .descriptor(stdin.readEnd),
                standardOutput: .descriptor(stdout.writeEnd), standardError: .descriptor(stderr.writeEnd))
        } catch {
            for pipe in [stdin, stdout, stderr] { pipe.close() }
            throw error
        }
        for descriptor in [stdin.readEnd, stdout.writeEnd, stderr.writeEnd] { close(descriptor) }
        // Fed on a thread of its own, as the output is read: a child that prints much before it reads its input
        // must not block both sides.
        let feeder = Thread {
            SpawnPipe.writeAll(Array(input.utf8), to: stdin.writeEnd)
            close(stdin.writeEnd)
        }
        feeder.start()
        // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
        let errorData = Mutex(Data())
        let errorRead = DispatchSemaphore(value: 0)
        PipeReader.start(
            stderr.readEnd, received: { data in errorData.withLock { $0.append(data) } }, ended: { errorRead.signal() })
        let outputData = PipeReader.readToEnd(stdout.readEnd)
        let status = process.wait()
        // Bounded: a grandchild that keeps standard error open must not hang the test.
        guard errorRead.wait(timeout: .now() + 30) == .success else { throw StandardErrorStillOpen() }
        return Result(
            status: status,
            standardOutput: String(decoding: outputData, as: UTF8.self),
            standardError: String(decoding: errorData.withLock { $0 }, as: UTF8.self)
        )
    }

    /// The child exited but its standard error stayed open for 30 s (a process it started holds it).
    public struct StandardErrorStillOpen: Error {}
}
