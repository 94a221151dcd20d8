// A view's shown messages are handed to the application as a copy at every callback (the list
// it reads in `messages` must be the one the callback describes), and the view changes its
// own list right after. With one array, each change after a copy copied the whole list, every
// element retained again: a page or a live message into a view of n messages cost O(n).
// Kept in chunks, a copy shares the chunks and a change copies only the chunk it touches.

/// An ordered list stored as chunks: pages and appended runs are cut into chunks of at most
/// `chunkLimit` elements, and a chunk that single inserts grow past twice that is split.
/// Value semantics.
struct ChunkedList<Element>: RandomAccessCollection {
    static var chunkLimit: Int { 256 }

    private var chunks: [[Element]] = []
    /// The list index of each chunk's first element.
    private var starts: [Int] = []
    private(set) var count = 0

    init() {}

    init<Elements: Collection>(_ elements: Elements) where Elements.Element == Element {
        append(contentsOf: elements)
    }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(position: Int) -> Element {
        get {
            let chunk = chunkIndex(containing: position)
            return chunks[chunk][position - starts[chunk]]
        }
        set {
            let chunk = chunkIndex(containing: position)
            chunks[chunk][position - starts[chunk]] = newValue
        }
    }

    func makeIterator() -> FlattenSequence<[[Element]]>.Iterator { chunks.joined().makeIterator() }

    /// Inserts `element` at `position` (0...count), into the chunk that holds that place.
    mutating func insert(_ element: Element, at position: Int) {
        precondition(position >= 0 && position <= count, "ChunkedList index out of range")
        if chunks.isEmpty {
            append(contentsOf: CollectionOfOne(element))
            return
        }
        // At a chunk boundary the element joins the chunk before it (appending), except at 0.
        let chunk = position == 0 ? 0 : chunkIndex(containing: position - 1)
        chunks[chunk].insert(element, at: position - starts[chunk])
        count += 1
        for later in (chunk + 1)..<chunks.count { starts[later] += 1 }
        if chunks[chunk].count > 2 * Self.chunkLimit { split(chunk) }
    }

    /// Inserts `elements` at `position`: whole new chunks at either end, element by element
    /// in between.
    mutating func insert<Elements: Collection>(contentsOf elements: Elements, at position: Int) where Elements.Element == Element {
        precondition(position >= 0 && position <= count, "ChunkedList index out of range")
        if position == count {
            append(contentsOf: elements)
        } else if position == 0 {
            let added = Self.cut(elements)
            chunks.insert(contentsOf: added, at: 0)
            count += elements.count
            rebuildStarts()
        } else {
            for (offset, element) in elements.enumerated() { insert(element, at: position + offset) }
        }
    }

    mutating func append(contentsOf elements: some Collection<Element>) {
        guard !elements.isEmpty else { return }
        chunks += Self.cut(elements)
        count += elements.count
        rebuildStarts()
    }

    @discardableResult
    mutating func remove(at position: Int) -> Element {
        let chunk = chunkIndex(containing: position)
        let removed = chunks[chunk].remove(at: position - starts[chunk])
        count -= 1
        if chunks[chunk].isEmpty {
            chunks.remove(at: chunk)
            starts.remove(at: chunk)
        }
        for later in chunk..<chunks.count where starts[later] > position { starts[later] -= 1 }
        return removed
    }

    mutating func removeAll() {
        chunks = []
        starts = []
        count = 0
    }

    private func chunkIndex(containing position: Int) -> Int {
        precondition(position >= 0 && position < count, "ChunkedList index out of range")
        var low = 0, high = starts.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= position { low = middle } else { high = middle - 1 }
        }
        return low
    }

    private mutating func split(_ chunk: Int) {
        let elements = chunks[chunk]
        chunks.replaceSubrange(chunk...chunk, with: Self.cut(elements))
        rebuildStarts()
    }

    private mutating func rebuildStarts() {
        starts.removeAll(keepingCapacity: true)
        var start = 0
        for chunk in chunks {
            starts.append(start)
            start += chunk.count
        }
    }

    private static func cut(_ elements: some Collection<Element>) -> [[Element]] {
        let all = Array(elements)
        return stride(from: 0, to: all.count, by: chunkLimit).map { Array(all[$0..<Swift.min($0 + chunkLimit, all.count)]) }
    }
}

extension ChunkedList: Sendable where Element: Sendable {}
