// SPDX-License-Identifier: Apache-2.0
import Foundation

#if FUZZING
    import CLibFuzzer
#endif

/// Stops the run when an invariant does not hold: says which, then aborts, so that libFuzzer keeps the input as a
/// crash and a replay fails.
public func invariant(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
    line: UInt = #line
) {
    guard !condition() else { return }
    FileHandle.standardError.write(Data("invariant violated at \(file):\(line): \(message())\n".utf8))
    abort()
}

/// Whether `text` shows part of `secret`: a run of at least ``revealedLength`` bytes without whitespace, with a
/// letter in it, that `secret` contains too.
///
/// The fixed wording of the project's messages has no such run, so one can only come from the input. Runs of
/// digits and punctuation are left out: messages show numbers (lengths, versions, generations) by design.
public func reveals(_ text: String, _ secret: String) -> Bool {
    let secretBytes = Array(secret.utf8)
    guard secretBytes.count >= revealedLength else { return false }
    for run in text.utf8.split(whereSeparator: { $0 == 0x20 || (0x09...0x0D).contains($0) }) {
        let bytes = Array(run)
        guard bytes.count >= revealedLength else { continue }
        for start in 0...(bytes.count - revealedLength) {
            let window = bytes[start..<start + revealedLength]
            if window.contains(where: isLetter) && contains(secretBytes, window) { return true }
        }
    }
    return false
}

/// An ASCII letter, or a byte of a non-ASCII character.
private func isLetter(_ byte: UInt8) -> Bool {
    byte >= 0x80 || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
        || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
}

/// The shortest run of a secret that ``reveals(_:_:)`` looks for.
public let revealedLength = 12

private func contains(_ haystack: [UInt8], _ needle: ArraySlice<UInt8>) -> Bool {
    guard needle.count <= haystack.count, let first = needle.first else { return needle.isEmpty }
    var index = 0
    while index <= haystack.count - needle.count {
        if haystack[index] == first && haystack[index..<index + needle.count].elementsEqual(needle) { return true }
        index += 1
    }
    return false
}

/// A pseudo-random sequence (SplitMix64) seeded from the input, so that a replay makes the same choices as the
/// fuzzer run that found the input.
public struct InputRandom {
    private var state: UInt64

    /// Seeds from `bytes` (FNV-1a).
    public init(seededBy bytes: some Sequence<UInt8>) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        state = hash
    }

    /// The next number.
    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var value = state
        value = (value ^ (value >> 30)) &* 0xbf58_476d_1ce4_e5b9
        value = (value ^ (value >> 27)) &* 0x94d0_49bb_1331_11eb
        return value ^ (value >> 31)
    }

    /// A number in `range`.
    public mutating func next(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }
}

#if FUZZING
    /// The target's check, for the C callback that cannot capture it.
    nonisolated(unsafe) private var fuzzed: (([UInt8]) -> Void)?

    /// libFuzzer's callback. libFuzzer's own `main`, linked too, needs the name; SwiftPM makes the target's `main`
    /// the program's, and it passes this function to `LLVMFuzzerRunDriver`.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzed?(Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
#endif

/// A fuzz target's `main`: libFuzzer in the fuzz build (`-DFUZZING`, by `scripts/fuzz`), a replay driver in the
/// normal build.
public enum FuzzTarget {
    /// Runs libFuzzer on `check` with the command line's options in the fuzz build. Otherwise replays: runs
    /// `check` on each file named on the command line and on every file under each directory named, then prints
    /// how many inputs it ran; exits 2 without arguments, 1 when a path cannot be read.
    public static func main(_ name: String, _ check: @escaping ([UInt8]) -> Void) -> Never {
        #if FUZZING
            fuzzed = check
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
        #else
            replay(name, check)
        #endif
    }

    private static func replay(_ name: String, _ check: ([UInt8]) -> Void) -> Never {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            FileHandle.standardError.write(Data("usage: \(name) FILE|DIRECTORY...\n".utf8))
            exit(2)
        }
        var count = 0
        for path in paths {
            guard let files = inputs(at: path) else {
                FileHandle.standardError.write(Data("\(name): cannot read \(path)\n".utf8))
                exit(1)
            }
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else {
                    FileHandle.standardError.write(Data("\(name): cannot read \(file)\n".utf8))
                    exit(1)
                }
                FileHandle.standardError.write(Data("\(name): \(file)\n".utf8))
                check(Array(data))
                count += 1
            }
        }
        print("\(name): replayed \(count) inputs")
        exit(0)
    }

    /// The file at `path`, or the regular files under it (sorted), or nil when there is nothing there.
    private static func inputs(at path: String) -> [String]? {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return nil }
        guard isDirectory.boolValue else { return [path] }
        guard let enumerator = FileManager.default.enumerator(atPath: path) else { return nil }
        var files: [String] = []
        for case let relative as String in enumerator {
            let file = path + "/" + relative
            var isSubdirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: file, isDirectory: &isSubdirectory), !isSubdirectory.boolValue {
                files.append(file)
            }
        }
        return files.sorted()
    }
}
