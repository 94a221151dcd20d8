/// The change feed: observers subscribe and receive every committed batch of cache
/// changes, in commit order, each with its cause.
///
/// Threading: the feed belongs to the engine queue. Observers are called there, one after
/// another, in the order they subscribed; they may write to the cache themselves: a batch
/// committed while another is being delivered is delivered after it, to every observer, so
/// all observers see the same order.
final class ChangeFeed {
    typealias Observer = (ChangeBatch) -> Void

    private var observers: [(id: UInt64, observe: Observer)] = []
    private var nextObserverID: UInt64 = 1
    private var nextSequence: UInt64 = 1
    private var backlog: [ChangeBatch] = []
    private var delivering = false

    /// Starts delivering batches committed from now on. Returns the id to `unsubscribe` with.
    @discardableResult
    func subscribe(_ observe: @escaping Observer) -> UInt64 {
        let id = nextObserverID
        nextObserverID += 1
        observers.append((id, observe))
        return id
    }

    /// Stops delivery to the observer; a batch being delivered does not reach it any more.
    func unsubscribe(_ id: UInt64) {
        observers.removeAll { $0.id == id }
    }

    var observerCount: Int { observers.count }

    /// Delivers a committed batch (numbering it) to every observer.
    func publish(cause: ChangeCause, changes: [CacheChange]) {
        backlog.append(ChangeBatch(sequence: nextSequence, cause: cause, changes: changes))
        nextSequence += 1
        guard !delivering else { return }
        delivering = true
        defer { delivering = false }
        var index = 0
        while index < backlog.count {
            let batch = backlog[index]
            index += 1
            // A snapshot of ids: an observer may unsubscribe itself or another meanwhile,
            // and one that subscribed during delivery starts with the next batch.
            for id in observers.map(\.id) {
                observers.first { $0.id == id }?.observe(batch)
            }
            // A channel's member list is read from the cache on demand during delivery only.
            for case .channelUpserted(let upsert) in batch.changes { upsert.stored.seal() }
        }
        backlog.removeAll(keepingCapacity: true)
    }
}
