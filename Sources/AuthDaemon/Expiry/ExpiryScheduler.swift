// SPDX-License-Identifier: Apache-2.0
import AuthCore
import HeapModule

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The expiry timers of every app group, as a pure state machine: no I/O and no clock of its own (R13, R14).
///
/// The owner passes `now` in, arms one wall-clock timer (``WallClockTimer``) for ``nextDeadline``, and calls
/// ``fireDue(now:)`` when it fires and ``clockChanged(now:)`` when the wall clock was set. Each group reports
/// `expiredSoon` at `exp - 60 s`, then `expired` at `exp`, once each per token set.
///
/// Deadlines live in a min-heap (swift-collections' `Heap`) with lazy deletion: re-setting or removing a group bumps its generation,
/// and heap entries of an older generation are dropped when they reach the top (or when the heap is compacted),
/// so every operation is O(log n) amortised over ~100,000 groups. ``clockChanged(now:)`` is O(n).
///
/// Clock jumps: a group's reports always follow its state at the `now` given. After a jump forward, what became
/// due is reported, and only the latest state (`expired`, never a stale `expiredSoon` after it). After a jump
/// backward that makes a token valid (or merely `expiredSoon`) again, the group is re-armed and reports those
/// changes again when the clock reaches them: the handler hears what the pre-flight check (R17) would say on
/// the same clock.
public struct ExpiryScheduler: Sendable {
    /// One group's token and timer.
    private struct Entry: Sendable {
        var expiresAt: Date
        /// Matches the heap item of ``pending``; heap items with another generation are stale.
        var generation: UInt64
        /// The state of ``pending``: its date follows from it and ``expiresAt``, so it is not stored (24 bytes an
        /// entry, not 32, for each of 100,000 groups).
        private var pendingState: TokenState?
        /// The latest state reported: ``TokenState/valid`` while nothing has been reported for this token.
        var reported: TokenState

        init(expiresAt: Date, reported: TokenState) {
            self.expiresAt = expiresAt
            self.generation = 0
            self.reported = reported
        }

        /// The next change to report, or nil when the token has expired: `expiredSoon` a margin before
        /// ``expiresAt``, `expired` at it (as ``ExpiryDeadline/next(expiresAt:after:)`` makes them).
        var pending: ExpiryDeadline? {
            get {
                pendingState.map {
                    ExpiryDeadline(
                        state: $0,
                        date: $0 == .expiredSoon
                            ? expiresAt.addingTimeInterval(-TokenState.expirySoonMargin) : expiresAt)
                }
            }
            set { pendingState = newValue?.state }
        }
    }

    /// A pending deadline in the heap, ordered by date, then by the order it was armed in. It names its entry by
    /// slot, not by group: 24 bytes, not 32. An entry a removal moves to another slot is armed again there.
    private struct Armed: Comparable, Sendable {
        var date: Date
        var generation: UInt64
        var slot: Int32

        static func < (lhs: Armed, rhs: Armed) -> Bool {
            (lhs.date, lhs.generation) < (rhs.date, rhs.generation)
        }
    }

    /// Dense, for its memory at 100,000 groups (as ``GroupTable``'s).
    private var entries = DenseGroupMap<Entry>()
    private var heap = Heap<Armed>()
    private var nextGeneration: UInt64 = 0
    /// How many entries have a pending deadline (live heap items).
    private var pendingCount = 0

    /// An empty scheduler.
    public init() {}

    /// How many groups have a token (expired ones included).
    public var count: Int { entries.count }

    /// The earliest pending deadline over all groups: the instant the wall-clock timer must be armed for, or nil
    /// when nothing is pending.
    public var nextDeadline: Date? { heap.min?.date }

    /// How many items the heap holds, stale ones included (for tests of the compaction).
    var heapCount: Int { heap.count }

    /// The next change `group` will report, or nil when it has no token or its token has expired.
    public func pendingDeadline(of group: AppGroup) -> ExpiryDeadline? {
        entries[group]?.pending
    }

    /// Arms (or re-arms) `group` for a token that expires at `expiresAt`, set at `now` (R13); nil removes it.
    ///
    /// Every set starts over, also with the same `exp`. A token already inside the margin reports `expiredSoon`
    /// at once, and one already expired reports `expired` at once (so loading stored tokens on start-up, one
    /// `set` each, reports the overdue ones).
    ///
    /// - Returns: The event due at once, if any.
    public mutating func set(_ group: AppGroup, expiresAt: Date?, now: Date) -> [ExpiryEvent] {
        guard let expiresAt else {
            remove(group)
            return []
        }
        // The entry is made whole here and stored once: each look-up hashes the group's name (the set of every
        // stored token was a fifth of a 100,000-group start-up's own work).
        var entry = Entry(expiresAt: expiresAt, reported: .valid)
        let event = Self.report(&entry, of: group, now: now)
        let (slot, replaced) = entries.insertOrReplace(entry, forKey: group)
        if replaced?.pending != nil { pendingCount -= 1 }
        arm(slot: slot, now: now)
        tidyHeap()
        return event.map { [$0] } ?? []
    }

    /// Makes room for `count` groups at once (the stored tokens at start-up).
    public mutating func reserveCapacity(_ count: Int) {
        entries.reserveCapacity(count)
        heap.reserveCapacity(count)
    }

    /// Forgets `group` and its timer.
    public mutating func remove(_ group: AppGroup) {
        guard let (slot, entry) = entries.remove(group) else { return }
        if entry.pending != nil { pendingCount -= 1 }
        // The last entry moved into the gap: its heap item names the slot it left, so it is armed again here.
        if slot < entries.count, let pending = entries[slot: slot].pending {
            push(slot: slot, date: pending.date)
        }
        tidyHeap()
    }

