// SPDX-License-Identifier: Apache-2.0
import AuthCore
import AuthProtocol
import AuthStore
import Logging
import Synchronization
import Systemd

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// ``AuthService``: refresh claims and their leases (R28).
extension AuthService {
    /// Grants the group's refresh of `generation` to the first caller (R28). The claim ends when a token is
    /// set, when the holder releases it or its connection closes, or after ``refreshLease`` seconds; the last
    /// two send the group's pending jwtError again, so that another app takes over. A generation older than
    /// the current one has already been refreshed and is not granted.
    ///
    /// - Parameters:
    ///   - holder: The connection that asks (see ``connectionClosed(_:)``); nil for a caller without one.
    ///   - renew: The holder extends its claim by another lease, for a fetch that takes long. A claim held by
    ///     someone else is still refused; a free one is granted.
    ///   - lease: The group's own lease (authd.conf), instead of ``refreshLease``.
    public func claimRefresh(
        _ group: AppGroup, generation: UInt64, holder: UInt64? = nil, renew: Bool = false, lease: TimeInterval? = nil
    ) -> Bool {
        let outcome = table.claimRefresh(
            group, generation: generation, holder: holder, renew: renew, lease: lease ?? refreshLease,
            now: clock.now)
        switch outcome {
        case .refused: return false
        case .renewed: return true
        case .granted(let id, let lease):
            metrics.claim(group, .granted)
            armLease(of: group, claim: id, after: lease)
            return true
        }
    }

    /// The holder gives up its claim on the refresh of `generation` (its fetch failed): the next ClaimRefresh
    /// is granted at once. The pending jwtError is not sent again, so that a failing backend is not asked in a
    /// loop; the next request's jwtError finds the claim free.
    ///
    /// - Returns: Whether `holder` held the claim.
    public func releaseRefresh(_ group: AppGroup, generation: UInt64, holder: UInt64?) -> Bool {
        guard table.releaseRefresh(group, generation: generation, holder: holder) else { return false }
        leaseEnded(group)
        metrics.claim(group, .released)
        logClaimEnded(group, generation: generation, why: "released by its holder")
        return true
    }

    /// The connection `holder` closed: every claim it holds ends at once, and each group's pending jwtError
    /// goes out again, so that another app refreshes (the claimant exited or crashed inside its fetch).
    public func connectionClosed(_ holder: UInt64) {
        for (group, event) in table.connectionClosed(holder, now: clock.now) {
            leaseEnded(group)
            metrics.claim(group, .holderGone)
            logClaimEnded(group, generation: table[group]?.generation ?? 0, why: "its holder's connection closed")
            sendJwtError(event, to: group)
        }
    }

    /// Arms the timer of a claim's lease: when it runs out, unless renewed, the claim ends.
    func armLease(of group: AppGroup, claim id: UInt64, after seconds: TimeInterval) {
        let wait = Duration.milliseconds(Int64((max(seconds, 0) * 1000).rounded(.up)))
        let timer = clock.schedule(after: wait) { [weak self] in await self?.leaseTimerFired(group, claim: id) }
        leaseTimers.updateValue((id, timer), forKey: group)?.timer.cancel()
    }

    /// The group's claim ended before its lease: its timer goes.
    func leaseEnded(_ group: AppGroup) {
        leaseTimers.removeValue(forKey: group)?.timer.cancel()
    }

    func leaseTimerFired(_ group: AppGroup, claim id: UInt64) {
        if leaseTimers[group]?.claim == id { leaseTimers[group] = nil }
        switch table.leaseTimerFired(group, claim: id, now: clock.now) {
        case .gone:
            break
        case .renewed(let left):
            armLease(of: group, claim: id, after: left)
        case .ended(let event):
            metrics.claim(group, .lapsed)
            logger.warning(
                "Refresh abandoned: the claim's lease ran out before its holder set a token",
                metadata: OperatorEvent.refreshAbandoned.metadata(
                    group: group.name, generation: table[group]?.generation
                ) { .string($0) })
            sendJwtError(event, to: group)
        }
    }

    func logClaimEnded(_ group: AppGroup, generation: UInt64, why: String) {
        logger.notice(
            "Refresh claim ended: \(why)", metadata: ["authd.group": "\(group)", "authd.generation": "\(generation)"])
    }
}
