// SPDX-License-Identifier: Apache-2.0
import AuthTestKit
import Testing

/// The trait that keeps blocking tests off the concurrency pool does so: their bodies, synchronous or not, run
/// on threads of their own.
@Suite("Tests that block run off the concurrency pool", .offPool)
struct OffPoolTraitTests {
    @Test func aSynchronousTestRunsOnAThreadOfItsOwn() {
        #expect(currentThreadName() == "test-off-pool")
    }

    @Test func anAsyncTestComesBackToAThreadOfItsOwnAfterEachAwait() async {
        #expect(currentThreadName() == "test-off-pool")
        await Task.yield()
        #expect(currentThreadName() == "test-off-pool")
    }

    @Test(arguments: 0..<3) func eachCaseOfAParameterizedTestToo(_ index: Int) {
        #expect(currentThreadName() == "test-off-pool")
    }
}

/// Without it a test runs on the pool, which is what the trait is for.
@Suite("Tests without the trait run on the pool")
struct OnPoolTests {
    @Test func aSynchronousTestRunsOnThePool() {
        #expect(currentThreadName() != "test-off-pool")
    }
}
