import Dispatch
import Glibc
import Testing

@testable import ParleyCore

/// A stand-in for what a channel list view reaches below itself (ChannelViewContext): a
/// scripted cache and a scripted server page. Only the view's logic is under test here; the
/// real paging is covered by GroupChannelCollectionTests against the real server.
final class ChannelPagingStandIn: FeedStandIn, ChannelViewContext, @unchecked Sendable {
    var connected = true
    var wholeListCached = false
    /// What the cache holds, in the list's order.
    var cached: [JSONValue] = []
    /// The server's next page: its channels as stored, what the feed changed meanwhile, its `next`.
    var serverPage: [JSONValue] = []
    var touched: Set<String> = []
    var serverNext = ""
    var serverRequests = 0

    init() { super.init(label: "test.channel-view-context") }

    var isConnected: Bool { connected }
    var isStreamOpen: Bool { connected }
    func holdsWholeChannelList(_ listScope: String) -> Bool { wholeListCached }

    func cachedChannelPage(
        sort: ChannelListSort, after: [SQLiteValue]?, limit: Int, readsMembers: Bool, showsMembers: Bool,
        matches: (JSONValue) -> Bool, sortPosition: (JSONValue) -> [SQLiteValue]
    ) throws(ParleyError) -> (channels: [(value: JSONValue, text: String)], more: Bool) {
        guard after == nil else { return ([], false) }
        let kept = cached.filter(matches)
        return (kept.prefix(limit).map { ($0, $0.canonicalText) }, kept.count > limit)
    }

    func loadChannelPage(
        userID: String, query: String, limit: Int, token: String?, completesScope listScope: String?,
        _ done: @escaping @Sendable (PageLoad, Result<(page: StoredChannelPage, touched: Set<String>), ParleyError>) -> Void
    ) -> PageLoad {
        serverRequests += 1
        let load = PageLoad(id: UInt64(serverRequests))
        guard connected else {
            queue.async { done(load, .failure(ParleyError(.network, "offline"))) }
            return load
        }
        let urls = serverPage.compactMap { $0["channel_url"]?.stringValue }
        var stored: [String: CachedChannel] = [:]
        for channel in serverPage {
            let url = channel["channel_url"]?.stringValue ?? ""
            stored[url] = CachedChannel(
                orderKey: ChannelOrderKey(
                    channelURL: url, createdAt: 1, lastMessageCreatedAt: channel["last_message"]?["created_at"]?.int64Value, name: ""),
                json: channel.canonicalText)
        }
        let page = StoredChannelPage(urls: urls, stored: stored, lastListed: serverPage.last, next: serverNext)
        let touched = self.touched
        queue.async { done(load, .success((page, touched))) }
        return load
    }

    static func channel(_ url: String, lastMessageAt: Int64) -> JSONValue {
        [
            "channel_url": .string(url), "member_state": "joined", "created_at": 1,
            "last_message": ["message_id": .int(lastMessageAt), "created_at": .int(lastMessageAt)],
        ]
    }
}

@Suite(.serialized) struct ChannelViewLogicTests {
    final class Harness: Sendable {
        let context = ChannelPagingStandIn()
        let dispatcher: CallbackDispatcher
        let deleted = Box<[String]>([])
        let added = Box<[String]>([])
        let collection: GroupChannelCollection

        init(prepare: (ChannelPagingStandIn) -> Void) throws {
            prepare(context)
            dispatcher = try CallbackDispatcher(mode: .thread)
            let deleted = self.deleted
            let added = self.added
            collection = try GroupChannelCollection(
                context: context, dispatcher: dispatcher, query: GroupChannelListQuery(),
                handler: GroupChannelCollectionHandler(
                    added: { _, channels in added.update { $0 += channels.map { $0.value["channel_url"]?.stringValue ?? "" } } },
                    deleted: { _, urls in deleted.update { $0 += urls } }))
        }

