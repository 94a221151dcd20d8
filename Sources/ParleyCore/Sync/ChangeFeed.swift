/// The change feed: observers subscribe and receive every committed batch of cache
/// changes, in commit order, each with its cause.
///
/// Threading: the feed belongs to the engine queue. Observers are called there, one after
/// another, in the order they subscribed; they may write to the cache themselves: a batch
/// committed while another is being delivered is delivered after it, to every observer, so
/// all observers see the same order.
final class ChangeFeed {
    typealias Observer = (ChangeBatch) -> Void

    /// `channelURL`: the observer cares about that channel alone (`ChangeBatch.concerns`).
    private var observers: [(id: UInt64, channelURL: String?, observe: Observer)] = []
    private var nextObserverID: UInt64 = 1
    private var nextSequence: UInt64 = 1
    private var backlog: [ChangeBatch] = []
    private var delivering = false

    /// Starts delivering batches committed from now on. Returns the id to `unsubscribe` with.
    /// With `channelURL`, only the batches that concern that channel are delivered (a
    /// message view cares about one channel; a burst in another then costs it nothing).
    @discardableResult
    func subscribe(channelURL: String? = nil, _ observe: @escaping Observer) -> UInt64 {
        let id = nextObserverID
        nextObserverID += 1
        observers.append((id, channelURL, observe))
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
            var scope: ChangeBatch.ChannelScope?
            for id in observers.map(\.id) {
                guard let observer = observers.first(where: { $0.id == id }) else { continue }
                if let url = observer.channelURL {
                    if scope == nil { scope = batch.channelScope }
                    guard scope?.contains(url) == true else { continue }
                }
                observer.observe(batch)
            }
            // A channel's member list is read from the cache on demand during delivery only.
            for case .channelUpserted(let upsert) in batch.changes { upsert.stored.seal() }
        }
        backlog.removeAll(keepingCapacity: true)
    }
}
