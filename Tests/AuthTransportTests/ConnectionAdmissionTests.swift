// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import AuthTransport

@Suite("Connection admission: a share per user, a reserve for root")
struct ConnectionAdmissionTests {
    static let bob: UInt32 = 1001
    static let alice: UInt32 = 1002

    @Test func aUserAtItsShareIsRefusedAndOthersAreNot() {
        var admission = ConnectionAdmission(maximumConnections: 64, maximumPerUser: 8, privileged: [0])
        for _ in 0..<8 { #expect(admission.admit(Self.bob) == nil) }
        #expect(admission.admit(Self.bob) == .userFull(limit: 8))
        #expect(admission.admit(Self.alice) == nil)
        // A connection closed makes room for one more.
        admission.release(Self.bob)
        #expect(admission.admit(Self.bob) == nil)
        #expect(admission.count(of: Self.bob) == 8)
    }

    @Test func ordinaryUsersLeaveAReserveForRootAndTheServersUser() {
        var admission = ConnectionAdmission(maximumConnections: 64, maximumPerUser: 64, privileged: [0, 990])
        #expect(admission.reserve == 4)
        for _ in 0..<60 { #expect(admission.admit(Self.bob) == nil) }
        #expect(admission.admit(Self.alice) == .serverFull(limit: 60))
        for _ in 0..<2 { #expect(admission.admit(0) == nil) }
        for _ in 0..<2 { #expect(admission.admit(990) == nil) }
        #expect(admission.admit(0) == .serverFull(limit: 64))
        // Root is bound by the whole bound only, never by the share.
        var rootOnly = ConnectionAdmission(maximumConnections: 64, maximumPerUser: 2, privileged: [0])
        for _ in 0..<64 { #expect(rootOnly.admit(0) == nil) }
    }

    @Test func releasingCountsBothBounds() {
        var admission = ConnectionAdmission(maximumConnections: 2, maximumPerUser: 2, privileged: [])
        #expect(admission.admit(Self.bob) == nil)
        #expect(admission.admit(Self.alice) == nil)
        #expect(admission.admit(Self.alice) == .serverFull(limit: 2))
        admission.release(Self.bob)
        admission.release(Self.bob)  // once too often: ignored
        #expect(admission.total == 1)
        #expect(admission.admit(Self.alice) == nil)
    }
}
