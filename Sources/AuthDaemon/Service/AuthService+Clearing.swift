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

/// ``AuthService``: clearing a group: the flush handshake, then the record removed (R8, R9).
extension AuthService {
    /// Why a group's data was cleared.
    public enum ClearCause: String, Sendable {
        case anonymize, stopIntegration, clearLocalCustomerData
    }

    /// Removes token and identity from memory and disk and tells the apps (`cleared`) (R8, R9). For
    /// `anonymize` and `stopIntegration`, first asks the group's apps to flush and waits until each has
    /// acknowledged or ``flushTimeout`` passed; `clearLocalCustomerData` is the wipe and clears at once (R9).
    ///
    /// - Returns: The subscriptions asked to flush and those that did not confirm (timed out, or ended
    ///   first). The group is cleared either way.
    @discardableResult
    public func clear(_ group: AppGroup, cause: ClearCause) async throws(AuthServiceError) -> ClearResult {
        let result = cause == .clearLocalCustomerData ? ClearResult(asked: 0, unconfirmed: []) : await flush(group)
        try await writingAlone(group) { () async throws(AuthServiceError) in
            try await removeRecord(group, cause: cause)
        }
        return result
    }

    /// Asks the group's apps to flush and waits until each has acknowledged or ``flushTimeout`` passed.
    func flush(_ group: AppGroup) async -> ClearResult {
        if flushes.isPending(group) {
            // Another clear is waiting for this group's flush: wait for the same one.
            return await withCheckedContinuation { _ = flushes.join(group, $0) }
        }
        let subscribers = hub.subscribers(of: group)
        guard !subscribers.isEmpty else { return ClearResult(asked: 0, unconfirmed: []) }
        // Each subscription gets a flushId of its own, so two apps in one process are told apart.
        let requests = Dictionary(
            uniqueKeysWithValues: subscribers.map { (UUID().uuidString, (subscription: $0.key, pid: $0.value.pid)) })
        let id = makeID()
        return await withCheckedContinuation { continuation in
            flushes.begin(group, id: id, requests: requests, waiter: continuation)
            let generation = table[group]?.generation ?? 0
            for (flushId, entry) in requests {
                let request = AuthEvent(
                    kind: .flushRequested, group: group.name, generation: generation, flushId: flushId)
                if let ended = hub.send(request, to: group, subscription: entry.subscription) {
                    subscriptionEnded(ended)
                }
            }
            flushTimers[group] = clock.schedule(after: flushTimeout) { [weak self] in
                await self?.flushTimedOut(group, id)
            }
        }
    }

    func flushTimedOut(_ group: AppGroup, _ id: UInt64) {
        finish(flushes.timedOut(group, flush: id), of: group)
    }

    func finish(
        _ flush: FlushCoordinator<CheckedContinuation<ClearResult, Never>>.Finished?, of group: AppGroup
    ) {
        guard let flush else { return }
        flushTimers.removeValue(forKey: group)?.cancel()
        if !flush.result.confirmed {
            logger.warning(
                "Clearing without every app's flush acknowledgement",
                metadata: [
                    "authd.group": "\(group)", "authd.timed_out": "\(flush.timedOut)",
                    "authd.dropped": "\(flush.dropped)",
                ]
            )
        }
        for waiter in flush.waiters { waiter.resume(returning: flush.result) }
    }

    func removeRecord(_ group: AppGroup, cause: ClearCause) async throws(AuthServiceError) {
        let started = ContinuousClock.now
        do {
            try await storeWriters.run(isolation: self) { [store] () throws(TokenStoreError) in
                try store.remove(group)
            }
        } catch {
            metrics.storeWritten(taking: started.duration(to: .now), failed: true)
            throw .storeFailure(error)
        }
        metrics.storeWritten(taking: started.duration(to: .now), failed: false)
        metrics.cleared(group)
        let event = table.commitClear(group, cause: cause.rawValue, now: clock.now)
        getTokenReplies.changed(group)
        leaseEnded(group)
        countsMayHaveChanged()
        expiry.remove(group)
        deliver([])
        // The operator's "Cleared app group", with who asked, is the dispatcher's.
        logger.debug("Cleared app group", metadata: ["authd.group": "\(group)", "authd.cause": "\(cause.rawValue)"])
        send(event, to: group)
        for waiter in waiters.removeAll(group) { waiter.resume() }
    }

    /// The app that was sent `flushId` has flushed.
    public func acknowledgeFlush(_ group: AppGroup, flushId: String) {
        finish(flushes.acknowledge(group, flushId: flushId), of: group)
    }
}
