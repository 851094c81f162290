// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A crash at any instant leaves every record either as it was or as it was last written: never torn.
@Suite(.offPool) struct TokenStoreCrashTests {
    static let rounds = 5
    static let groups = 4

    @Test
    func recordsSurviveSIGKILLWholeOrNotAtAll() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        let writer = try BuildProducts.executable("authd-store-writer")
        let groups = try (0..<Self.groups).map { try AppGroup("writer-\($0)") }
        var previous: UInt64 = 0
        var interruptedWrites = 0

        for round in 1...Self.rounds {
            let progress = fixture.temporary.appending("progress-\(round)")
            let last = try runAndKill(writer, fixture: fixture, progress: progress, after: previous)
            #expect(last > previous, "round \(round): the writer made no progress")

            // A temporary file left behind means the kill landed in the middle of a write.
            interruptedWrites += try fixture.files().filter { $0.hasPrefix(".") && $0.contains(".tmp-") }.count
            // Opening the store removes what the killed writer left half-done; every record decodes.
            let store = try fixture.open()
            for group in groups {
                let record = try #require(try store.load(group), "round \(round): \(group) has no record")
                // The round last reported was saved in full; the next one may have been under way.
                #expect((last...last + 1).contains(record.generation), "round \(round): \(record)")
                expectConsistent(record)
            }
            #expect(try fixture.files() == groups.map { "\($0).token" }, "round \(round)")
            #expect(fixture.warnings.isEmpty, "\(fixture.capture.entries)")
            previous = last
        }
        print(
            "SIGKILL test: \(Self.rounds) rounds, \(previous) generations of \(Self.groups) records "
                + "(\(previous * UInt64(Self.groups)) complete writes), \(interruptedWrites) killed mid-write")
    }

    /// Starts the writer, waits for it to report a round beyond `previous`, lets it run 0.3-0.8 s more, kills it
    /// with SIGKILL, and returns the last round it reported. Synchronous, on the test's own thread: as an async
    /// test its 5 ms polls waited for a concurrency pool that the blocking suites beside it kept busy, and the
    /// test took 55-61 s of its 60 s limit in CI (once over).
    private func runAndKill(
        _ writer: String, fixture: StoreFixture, progress: String, after previous: UInt64
    ) throws -> UInt64 {
        #expect(FileManager.default.createFile(atPath: progress, contents: nil))
        let output = try #require(FileHandle(forWritingAtPath: progress))
        defer { try? output.close() }
        let process = try SpawnedProcess(
            writer, [fixture.storePath, "\(Self.groups)"], environment: fixture.environment,
            standardOutput: .descriptor(output.fileDescriptor))

        let started = ContinuousClock.now
        while try lastReported(progress) <= previous, process.isRunning,
            ContinuousClock.now - started < .seconds(30)
        {
            // The writer reports progress in a file, which has no event to wait on: a short step.
            usleep(5_000)
        }
        try #require(process.isRunning, "the writer exited with status \(process.terminationStatus ?? -1)")
        // The sleep is the test: the crash comes at a moment of chance inside the writes.
        usleep(UInt32(Int.random(in: 300...800)) * 1_000)

        kill(process.pid, SIGKILL)
        #expect(process.wait() == SIGKILL)
        #expect(process.endedBySignal == true)
        return try lastReported(progress)
    }

    /// The highest `wrote N` line in the progress file (a final partial line is ignored).
    private func lastReported(_ progress: String) throws -> UInt64 {
        let text = try String(contentsOfFile: progress, encoding: .utf8)
        return text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            .compactMap { $0.hasPrefix("wrote ") ? UInt64($0.dropFirst(6)) : nil }
            .max() ?? 0
    }

    /// Every field of a writer's record carries the same generation.
    private func expectConsistent(_ record: TokenRecord) {
        let generation = record.generation
        #expect(record.customerIds == ["registered": "writer-\(generation)"], "\(record)")
        #expect(
            record.token?.claims.customerIds == ["registered": "writer-\(generation)", "group": record.group.name],
            "\(record)")
        #expect(record.changedAt == Date(timeIntervalSince1970: Double(generation)), "\(record)")
    }
}
