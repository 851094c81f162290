// SPDX-License-Identifier: Apache-2.0
/// A binary min-heap: O(log n) insert and removal of the smallest element, O(1) peek.
///
/// Small on purpose (the package takes no swift-collections dependency); ``ExpiryScheduler`` uses it with lazy
/// deletion.
struct MinHeap<Element: Comparable> {
    private(set) var elements: [Element] = []

    var count: Int { elements.count }
    var isEmpty: Bool { elements.isEmpty }
    /// The smallest element, or nil when the heap is empty.
    var min: Element? { elements.first }

    init() {}

    /// Builds a heap of `elements` in O(n).
    init(_ elements: [Element]) {
        self.elements = elements
        var index = elements.count / 2 - 1
        while index >= 0 {
            siftDown(from: index)
            index -= 1
        }
    }

    mutating func insert(_ element: Element) {
        elements.append(element)
        siftUp(from: elements.count - 1)
    }

    /// Removes and returns the smallest element, or nil when the heap is empty.
    mutating func popMin() -> Element? {
        guard !elements.isEmpty else { return nil }
        elements.swapAt(0, elements.count - 1)
        let smallest = elements.removeLast()
        if !elements.isEmpty { siftDown(from: 0) }
        return smallest
    }

    private mutating func siftUp(from start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard elements[child] < elements[parent] else { return }
            elements.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < elements.count && elements[left] < elements[smallest] { smallest = left }
            if right < elements.count && elements[right] < elements[smallest] { smallest = right }
            if smallest == parent { return }
            elements.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

extension MinHeap: Sendable where Element: Sendable {}
