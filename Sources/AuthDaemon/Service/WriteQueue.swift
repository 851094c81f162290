// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// One group's record writes, one at a time, in the order they were asked for; other groups' writes meanwhile.
///
/// A plain value over the writes that wait (`Waiter`: a continuation in the service, anything in a test).
struct WriteQueue<Waiter> {
    /// For each group with a write under way, the writes waiting behind it, in order.
    private var queues: [AppGroup: [Waiter]] = [:]

    /// Whether a write of `group` is under way.
    func isWriting(_ group: AppGroup) -> Bool { queues[group] != nil }

    /// Takes the group's turn when no write of it is under way: whether the caller may write now. Otherwise the
    /// caller ``wait(_:_:)``s.
    mutating func enter(_ group: AppGroup) -> Bool {
        guard queues[group] == nil else { return false }
        queues[group] = []
        return true
    }

    /// Queues `waiter` behind the group's write under way.
    mutating func wait(_ group: AppGroup, _ waiter: Waiter) {
        queues[group, default: []].append(waiter)
    }

    /// The write under way is done: the next waiter, which now has the turn, or nil when the group is free.
    mutating func leave(_ group: AppGroup) -> Waiter? {
        guard var waiting = queues[group], !waiting.isEmpty else {
            queues[group] = nil
            return nil
        }
        let next = waiting.removeFirst()
        queues[group] = waiting
        return next
    }
}
