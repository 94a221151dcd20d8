
/// The set of a client's asynchronous operations that have not completed yet.
///
/// It is what makes "every completion runs exactly once" structural: whoever removes an
/// operation's entry (its normal finish, or `cancelAll` on close) is the only one allowed
/// to deliver its completion.
final class PendingOperations: Sendable {
    struct Entry: Sendable {
        /// Delivers the operation's completion with a cancellation error.
        let deliverCancelled: @Sendable () -> Void
        /// Stops the underlying work (an HTTP transfer, ...), if it has started.
        var abort: (@Sendable () -> Void)?
    }

    private struct State {
        var nextID: UInt64 = 1
        var open: [UInt64: Entry] = [:]
        var closed = false
    }

    private let state = Locked(State())

    /// Registers an operation. Throws once the client is closing, so no operation can
    /// start after `cancelAll`.
    func begin(deliverCancelled: @escaping @Sendable () -> Void) throws(ParleyError) -> UInt64 {
        let id: UInt64? = state.withLock { state in
            guard !state.closed else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.open[id] = Entry(deliverCancelled: deliverCancelled)
            return id
        }
        guard let id else { throw .invalidState("the client is closed") }
        return id
    }

    /// Attaches the way to stop the operation's work; aborts at once if it was already cancelled.
    func setAbort(_ id: UInt64, _ abort: @escaping @Sendable () -> Void) {
        let stillOpen = state.withLock { state in
            guard state.open[id] != nil else { return false }
            state.open[id]?.abort = abort
            return true
        }
        if !stillOpen { abort() }
    }

    /// Claims the right to deliver the completion. False means it was cancelled already.
    func finish(_ id: UInt64) -> Bool {
        state.withLock { $0.open.removeValue(forKey: id) != nil }
    }

    /// Cancels one operation: true if it was still running.
    func cancel(_ id: UInt64) -> Bool {
        guard let entry = state.withLock({ $0.open.removeValue(forKey: id) }) else { return false }
        entry.abort?()
        entry.deliverCancelled()
        return true
    }

    /// Refuses new operations and cancels every open one, in the order they began.
    func cancelAll() {
        let entries = state.withLock { state in
            state.closed = true
            let open = state.open.sorted { $0.key < $1.key }.map(\.value)
            state.open.removeAll()
            return open
        }
        for entry in entries {
            entry.abort?()
            entry.deliverCancelled()
        }
    }

    var count: Int { state.withLock { $0.open.count } }
}
