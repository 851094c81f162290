// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#endif

/// `SystemCalls.readAll` reads to the end whatever size the file was thought to have (its first read is sized by
/// `expected`, a file may have grown since), and gives nil past the limit, exactly as one byte over it.
@Suite("SystemCalls.readAll: to the end, bounded", .offPool)
struct ReadAllTests {
    /// The bytes written to a pipe, read back with `readAll` (a pipe has no size: it can hold more or less than
    /// `expected`, as a file that changed would).
    func readBack(_ count: Int, limit: Int, expected: Int) throws -> [UInt8]? {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try SystemCalls.writeAll(ends[1], bytes)
        close(ends[1])
        let read = try SystemCalls.readAll(ends[0], limit: limit, expected: expected)
        if let read { #expect(read == bytes) }
        return read
    }

    @Test(arguments: [0, 1, 100, 4095, 4096, 4097, 9_999, 10_000])
    func aFileWithinTheLimitIsReadWholeWhateverItWasThoughtToHold(count: Int) throws {
        for expected in [0, count, count / 2, count + 1, 50_000] {
            #expect(try readBack(count, limit: 10_000, expected: expected)?.count == count, "expected \(expected)")
        }
    }

    @Test(arguments: [10_001, 10_002, 20_000])
    func aFileOverTheLimitIsNil(count: Int) throws {
        for expected in [0, 10_000, count] {
            #expect(try readBack(count, limit: 10_000, expected: expected) == nil, "expected \(expected)")
        }
    }
}
