import Testing
@testable import ParleyCore

// A view's messages live in a ChunkedList (Collections/ChunkedList.swift): it must behave as
// an array under every change a view makes, and copies taken for the application must not
// see later changes.

@Suite struct ChunkedListTests {
    @Test func itBehavesAsAnArrayAndCopiesKeepTheirContent() {
        var rng = SeededGenerator(state: 41)
        var list = ChunkedList<Int>()
        var model: [Int] = []
        var copies: [(ChunkedList<Int>, [Int])] = []
        var next = 0
        for step in 0..<3000 {
            switch Int.random(in: 0..<10, using: &rng) {
            case 0, 1:  // a page before or after what is shown
                let page = (0..<Int.random(in: 1...(model.count > 3000 ? 3 : 300), using: &rng)).map { _ in next += 1; return next }
                let position = Bool.random(using: &rng) ? 0 : model.count
                list.insert(contentsOf: page, at: position)
                model.insert(contentsOf: page, at: position)
            case 2:  // a page in the middle (filled gap)
                let page = (0..<Int.random(in: 1...5, using: &rng)).map { _ in next += 1; return next }
                let position = Int.random(in: 0...model.count, using: &rng)
                list.insert(contentsOf: page, at: position)
                model.insert(contentsOf: page, at: position)
            case 3, 4, 5:  // a live message anywhere
                next += 1
                let position = Int.random(in: 0...model.count, using: &rng)
                list.insert(next, at: position)
                model.insert(next, at: position)
            case 6 where !model.isEmpty, 7 where !model.isEmpty:  // an update
                let position = Int.random(in: 0..<model.count, using: &rng)
                list[position] = -model[position]
                model[position] = -model[position]
            case 8 where !model.isEmpty:  // a deletion
                let position = Int.random(in: 0..<model.count, using: &rng)
                #expect(list.remove(at: position) == model.remove(at: position))
            case 9 where step % 50 == 0:
                list.removeAll()
                model.removeAll()
            default:
                break
            }
            #expect(list.count == model.count)
            if step % 97 == 0 { copies.append((list, model)) }
            if step % 10 == 0, Array(list) != model || list.indices.map({ list[$0] }) != model {
                Issue.record("differs from the array after step \(step)")
                break
            }
        }
        for (copy, content) in copies { #expect(Array(copy) == content) }
        #expect(ChunkedList([1, 2, 3]).map { $0 * 2 } == [2, 4, 6])
    }

    /// Live messages appended one by one grow one chunk until it splits; removals empty chunks.
    @Test func singleInsertsSplitAChunkAndRemovalsEmptyOne() {
        var list = ChunkedList<Int>([0])
        var model = [0]
        var copies: [(ChunkedList<Int>, [Int])] = []
        for value in 1...(5 * ChunkedList<Int>.chunkLimit) {
            let position = value % 3 == 0 ? list.count : list.count / 2
            list.insert(value, at: position)
            model.insert(value, at: position)
            if value % 100 == 0 { copies.append((list, model)) }
            if value % 50 == 0, Array(list) != model || list.indices.map({ list[$0] }) != model {
                Issue.record("differs after inserting \(value)")
                break
            }
        }
        while !model.isEmpty {
            let position = model.count % 7 == 0 ? 0 : model.count - 1
            #expect(list.remove(at: position) == model.remove(at: position))
            if model.count % 97 == 0 { #expect(Array(list) == model) }
        }
        #expect(list.isEmpty && Array(list) == [])
        for (copy, content) in copies { #expect(Array(copy) == content) }
        #expect(Array(ChunkedList<Int>()) == [])
    }
}
