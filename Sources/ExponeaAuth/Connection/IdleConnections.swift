// SPDX-License-Identifier: Apache-2.0

/// The connections of an ``AuthDaemonClient`` without a call in flight, kept for its next calls: at most
/// four, the last kept taken first.
///
/// Slots of a fixed count, not an array: the metadata of an array of a class type is made at run time, by
/// demangling its name, the first time it is used: an app's first call would pay for it.
struct IdleConnections {
    private var slots: InlineArray<4, VarlinkConnection?> = .init(repeating: nil)
    private var count = 0

    /// Takes out the connection kept last; nil when none is kept.
    mutating func take() -> VarlinkConnection? {
        guard count > 0 else { return nil }
        count -= 1
        defer { slots[count] = nil }
        return slots[count]
    }

    /// Keeps `connection`; false when every slot is taken.
    mutating func keep(_ connection: VarlinkConnection) -> Bool {
        guard count < slots.count else { return false }
        slots[count] = connection
        count += 1
        return true
    }
}
