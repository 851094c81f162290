// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Foundation
import Testing

@Suite("Fuzz targets replay their corpus and regression inputs", .offPool)
struct FuzzReplayTests {
    /// The repository's `Fuzz` folder.
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    @Test(arguments: ["fuzz-varlink", "fuzz-jwt", "fuzz-config", "fuzz-record"])
    func replaysEveryInput(target: String) throws {
        // A target without regression inputs has no folder for them.
        let folders = ["corpus", "regressions"].map { "\(Self.fuzz)/\($0)/\(target)" }
            .filter { FileManager.default.fileExists(atPath: $0) }
        let count = folders.reduce(0) { $0 + Self.fileCount($1) }
        #expect(Self.fileCount("\(Self.fuzz)/corpus/\(target)") > 0, "no seed corpus for \(target)")

        let result = try ChildProcess.run(try BuildProducts.executable(target), folders)

        #expect(result.status == 0, "\(target) failed on an input:\n\(result.standardError.suffix(2000))")
        #expect(result.standardOutput == "\(target): replayed \(count) inputs\n")
    }

    @Test func aDriverWithoutInputsSaysHowToUseIt() throws {
        let result = try ChildProcess.run(try BuildProducts.executable("fuzz-jwt"))
        #expect(result.status == 2)
        #expect(result.standardError == "usage: fuzz-jwt FILE|DIRECTORY...\n")
    }

    private static func fileCount(_ folder: String) -> Int {
        let files = FileManager.default.enumerator(atPath: folder)?.allObjects as? [String] ?? []
        return files.filter { name in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: "\(folder)/\(name)", isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }.count
    }
}
