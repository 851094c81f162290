// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// A map from app group to `Value`, kept small for many groups: the groups and values in dense arrays, and an
/// index of 4-byte slot numbers.
///
/// A `Dictionary` holds each key and value in its buckets, whose count is a power of two at a load of at most three
/// quarters: at 100,000 groups, 262,144 buckets of a 16-byte key and the value. Here the values fill arrays exactly,
/// and the index is 262,144 buckets of 4 bytes: open addressing with linear probing, each bucket empty (0) or a slot
/// plus one, the group itself read from the dense array (`authd-bench --only scale` shows the difference). A
/// removal moves the last entry into the gap, so the order is not kept.
struct DenseGroupMap<Value> {
    /// A power of two in count (or none), at most three quarters full.
    private var index: ContiguousArray<Int32> = []
    /// The groups, in their slots.
    private(set) var keys: ContiguousArray<AppGroup> = []
    private var values: ContiguousArray<Value> = []

    init() {}

    var count: Int { keys.count }

    /// Makes room for `count` groups at once.
    mutating func reserveCapacity(_ count: Int) {
        keys.reserveCapacity(count)
        values.reserveCapacity(count)
        let buckets = Self.bucketCount(for: count)
        if buckets > index.count { rebuildIndex(buckets: buckets) }
    }

    subscript(group: AppGroup) -> Value? {
        get { find(group).slot.map { values[$0] } }
        set {
            if let newValue {
                updateValue(newValue, forKey: group)
            } else {
                removeValue(forKey: group)
            }
        }
    }

    /// Sets the group's value: the one it replaced, if any.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey group: AppGroup) -> Value? {
        insertOrReplace(value, forKey: group).replaced
    }

    /// Sets the group's value: the slot it is in, and the value it replaced, if any.
    mutating func insertOrReplace(_ value: Value, forKey group: AppGroup) -> (slot: Int, replaced: Value?) {
        var found = find(group)
        if let slot = found.slot {
            return (slot, Self.exchange(&values[slot], value))
        }
        if (keys.count + 1) * 4 > index.count * 3 {
            rebuildIndex(buckets: Self.bucketCount(for: keys.count + 1))
            found = find(group)
        }
        index[found.bucket] = Int32(keys.count + 1)
        keys.append(group)
        values.append(value)
        return (keys.count - 1, nil)
    }

    /// The value in `slot`, which must be below ``count``.
    subscript(slot slot: Int) -> Value {
        get { values[slot] }
        set { values[slot] = newValue }
    }

    /// Removes the group: its value, if it had one.
    @discardableResult
    mutating func removeValue(forKey group: AppGroup) -> Value? { remove(group)?.value }

    /// Removes the group: the slot it was in (where the last entry now is, unless it was the last) and its value.
    mutating func remove(_ group: AppGroup) -> (slot: Int, value: Value)? {
        let (bucket, found) = find(group)
        guard let slot = found else { return nil }
        emptyBucket(bucket)
        let last = keys.count - 1
        if slot != last {
            // The last entry moves into the gap: its bucket names its new slot.
            index[find(keys[last]).bucket] = Int32(slot + 1)
            keys.swapAt(slot, last)
            values.swapAt(slot, last)
        }
        keys.removeLast()
        return (slot, values.removeLast())
    }

    /// The bucket that names `group`'s slot, or the empty one where it would go (0 when there is no index).
    private func find(_ group: AppGroup) -> (bucket: Int, slot: Int?) {
        guard !index.isEmpty else { return (0, nil) }
        let mask = index.count - 1
        var bucket = group.hashValue & mask
        while true {
            let entry = Int(index[bucket])
            if entry == 0 { return (bucket, nil) }
            if keys[entry - 1] == group { return (bucket, entry - 1) }
            bucket = (bucket + 1) & mask
        }
    }

    /// Empties `bucket`, moving back the entries after it that probing would no longer reach (backward shift: no
    /// tombstones, so a search stops at the first empty bucket).
    private mutating func emptyBucket(_ bucket: Int) {
        let mask = index.count - 1
        var hole = bucket
        var next = (hole + 1) & mask
        while index[next] != 0 {
            let home = keys[Int(index[next]) - 1].hashValue & mask
            // The entry stays when its home lies in (hole, next], cyclically: a search from there passes no hole.
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                index[hole] = index[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        index[hole] = 0
    }

    private mutating func rebuildIndex(buckets: Int) {
        index = ContiguousArray(repeating: 0, count: buckets)
        let mask = buckets - 1
        for (slot, group) in keys.enumerated() {
            var bucket = group.hashValue & mask
            while index[bucket] != 0 { bucket = (bucket + 1) & mask }
            index[bucket] = Int32(slot + 1)
        }
    }

    /// The fewest buckets, a power of two, that hold `count` groups at three quarters full at most.
    private static func bucketCount(for count: Int) -> Int {
        var buckets = 8
        while buckets * 3 < count * 4 { buckets *= 2 }
        return buckets
    }

    private static func exchange(_ stored: inout Value, _ value: Value) -> Value {
        var value = value
        swap(&stored, &value)
        return value
    }
}

extension DenseGroupMap: Sequence {
    struct Iterator: IteratorProtocol {
        fileprivate var keys: IndexingIterator<ContiguousArray<AppGroup>>
        fileprivate var values: IndexingIterator<ContiguousArray<Value>>

        mutating func next() -> (key: AppGroup, value: Value)? {
            guard let key = keys.next(), let value = values.next() else { return nil }
            return (key, value)
        }
    }

    func makeIterator() -> Iterator { Iterator(keys: keys.makeIterator(), values: values.makeIterator()) }

    var underestimatedCount: Int { count }
}

extension DenseGroupMap: Sendable where Value: Sendable {}
