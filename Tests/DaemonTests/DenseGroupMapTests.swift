// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Testing

@testable import AuthDaemon

/// The dense map the group tables keep: what a dictionary would answer, after adds, replacements and removals
/// that move the last entry into the gap.
@Suite("DenseGroupMap")
struct DenseGroupMapTests {
    /// 50 groups, and 3,000, whose index grows through several sizes and whose removals shift long probe runs.
    @Test(arguments: [(50, 2_000), (3_000, 30_000)])
    func answersAsADictionaryWouldThroughAddsReplacementsAndRemovals(groupCount: Int, steps: Int) throws {
        var map = DenseGroupMap<Int>()
        var reference: [AppGroup: Int] = [:]
        let groups = try (0..<groupCount).map { try AppGroup("g\($0)") }
        var random = SplitMix64(seed: 7)
        for step in 0..<steps {
            let group = groups[Int(random.next() % UInt64(groups.count))]
            switch random.next() % 3 {
            case 0:
                #expect(map.updateValue(step, forKey: group) == reference.updateValue(step, forKey: group))
            case 1:
                #expect(map.removeValue(forKey: group) == reference.removeValue(forKey: group))
            default:
                map[group] = step
                reference[group] = step
            }
            #expect(map.count == reference.count)
        }
        for group in groups { #expect(map[group] == reference[group]) }
        // Emptied one by one, then filled again: every search still ends.
        for group in groups { #expect(map.removeValue(forKey: group) == reference.removeValue(forKey: group)) }
        #expect(map.count == 0)
        for (value, group) in groups.enumerated() { map[group] = value }
        for (value, group) in groups.enumerated() { #expect(map[group] == value) }
        reference = Dictionary(uniqueKeysWithValues: groups.enumerated().map { ($1, $0) })
        #expect(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }) == reference)
        #expect(Set(map.keys) == Set(reference.keys))
    }

    @Test func removingTheLastAndTheOnlyEntryLeavesNothing() throws {
        var map = DenseGroupMap<String>()
        let shop = try AppGroup("shop")
        map[shop] = "a"
        #expect(map.removeValue(forKey: shop) == "a")
        #expect(map.count == 0 && map[shop] == nil)
        #expect(map.removeValue(forKey: shop) == nil)
    }
}
