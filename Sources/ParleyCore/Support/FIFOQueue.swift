/// A first-in first-out queue over an array: taking from the front moves a head index, and
/// the taken slots are dropped when the queue empties or when they are most of the array
/// (never an O(n) removal per take). A taken slot lets go of its element at once, so that
/// what a queued closure captured does not outlive its turn.
struct FIFOQueue<Element> {
    private var slots: [Element?] = []
    private var head = 0

    var count: Int { slots.count - head }
    var isEmpty: Bool { head == slots.count }

    mutating func append(_ element: Element) { slots.append(element) }

    mutating func popFirst() -> Element? {
        guard head < slots.count else { return nil }
        let element = slots[head]
        slots[head] = nil
        head += 1
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 256 && head * 2 > slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return element
    }

    mutating func removeAll() {
        slots.removeAll()
        head = 0
    }
}
