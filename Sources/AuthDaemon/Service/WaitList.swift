// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// WaitForToken calls waiting for another token of a group (R18, R22), by id.
struct WaitList<Waiter> {
    private var waiters: [AppGroup: [UInt64: Waiter]] = [:]

    /// How many calls wait on `group`.
    func count(of group: AppGroup) -> Int { waiters[group]?.count ?? 0 }

    mutating func add(_ group: AppGroup, id: UInt64, _ waiter: Waiter) { waiters[group, default: [:]][id] = waiter }

    /// Takes out one waiter (its bound passed, or it was cancelled): nil when it already woke.
    mutating func remove(_ group: AppGroup, id: UInt64) -> Waiter? {
        guard let waiter = waiters[group]?.removeValue(forKey: id) else { return nil }
        if waiters[group]?.isEmpty == true { waiters[group] = nil }
        return waiter
    }

    /// Takes out every waiter of `group` (another token came, or the group was cleared).
    mutating func removeAll(_ group: AppGroup) -> [Waiter] {
        Array(waiters.removeValue(forKey: group)?.values ?? [:].values)
    }
}