        func loadMore() -> Result<[String], ParleyError> {
            let outcome = Box<Result<[JSONText], ParleyError>?>(nil)
            collection.loadMore { result in outcome.update { $0 = result } }
            guard engineWaitUntil({ outcome.value != nil }), let result = outcome.value else { return .failure(ParleyError(.timeout, "no page")) }
            return result.map { $0.map { $0.value["channel_url"]?.stringValue ?? "" } }
        }

        func settle() {
            let done = Box(false)
            // Not `self`: the harness must not be released last by the queue (its deinit
            // disposes the view, which waits for the queue).
            let dispatcher = self.dispatcher
            context.queue.async { dispatcher.enqueue { done.update { $0 = true } } }
            _ = engineWaitUntil { done.value }
        }

        var shown: [String] { collection.channels.map { $0["channel_url"]?.stringValue ?? "" } }

        deinit {
            collection.dispose()
            dispatcher.close()
        }
    }

    @Test func aWholeListInTheCacheIsServedWithoutTheServer() throws {
        let harness = try Harness { context in
            context.wholeListCached = true
            context.connected = false
            context.cached = [ChannelPagingStandIn.channel("a", lastMessageAt: 30), ChannelPagingStandIn.channel("b", lastMessageAt: 20)]
        }
        #expect(try harness.loadMore().get() == ["a", "b"])
        #expect(!harness.collection.hasMore)
        #expect(harness.context.runNow { harness.context.serverRequests } == 0)
    }

    @Test func offlineWithoutTheWholeListTheFirstPageIsTheCacheAndTheNextFails() throws {
        let harness = try Harness { context in
            context.connected = false
            context.cached = [ChannelPagingStandIn.channel("a", lastMessageAt: 30)]
        }
        // The first page shows what the cache holds at once; nothing proves it is the whole list.
        #expect(try harness.loadMore().get() == ["a"])
        #expect(harness.collection.hasMore)
        guard case .failure(let error) = harness.loadMore() else {
            Issue.record("a second page offline should fail")
            return
        }
        #expect(error.code == .network)
    }

    @Test func theServersFirstPageRemovesWhatItDoesNotListUnlessTheFeedChangedItMeanwhile() throws {
        // Cached: a, b, c. The server's first page lists a and b only; c was changed by the
        // feed while the page travelled (Paging reports it touched): c stays, nothing is deleted.
        let harness = try Harness { context in
            context.cached = ["a", "b", "c"].enumerated().map { ChannelPagingStandIn.channel($1, lastMessageAt: Int64(30 - $0)) }
            context.serverPage = [ChannelPagingStandIn.channel("a", lastMessageAt: 30), ChannelPagingStandIn.channel("b", lastMessageAt: 29)]
            context.touched = ["c"]
        }
        #expect(try harness.loadMore().get() == ["a", "b", "c"])
        _ = engineWaitUntil { harness.context.runNow { harness.context.serverRequests } == 1 }
        harness.settle()
        #expect(harness.deleted.value.isEmpty)
        #expect(harness.shown == ["a", "b", "c"])
        #expect(!harness.collection.hasMore)

        // The same without the touch: c, which the server does not list, goes.
        let second = try Harness { context in
            context.cached = ["a", "b", "c"].enumerated().map { ChannelPagingStandIn.channel($1, lastMessageAt: Int64(30 - $0)) }
            context.serverPage = [ChannelPagingStandIn.channel("a", lastMessageAt: 30), ChannelPagingStandIn.channel("b", lastMessageAt: 29)]
        }
        #expect(try second.loadMore().get() == ["a", "b", "c"])
        _ = engineWaitUntil { second.context.runNow { second.context.serverRequests } == 1 }
        second.settle()
        _ = engineWaitUntil { second.deleted.value == ["c"] }
        #expect(second.deleted.value == ["c"])
        #expect(second.shown == ["a", "b"])
    }
}
