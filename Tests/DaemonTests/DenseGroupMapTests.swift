// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthTestKit
import Testing

@testable import AuthDaemon

/// The dense map the group tables keep: what a dictionary would answer, after adds, replacements and removals
/// that move the last entry into the gap.
@Suite("DenseGroupMap")
struct DenseGroupMapTests {
    @Test func answersAsADictionaryWouldThroughAddsReplacementsAndRemovals() throws {
        var map = DenseGroupMap<Int>()
        var reference: [AppGroup: Int] = [:]
        let groups = try (0..<50).map { try AppGroup("g\($0)") }
        var random = SplitMix64(seed: 7)
        for step in 0..<2_000 {
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
