// SPDX-License-Identifier: Apache-2.0
import CMalloc

#if canImport(Glibc)
    import Glibc
#endif

/// Hands back the pages of code and read-only data that only the start-up touched.
///
/// Start-up runs code that serving never runs again (option parsing, the store's key and records, the Swift
/// runtime's first look-ups through every protocol conformance of the binary), and each page it touches stays
/// mapped, counted in the daemon's resident set, with the 64 KiB around it that the kernel maps on every fault.
/// Once the start-up is over (READY=1 sent, and the bus's first attempt ended) it unmaps the resident pages of its
/// read-only file mappings (`madvise(2)` `MADV_DONTNEED`): they stay in the page cache, and a page a later call
/// needs comes back on a minor fault.
/// Only mappings that are not writable and hold no private copy (`Anonymous: 0` in `/proc/self/smaps`) are
/// touched, so nothing written (relocations, data) is ever dropped. The heap's free memory goes back too
/// (`malloc_trim`).
enum StartupPages {
    /// Unmaps the resident pages of every read-only, unmodified file mapping of the process.
    ///
    /// - Returns: The KiB that were resident in them.
    @discardableResult
    static func release() -> Int {
        malloc_trim(0)
        guard let smaps = read("/proc/self/smaps") else { return 0 }
        // Every range first, then the madvise calls in a row: code that ran after the binary's own pages went
        // (this parsing) would map its pages again.
        var ranges: [(start: UInt, length: Int, resident: Int)] = []
        var candidate: (start: UInt, end: UInt)?
        var resident = 0
        for line in smaps.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: true)
            guard let key = fields.first, fields.count > 1 else { continue }
            if key.last != UInt8(ascii: ":") {
                // "start-end perms offset device inode path": a new mapping.
                candidate = nil
                guard fields.count > 5, fields[5].first == UInt8(ascii: "/"), fields[1].count == 4,
                    fields[1][fields[1].startIndex + 1] != UInt8(ascii: "w")
                else { continue }
                let range = key.split(separator: UInt8(ascii: "-"))
                guard range.count == 2, let start = UInt(hex: range[0]), let end = UInt(hex: range[1]) else { continue }
                candidate = (start, end)
            } else if key.elementsEqual("Rss:".utf8) {
                resident = Int(decimal: fields[1]) ?? 0
            } else if key.elementsEqual("Anonymous:".utf8), let range = candidate {
                candidate = nil
                guard Int(decimal: fields[1]) == 0, resident > 0 else { continue }
                ranges.append((range.start, Int(range.end - range.start), resident))
            }
        }
        var released = 0
        for range in ranges
        where madvise(UnsafeMutableRawPointer(bitPattern: range.start), range.length, MADV_DONTNEED) == 0 {
            released += range.resident
        }
        return released
    }

    /// The whole content of a file of /proc.
    private static func read(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var content: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            content += chunk[..<count]
        }
        return content
    }
}

extension UInt {
    fileprivate init?(hex digits: ArraySlice<UInt8>) {
        guard let text = String(validating: digits, as: UTF8.self) else { return nil }
        self.init(text, radix: 16)
    }
}

extension Int {
    fileprivate init?(decimal digits: ArraySlice<UInt8>) {
        guard let text = String(validating: digits, as: UTF8.self) else { return nil }
        self.init(text)
    }
}
