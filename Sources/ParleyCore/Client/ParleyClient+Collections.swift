
// Creating collections, and disposing them when the client closes.

/// The client's live collections, held weakly: closing the client disposes them.
final class CollectionRegistry: Sendable {
    private final class WeakEntry: @unchecked Sendable {
        weak var collection: (any DisposableCollection)?
        init(_ collection: any DisposableCollection) { self.collection = collection }
    }

    private let entries = Locked<[WeakEntry]>([])

    func add(_ collection: any DisposableCollection) {
        entries.withLock { list in
            list.removeAll { $0.collection == nil }
            list.append(WeakEntry(collection))
        }
    }

    /// The views created and not yet disposed (nor freed), by kind.
    func openViews() -> OpenViewCounts {
        var counts = OpenViewCounts()
        entries.withLock { list in
            for entry in list {
                guard let collection = entry.collection, !collection.isDisposed else { continue }
                switch collection {
                case is GroupChannelCollection: counts.groupChannelCollections += 1
                case is MessageCollection: counts.messageCollections += 1
                case is SyncView: counts.syncViews += 1
                case is MessageSearch: counts.messageSearches += 1
                default: break
                }
            }
        }
        return counts
    }

    func disposeAll() {
        let live = entries.withLock { list in
            defer { list.removeAll() }
            return list.compactMap(\.collection)
        }
        for collection in live { collection.dispose() }
    }
}

/// A view that the client disposes when it closes.
protocol DisposableCollection: AnyObject, Sendable {
    func dispose()
    var isDisposed: Bool { get }
}

/// Open views by kind (`CollectionRegistry.openViews`).
public struct OpenViewCounts: Sendable, Equatable {
    public var groupChannelCollections = 0
    public var messageCollections = 0
    public var syncViews = 0
    public var messageSearches = 0

    public var total: Int { groupChannelCollections + messageCollections + syncViews + messageSearches }

    public init() {}
}

extension GroupChannelCollection: DisposableCollection {}
extension MessageCollection: DisposableCollection {}

extension ParleyClient {
    /// A live list of the connected user's channels for `query` (see GroupChannelCollection).
    /// Needs a connected client (the cache is per user; it may be offline). Nothing loads
    /// until the first `loadMore`.
    public func groupChannelCollection(
        query: GroupChannelListQuery, handler: GroupChannelCollectionHandler
    ) throws(ParleyError) -> GroupChannelCollection {
        guard !isClosed else { throw .invalidState("the client is closed") }
        let collection = try GroupChannelCollection(client: self, query: query, handler: handler)
        collections.add(collection)
        return collection
    }
}

extension ParleyClient {
    /// The live chat view of one channel (see MessageCollection), from `startingPoint` (ms;
    /// `MessageCollection.newestStartingPoint` for the newest end). Needs a connected client
    /// (it may be offline since). Nothing loads until `start`.
    public func messageCollection(
        channelURL: String, startingPoint: Int64 = MessageCollection.newestStartingPoint, params: MessageListParams = MessageListParams(),
        handler: MessageCollectionHandler
    ) throws(ParleyError) -> MessageCollection {
        guard !isClosed else { throw .invalidState("the client is closed") }
        let collection = try MessageCollection(
            client: self, channelURL: channelURL, startingPoint: startingPoint, params: params, handler: handler)
        collections.add(collection)
        return collection
    }
}
