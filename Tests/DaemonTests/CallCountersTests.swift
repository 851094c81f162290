// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Testing

@testable import AuthDaemon

/// Each method and result has a count of its own: the ordinals that place them in the counters' flat array are
/// one to one.
@Suite("The calls' counters")
struct CallCountersTests {
    @Test func everyMethodAndResultIsCountedApart() {
        let counters = CallCounters()
        let methods: [CallCounters.Method] = AuthInterface.Method.allCases.map { $0 } + [nil]
        var expected: [String: UInt64] = [:]
        var times: UInt64 = 1
        for method in methods {
            for result in CallCounters.Result.allCases {
                for _ in 0..<times { counters.count(method, result) }
                expected["\(String(describing: method)) \(result)"] = times
                times += 1
            }
        }
        let counted = counters.nonZero()
        #expect(counted.count == methods.count * CallCounters.Result.allCases.count)
        for row in counted {
            #expect(expected["\(String(describing: row.method)) \(row.result)"] == row.count)
        }
    }
}