    /// Reports every group whose deadline is at or before `now`, in deadline order, and arms its next one.
    ///
    /// A group whose `expiredSoon` deadline is processed when `exp` has passed too (after suspend, or a clock
    /// jump forward) reports only `expired`.
    public mutating func fireDue(now: Date) -> [ExpiryEvent] {
        var events: [ExpiryEvent] = []
        while let top = heap.min, top.date <= now {
            _ = heap.popMin()
            let slot = Int(top.slot)
            guard isLive(top) else { continue }
            var entry = entries[slot: slot]
            guard let pending = entry.pending else { continue }
            if pending.state == .expiredSoon && entry.expiresAt <= now {
                // Skip the stale expiredSoon: queue expired, which is due too and comes out in deadline order.
                entry.pending = ExpiryDeadline(state: .expired, date: entry.expiresAt)
                entries[slot: slot] = entry
                push(slot: slot, date: entry.expiresAt)
                continue
            }
            entry.reported = pending.state
            entry.pending = nil
            pendingCount -= 1
            entries[slot: slot] = entry
            events.append(
                ExpiryEvent(
                    group: entries.keys[slot], reason: pending.reason, deadline: pending.date,
                    expiresAt: entry.expiresAt))
            arm(slot: slot, now: now)
        }
        tidyHeap()
        return events
    }

    /// Re-evaluates every group against `now` after the wall clock was set, in either direction.
    ///
    /// A group whose state moved on reports its current state at once (only the latest one); a group whose
    /// token is valid (or `expiredSoon`) again after a jump backward forgets the later reports and is re-armed,
    /// so it reports them again when the clock reaches them. O(n): it rebuilds the heap.
    ///
    /// - Returns: The events due at once, ordered by deadline, then by group.
    public mutating func clockChanged(now: Date) -> [ExpiryEvent] {
        var events: [ExpiryEvent] = []
        var items: [Armed] = []
        items.reserveCapacity(entries.count)
        pendingCount = 0
        for slot in 0..<entries.count {
            let group = entries.keys[slot]
            var entry = entries[slot: slot]
            let current = TokenState(expiresAt: entry.expiresAt, at: now)
            if Self.rank(current) < Self.rank(entry.reported) { entry.reported = current }  // jumped backward
            if let event = Self.report(&entry, of: group, now: now) { events.append(event) }
            entry.pending = ExpiryDeadline.next(expiresAt: entry.expiresAt, after: now)
            entry.generation = takeGeneration()
            entries[slot: slot] = entry
            if let pending = entry.pending {
                pendingCount += 1
                items.append(Armed(date: pending.date, generation: entry.generation, slot: Int32(slot)))
            }
        }
        heap = Heap(items)
        return events.sorted { ($0.deadline, $0.group) < ($1.deadline, $1.group) }
    }

    // MARK: Internals

    /// The report `entry` (of `group`) calls for at `now`, if its state is past what it reported, noted in it.
    private static func report(_ entry: inout Entry, of group: AppGroup, now: Date) -> ExpiryEvent? {
        let current = TokenState(expiresAt: entry.expiresAt, at: now)
        guard rank(current) > rank(entry.reported), let reason = current.errorReason else { return nil }
        entry.reported = current
        let deadline =
            current == .expired ? entry.expiresAt : entry.expiresAt.addingTimeInterval(-TokenState.expirySoonMargin)
        return ExpiryEvent(group: group, reason: reason, deadline: deadline, expiresAt: entry.expiresAt)
    }

    /// Arms the next deadline after `now` of the entry in `slot`, if its token has one, and counts it pending; a
    /// deadline it had before is uncounted.
    private mutating func arm(slot: Int, now: Date) {
        var entry = entries[slot: slot]
        if entry.pending != nil { pendingCount -= 1 }
        entry.pending = ExpiryDeadline.next(expiresAt: entry.expiresAt, after: now)
        entries[slot: slot] = entry
        guard let pending = entry.pending else { return }
        pendingCount += 1
        push(slot: slot, date: pending.date)
    }

    /// Pushes a new heap item for the entry in `slot`, making every older one stale.
    private mutating func push(slot: Int, date: Date) {
        let generation = takeGeneration()
        entries[slot: slot].generation = generation
        heap.insert(Armed(date: date, generation: generation, slot: Int32(slot)))
    }

    private mutating func takeGeneration() -> UInt64 {
        nextGeneration += 1
        return nextGeneration
    }

    /// Whether `item` is its entry's current deadline: a slot left by a removal, or taken since by another entry,
    /// holds no entry of its generation (generations are never reused).
    private func isLive(_ item: Armed) -> Bool {
        let slot = Int(item.slot)
        guard slot < entries.count else { return false }
        let entry = entries[slot: slot]
        return entry.generation == item.generation && entry.pending != nil
    }

    /// Keeps the heap's top live (so ``nextDeadline`` is right) and, when stale items outnumber the live ones,
    /// rebuilds it from the live ones, so memory stays O(groups) however often tokens are re-set.
    private mutating func tidyHeap() {
        if heap.count > 2 * pendingCount + 64 {
            heap = Heap(heap.unordered.filter(isLive))
        }
        while let top = heap.min, !isLive(top) { _ = heap.popMin() }
    }

    /// Orders the states a token passes through: valid, expiredSoon, expired.
    private static func rank(_ state: TokenState) -> Int {
        switch state {
        case .valid, .notProvided: 0
        case .expiredSoon: 1
        case .expired: 2
        }
    }
}
