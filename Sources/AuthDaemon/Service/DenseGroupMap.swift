// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// A map from app group to `Value`, kept small for many groups: a `Dictionary` from group to slot, and the groups
/// and values in dense arrays.
///
/// A `Dictionary<AppGroup, Value>` holds each key and value in its buckets, whose count is a power of two at a
/// load of at most three quarters: at 100,000 groups, 262,144 buckets of key and value. Here the buckets hold a
/// key and a 4-byte slot, and the values fill arrays exactly (`authd-bench --only scale` shows the difference).
/// A removal moves the last entry into the gap, so the order is not kept.
struct DenseGroupMap<Value> {
    private var slots: [AppGroup: Int32] = [:]
    /// The groups, in their slots.
    private(set) var keys: ContiguousArray<AppGroup> = []
    private var values: ContiguousArray<Value> = []

    init() {}

    var count: Int { keys.count }

    /// Makes room for `count` groups at once.
    mutating func reserveCapacity(_ count: Int) {
        slots.reserveCapacity(count)
        keys.reserveCapacity(count)
        values.reserveCapacity(count)
    }

    subscript(group: AppGroup) -> Value? {
        get { slots[group].map { values[Int($0)] } }
        set {
            if let newValue {
                updateValue(newValue, forKey: group)
            } else {
                removeValue(forKey: group)
            }
        }
    }

    /// Stores `value` for `group`; returns the value it replaced, if any.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey group: AppGroup) -> Value? {
        if let slot = slots[group] {
            return Self.exchange(&values[Int(slot)], value)
        }
        slots[group] = Int32(keys.count)
        keys.append(group)
        values.append(value)
        return nil
    }

    /// Forgets `group`; returns its value, if it had one. The last entry moves into its slot.
    @discardableResult
    mutating func removeValue(forKey group: AppGroup) -> Value? {
        guard let slot = slots.removeValue(forKey: group).map(Int.init) else { return nil }
        let last = keys.count - 1
        if slot != last {
            keys.swapAt(slot, last)
            values.swapAt(slot, last)
            slots[keys[slot]] = Int32(slot)
        }
        keys.removeLast()
        return values.removeLast()
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
