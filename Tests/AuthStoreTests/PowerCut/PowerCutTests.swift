// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Foundation
import Testing

@testable import AuthStore

#if canImport(Glibc)
    import Glibc
#endif

/// A save or a removal that returned survives a power cut: the store on ``CutFS``, which keeps only what was
/// fsynced, is cut while a writer saves four groups from four threads (sharing the directory's fsyncs), clearing
/// each now and then, a thousand times. After each cut no acknowledged generation is lost, no record is torn, no
/// group's generation goes back, and no cleared record comes back.
@Suite("Power cuts during concurrent saves", .offPool)
struct PowerCutTests {
    static let cuts = 1_000
    static let groups = 4
    /// The writer clears a group after saving each generation that is a multiple of this.
    static let clearEvery: UInt64 = 7

    @Test(
        .enabled(
            if: CutFS.isAvailable || ProcessInfo.processInfo.environment["CI"] != nil,
            "needs /dev/fuse, libfuse3-dev and fuse3 (scripts/install-deps); CI runs it always"))
    func acknowledgedSavesSurviveEveryCut() throws {
        let fixture = try StoreFixture()
        defer { fixture.remove() }
        try FileManager.default.createDirectory(
            atPath: fixture.storePath, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let disk = try CutFS(at: fixture.storePath, buildingIn: fixture.temporary.appending("cutfs"))
        defer { disk.unmount() }
        let writer = try BuildProducts.executable("authd-store-writer")
        let groups = try (0..<Self.groups).map { try AppGroup("writer-\($0)") }

        var kept: [String: UInt64] = [:]  // what the last cut left of each group
        var acknowledgedInAll = 0
        for cut in 1...Self.cuts {
            let acknowledged = try saveUntilCut(
                writer, fixture: fixture, disk: disk, acknowledgements: Int.random(in: 1...24))
            acknowledgedInAll += acknowledged.count
            try disk.restore()

            let store = try fixture.open()
            for group in groups {
                let events = acknowledged.filter { $0.group == group.name }
                let saved = events.filter { !$0.removed }.map(\.generation).max() ?? 0
                let removed = events.filter(\.removed).map(\.generation).max()
                guard let record = try store.load(group) else {
                    // Gone only by a clear: one acknowledged after the last acknowledged save, or the one that
                    // follows that save, which may be on the disk without its acknowledgement.
                    let cleared = removed.map { $0 >= saved } ?? false || (saved > 0 && saved % Self.clearEvery == 0)
                    try #require(
                        cleared || (saved == 0 && kept[group.name] == nil),
                        "cut \(cut): \(group) lost (saved \(saved), removed \(removed.map(String.init) ?? "never"))")
                    kept[group.name] = nil
                    continue
                }
                let generation = record.generation
                try #require(generation >= saved, "cut \(cut): \(group) saved \(saved), kept \(generation)")
                try #require(generation > removed ?? 0, "cut \(cut): \(group) cleared at \(removed!), came back")
                try #require(generation >= kept[group.name] ?? 0, "cut \(cut): \(group) went back")
                try expectConsistent(record)
                kept[group.name] = generation
            }
            try #require(store.recordsSetAside == 0, "cut \(cut): a record was torn")
        }
        #expect(acknowledgedInAll >= Self.cuts)
    }

    /// Runs the writer until it has acknowledged `count` saves, cuts the power, kills it, and returns every save it
    /// acknowledged.
    private func saveUntilCut(
        _ writer: String, fixture: StoreFixture, disk: CutFS, acknowledgements count: Int
    ) throws -> [(group: String, generation: UInt64, removed: Bool)] {
        let output = try SpawnPipe()
        let process = try SpawnedProcess(
            writer, [fixture.storePath, "\(Self.groups)", "--threads", "\(Self.clearEvery)"],
            environment: fixture.environment,
            standardOutput: .descriptor(output.writeEnd), standardError: .null)  // its EIO after the cut
        close(output.writeEnd)

        // The read end is closed once, by PipeReader.readToEnd, whatever happens before: a second close could
        // close a descriptor another test running meanwhile has just opened.
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var exited = false
        while !exited && text.count(where: { $0 == UInt8(ascii: "\n") }) < count {
            let got = read(output.readEnd, &buffer, buffer.count)
            if got > 0 { text += buffer[..<got] } else { exited = true }
        }
        var cutFailure: (any Error)?
        if !exited {
            do { try disk.cut() } catch { cutFailure = error }
        }
        kill(process.pid, SIGKILL)
        let status = process.wait()
        text += PipeReader.readToEnd(output.readEnd)
        try #require(!exited, "the writer exited with status \(status) before \(count) saves")
        if let cutFailure { throw cutFailure }

        return String(decoding: text, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[0] == "saved" || fields[0] == "removed", let generation = UInt64(fields[2])
            else { return nil }
            return (String(fields[1]), generation, fields[0] == "removed")
        }
    }

    /// Every field of a writer's record carries the same generation: a record is one save, whole.
    private func expectConsistent(_ record: TokenRecord) throws {
        let generation = record.generation
        try #require(record.customerIds == ["registered": "writer-\(generation)"], "\(record)")
        try #require(
            record.token?.claims.customerIds == ["registered": "writer-\(generation)", "group": record.group.name],
            "\(record)")
    }
}
