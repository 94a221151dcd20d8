// Loading for the views: pages of a channel's messages (from the cache where a chunk proves
// it holds them, else from the server), the gap check after a reconnection, and pages of the
// user's channel list. Paging builds each request (Net/Endpoints.swift), calls the server,
// stores the answer through the cache writer with a cause that names the load
// (`ChangeCause.pageLoad`), and hands back what the cache now holds. Views decide which page
// they want and what to show; they never build a URL, call the network or write the cache.
//
// An answer shows the server as of some moment while it travelled; the feed may have
// committed later changes meanwhile (events, other loads). For each load waiting for the
// server, Paging notes what the feed changed in its scope (`PageLoadWatch`): the answer's
// older copy never overwrites those, nor does their absence from it remove them. The load's
// own write comes after its watch ends, so it never counts itself.

/// One load Paging runs for a view. Its cache write is published with cause
/// `ChangeCause.pageLoad`, so the view that asked knows its own page when the feed reports it.
public struct PageLoad: Sendable, Hashable {
    public let id: UInt64
}

/// A page of the server's message listing (docs/PROTOCOL.md §7.2), in key order.
struct ServerMessagePage {
    var messages: [JSONValue]
    var keys: [MessageKey]
    var hasPrev: Bool
    var hasNext: Bool

    init(_ answer: JSONValue, channelURL: String, listKey: String = WireField.messages) throws(ParleyError) {
        guard let list = answer[listKey]?.arrayValue else {
            throw ParleyError(.protocolViolation, "message list: expected \(listKey) (an array)")
        }
        var pairs: [(MessageKey, JSONValue)] = []
        for (index, message) in list.enumerated() {
            let columns: ChatCache.MessageColumns
            do throws(ParleyError) {
                columns = try ChatCache.MessageColumns(message)
            } catch {
                throw ParleyError(.protocolViolation, "message list: \(listKey)[\(index)]: \(error.message)")
            }
            guard columns.channelURL == channelURL else {
                throw ParleyError(.protocolViolation, "message list: \(listKey)[\(index)] belongs to another channel")
            }
            pairs.append((MessageKey(createdAt: columns.createdAt, messageID: columns.messageID), message))
        }
        pairs.sort { $0.0 < $1.0 }
        messages = pairs.map(\.1)
        keys = pairs.map(\.0)
        hasPrev = WireMessageList(answer).hasPrev ?? false
        hasNext = WireMessageList(answer).hasNext ?? false
    }
}

extension MessageKey {
    /// The key just before this one, nil for the first possible key.
    var predecessor: MessageKey? {
        if messageID > .min { return MessageKey(createdAt: createdAt, messageID: messageID - 1) }
        if createdAt > .min { return MessageKey(createdAt: createdAt - 1, messageID: .max) }
        return nil
    }

    var successor: MessageKey? { ChatCache.successor(of: self) }
}

/// Which messages of which channel a view shows: the channel, its filters, and the same
/// filters as the listing's query (MessageListParams.serverQuery).
struct MessageScope {
    var channelURL: String
    var filter: MessageFilter
    var serverQuery: String
}

/// A local message of this client that a stored page replaced with the server's copy.
struct ConfirmedLocal {
    var reqID: String
    var key: MessageKey
}

/// A page of messages as the cache now holds it.
struct StoredMessages {
    var messages: [CachedMessage]
    /// Local messages the page's copies replaced (by `req_id`).
    var confirmedLocals: [ConfirmedLocal]
}

/// The server's page around a starting point, stored.
struct StartPage {
    var stored: StoredMessages
    /// The range the server vouched for (`.oldest` / `.newest` at the channel's ends).
    var low: MessageKey
    var high: MessageKey
    var hasPrevious: Bool
    var hasNext: Bool
    /// The page reached the newest end while the stream was open all along: nothing newer was missed.
    var live: Bool
}

/// What the cache holds around a starting point.
struct CachedStart {
    var messages: [CachedMessage]
    var locals: [CachedLocalMessage]
    /// A chunk proves nothing older exists.
    var reachesOldest: Bool
}

/// A page read from the cache, which a chunk proves continuous.
struct CachedPage {
    var messages: [CachedMessage]
    /// False: the page reaches the channel's end on its side.
    var more: Bool
}

/// One round of a gap check.
enum GapRound {
    /// More messages were missed than the threshold.
    case huge
    case filled(GapFill)
}

/// The missed messages of `from...through`, stored.
struct GapFill {
    var stored: StoredMessages
    var from: MessageKey
    var through: MessageKey
    /// How many messages the server listed in this round.
    var count: Int
    /// Another round follows (`through` is the last listed message).
    var more: Bool
    /// The stream stayed open since the check began: the next round's `liveAtRequest`.
    var streamHeld: Bool
    /// The fill reached the newest end with the stream open all along.
    var live: Bool
}

/// A page of the user's channel list, stored.
struct StoredChannelPage {
    /// The page's channels as the server listed them, in its order.
    var urls: [String]
    /// Each listed channel as the cache holds it after the store (absent: not cached).
    var stored: [String: CachedChannel]
    /// The page's last channel as listed (where the page ends in the list's order).
    var lastListed: JSONValue?
    /// The server's token for the next page; empty at the end.
    var next: String
}

/// What the feed committed while a load waited for the server.
struct PageLoadWatch {
    /// The channel whose messages the load reads (nil: a channel list).
    var channelURL: String?
    var touchedMessages: Set<Int64> = []
    var touchedChannels: Set<String> = []
    /// The stream dropped: the page cannot vouch that nothing newer was missed.
    var streamDropped = false
    /// The cache was cleared: a channel list page continues a list that is gone.
    var cleared = false
}

struct PagingState {
    var nextLoad: UInt64 = 0
    var watches: [UInt64: PageLoadWatch] = [:]
}

extension Engine {
    // MARK: Watching loads in flight

    /// Feed observer (subscribed first, Engine.init): notes what each batch changed for the
    /// loads waiting for the server.
    func notePageLoads(_ batch: ChangeBatch) {
        guard !paging.watches.isEmpty else { return }
        for id in paging.watches.keys {
            guard var watch = paging.watches[id] else { continue }
            for change in batch.changes {
                switch change {
                case .messageUpserted(let upsert) where upsert.channelURL == watch.channelURL:
                    watch.touchedMessages.insert(upsert.key.messageID)
                case .messageRemoved(let url, let messageID) where url == watch.channelURL:
                    watch.touchedMessages.insert(messageID)
                case .newestEndUnknown(let url) where url == nil || url == watch.channelURL:
                    watch.streamDropped = true
                case .channelUpserted(let upsert) where watch.channelURL == nil:
                    watch.touchedChannels.insert(upsert.url)
                case .channelRemoved(let url, _) where watch.channelURL == nil:
                    watch.touchedChannels.insert(url)
                case .cleared:
                    watch.cleared = true
                default:
                    break
                }
            }
            paging.watches[id] = watch
        }
    }

    /// Sends a load's request; `done` gets the answer with what the feed changed meanwhile.
    private func pageRequest(
        channelURL: String?, path: String,
        _ done: @escaping @Sendable (PageLoad, Result<JSONValue, ParleyError>, PageLoadWatch) -> Void
    ) -> PageLoad {
        paging.nextLoad += 1
        let load = PageLoad(id: paging.nextLoad)
        guard session.current != nil else {
            // Never before the caller holds the load: its answer comes later, as from the server.
            queue.async { done(load, .failure(.invalidState("not connected")), PageLoadWatch(channelURL: channelURL)) }
            return load
        }
        paging.watches[load.id] = PageLoadWatch(channelURL: channelURL)
        call("GET", path) { result in
            let watch = self.paging.watches.removeValue(forKey: load.id) ?? PageLoadWatch(channelURL: channelURL)
            done(load, result, watch)
        }
        return load
    }

    // MARK: Messages from the cache

    /// What the cache holds around a starting point (`anchor` nil: the newest end), and whether
    /// a chunk proves that nothing older exists.
    func cachedStart(
        _ scope: MessageScope, anchor: MessageKey?, extraAtAnchor: Bool, previous: Int, next: Int
    ) throws(ParleyError) -> CachedStart {
        guard let cache else { throw .invalidState("the client has no cache open") }
        let anchorKey = anchor ?? .newest
        var messages: [CachedMessage]
        let olderCount: Int
        if let anchor, extraAtAnchor {
            // `previous` counts the messages before the anchor's time; those at it come besides.
            let atAnchorStart = MessageKey(createdAt: anchor.createdAt, messageID: .min)
            messages = try cache.messages(
                channelURL: scope.channelURL, before: atAnchorStart, inclusive: false, limit: previous, filter: scope.filter)
            olderCount = messages.count
            messages += try cache.messages(channelURL: scope.channelURL, from: atAnchorStart, through: anchor, filter: scope.filter)
        } else {
            messages = try cache.messages(
                channelURL: scope.channelURL, before: anchorKey, inclusive: true, limit: previous, filter: scope.filter)
            olderCount = messages.count
        }
        if anchor != nil && next > 0 {
            messages += try cache.messages(channelURL: scope.channelURL, after: anchorKey, limit: next, filter: scope.filter)
        }
        let locals = try cache.localMessages(channelURL: scope.channelURL)
        let continuity = scope.filter.continuityScope
        var reachesOldest = false
        if olderCount < previous {
            // The cache holds nothing older than where the read begins: its first message; with
            // none, the anchor. At the newest end with none, where the cache's newest chunk ends:
            // no cached message of the scope lies past it, and the view takes what the cache holds
            // as the newest end (has_next false), so that chunk vouches for the whole range.
            var first = messages.first?.key ?? anchor
            if first == nil { first = try cache.newestContinuousKey(channelURL: scope.channelURL, scope: continuity) }
            if let first, let chunk = try cache.chunk(channelURL: scope.channelURL, scope: continuity, containing: first) {
                reachesOldest = chunk.reachesOldest
            }
        }
        return CachedStart(messages: messages, locals: locals, reachesOldest: reachesOldest)
    }

    /// Up to `size` messages before `low` when a chunk proves the cache holds them without a
    /// hole (or holds every older one); nil when only the server can tell.
    func cachedPage(_ scope: MessageScope, before low: MessageKey, size: Int) -> CachedPage? {
        guard let cache else { return nil }
        let continuity = scope.filter.continuityScope
        guard var cached = try? cache.messages(channelURL: scope.channelURL, before: low, limit: size + 1, filter: scope.filter) else {
            return nil
        }
        if cached.count == size + 1,
            (try? cache.chunkCovers(channelURL: scope.channelURL, scope: continuity, from: cached[0].key, to: low)) == true
        {
            cached.removeFirst()
            return CachedPage(messages: cached, more: true)
        }
        if cached.count <= size, let chunk = try? cache.chunk(channelURL: scope.channelURL, scope: continuity, containing: low),
            chunk.reachesOldest, chunk.start <= (cached.first?.key ?? low)
        {
            return CachedPage(messages: cached, more: false)
        }
        return nil
    }

    /// Up to `size` messages after `high`, as `cachedPage(before:)`. The newest end is only
    /// vouched for while the stream is open and no catch-up runs (`mayReachNewest`).
    func cachedPage(_ scope: MessageScope, after high: MessageKey, size: Int, mayReachNewest: Bool) -> CachedPage? {
        guard let cache else { return nil }
        let continuity = scope.filter.continuityScope
        guard let cached = try? cache.messages(channelURL: scope.channelURL, after: high, limit: size + 1, filter: scope.filter) else {
            return nil
        }
        if cached.count == size + 1,
            (try? cache.chunkCovers(channelURL: scope.channelURL, scope: continuity, from: high, to: cached[size].key)) == true
        {
            return CachedPage(messages: Array(cached.prefix(size)), more: true)
        }
        if cached.count <= size, mayReachNewest, isStreamOpen,
            let chunk = try? cache.chunk(channelURL: scope.channelURL, scope: continuity, containing: high),
            chunk.reachesNewest, chunk.end >= (cached.last?.key ?? high)
        {
            return CachedPage(messages: cached, more: false)
        }
        return nil
    }

    // MARK: Messages from the server

    /// The server's page around a starting point (`anchorTime` nil: the newest end; else the
    /// older side holds `created_at <= anchorTime`), stored as the cache's copy of its range.
    /// `extraAtAnchor`: `previous` counts the messages before `anchorTime` only, those created
    /// at it come besides (an inclusive start by timestamp, as the reference counts it).
    @discardableResult
    func loadStartPage(
        _ scope: MessageScope, anchorTime: Int64?, extraAtAnchor: Bool, previous: Int, next requestedNext: Int,
        _ done: @escaping @Sendable (PageLoad, Result<StartPage, ParleyError>) -> Void
    ) -> PageLoad {
        let next = anchorTime == nil ? 0 : requestedNext
        let anchorKey = anchorTime.map { MessageKey(createdAt: $0, messageID: .max) } ?? .newest
        var anchor = Endpoints.MessageListAnchor.now
        if let anchorTime { anchor = extraAtAnchor ? .time(anchorTime) : .upTo(anchorTime) }
        let path = Endpoints.messageList(
            channelURL: scope.channelURL, anchor: anchor, previous: previous, next: next, filter: scope.serverQuery)
        let liveAtRequest = isStreamOpen
        return pageRequest(channelURL: scope.channelURL, path: path) { load, result, watch in
            done(load, Result(catching: { () throws(ParleyError) in
                let page = try ServerMessagePage(try result.get(), channelURL: scope.channelURL)
                let low: MessageKey = page.hasPrev ? (page.keys.first ?? anchorKey) : .oldest
                let high: MessageKey =
                    if anchorTime == nil { .newest } else if next == 0 { anchorKey } else { page.hasNext ? (page.keys.last ?? anchorKey) : .newest }
                let live = high == .newest && liveAtRequest && !watch.streamDropped && self.isStreamOpen
                let stored = try self.storeMessagePage(
                    page.messages, scope, load: load, touched: watch.touchedMessages, from: low, through: high,
                    reachesOldest: !page.hasPrev, reachesNewest: live)
                return StartPage(
                    stored: stored, low: low, high: high, hasPrevious: page.hasPrev,
                    hasNext: high == .newest ? false : page.hasNext, live: live)
            }))
        }
    }

    /// The server's `size` messages before `low`, stored. `done` gets them (those after the
    /// range's new low end), that low end, and whether older ones exist.
    @discardableResult
    func loadPage(
        _ scope: MessageScope, before low: MessageKey, size: Int,
        _ done: @escaping @Sendable (PageLoad, Result<(stored: StoredMessages, low: MessageKey, hasPrevious: Bool), ParleyError>) -> Void
    ) -> PageLoad {
        let path = Endpoints.messageList(
            channelURL: scope.channelURL, anchor: Self.listAnchor(low), previous: size, next: 0, filter: scope.serverQuery)
        return pageRequest(channelURL: scope.channelURL, path: path) { load, result, watch in
            done(load, Result(catching: { () throws(ParleyError) in
                let page = try ServerMessagePage(try result.get(), channelURL: scope.channelURL)
                let covered: MessageKey = page.hasPrev ? (page.keys.first ?? low) : .oldest
                var stored = StoredMessages(messages: [], confirmedLocals: [])
                if let through = low.predecessor, covered <= through {
                    stored = try self.storeMessagePage(
                        page.messages, scope, load: load, touched: watch.touchedMessages, from: covered, through: through,
                        reachesOldest: !page.hasPrev, reachesNewest: false)
                }
                return (stored, covered, page.hasPrev)
            }))
        }
    }

    /// The server's `size` messages after `high`, stored. `done` gets them, the range's new
    /// high end (`.newest` when none is newer), and whether the stream vouched for the end.
    @discardableResult
    func loadPage(
        _ scope: MessageScope, after high: MessageKey, size: Int,
        _ done: @escaping @Sendable (PageLoad, Result<(stored: StoredMessages, high: MessageKey, hasNext: Bool, live: Bool), ParleyError>) -> Void
    ) -> PageLoad {
        let path = Endpoints.messageList(
            channelURL: scope.channelURL, anchor: Self.listAnchor(high), previous: 0, next: size, filter: scope.serverQuery)
        let liveAtRequest = isStreamOpen
        return pageRequest(channelURL: scope.channelURL, path: path) { load, result, watch in
            done(load, Result(catching: { () throws(ParleyError) in
                let page = try ServerMessagePage(try result.get(), channelURL: scope.channelURL)
                let covered: MessageKey = page.hasNext ? (page.keys.last ?? high) : .newest
                let live = !page.hasNext && liveAtRequest && !watch.streamDropped && self.isStreamOpen
                var stored = StoredMessages(messages: [], confirmedLocals: [])
                if let from = high.successor, from <= covered {
                    stored = try self.storeMessagePage(
                        page.messages, scope, load: load, touched: watch.touchedMessages, from: from, through: covered,
                        reachesOldest: false, reachesNewest: live)
                }
                return (stored, covered, page.hasNext, live)
            }))
        }
    }

    /// One round of a gap check after a reconnection: what the server holds after `high` (a
    /// view showing `shown` compares it, else lists from `high`). More than `threshold - filled`:
    /// `.huge`; else the round's messages are stored.
    @discardableResult
    func checkGap(
        _ scope: MessageScope, shown: (first: MessageKey, last: MessageKey, count: Int)?, high: MessageKey,
        threshold: Int, filled: Int, liveAtRequest: Bool,
        _ done: @escaping @Sendable (PageLoad, Result<GapRound, ParleyError>) -> Void
    ) -> PageLoad {
        let limit = min(threshold, 300)
        let path: String
        let listKey: String
        if let shown {
            path = Endpoints.messageGap(
                channelURL: scope.channelURL, first: (shown.first.createdAt, shown.first.messageID),
                last: (shown.last.createdAt, shown.last.messageID), shownCount: shown.count,
                hugeGapThreshold: max(1, threshold - filled), limit: limit, filter: scope.serverQuery)
            listKey = WireField.prevMessages
        } else {
            // Nothing shown to compare: everything after the range's end is the gap.
            path = Endpoints.messageList(
                channelURL: scope.channelURL, anchor: Self.listAnchor(high), previous: 0, next: min(threshold - filled + 1, 200),
                filter: scope.serverQuery)
            listKey = WireField.messages
        }
        return pageRequest(channelURL: scope.channelURL, path: path) { load, result, watch in
            done(load, Result(catching: { () throws(ParleyError) in
                let answer = try result.get()
                let page: ServerMessagePage
                let more: Bool
                if listKey == WireField.prevMessages {
                    guard let isHuge = WireGapAnswer(answer).isHugeGap else {
                        throw ParleyError(.protocolViolation, "messages_gap: expected is_huge_gap")
                    }
                    if isHuge { return .huge }
                    more = WireGapAnswer(answer).prevHasMore ?? false
                    page = try ServerMessagePage(answer, channelURL: scope.channelURL, listKey: listKey)
                } else {
                    page = try ServerMessagePage(answer, channelURL: scope.channelURL, listKey: listKey)
                    if filled + page.messages.count > threshold { return .huge }
                    more = page.hasNext
                }
                let streamHeld = liveAtRequest && !watch.streamDropped
                let live = !more && streamHeld && self.isStreamOpen
                let from = min(page.keys.first ?? .newest, high.successor ?? .newest)
                let through: MessageKey = more ? (page.keys.last ?? high) : .newest
                var stored = StoredMessages(messages: [], confirmedLocals: [])
                if from <= through {
                    stored = try self.storeMessagePage(
                        page.messages, scope, load: load, touched: watch.touchedMessages, from: from, through: through,
                        reachesOldest: false, reachesNewest: live)
                }
                return .filled(GapFill(
                    stored: stored, from: from, through: through, count: page.messages.count, more: more, streamHeld: streamHeld,
                    live: live))
            }))
        }
    }

    /// The listing's anchor for "strictly before / after `key`".
    static func listAnchor(_ key: MessageKey) -> Endpoints.MessageListAnchor {
        if key.messageID == .max {
            // Before (T, max) is created_at <= T; after it, created_at > T.
            return .upTo(max(0, key.createdAt))
        }
        if key.messageID == .min {
            // Before (T, min) is created_at <= T - 1; after it, created_at > T - 1.
            return .upTo(key.createdAt > 0 ? key.createdAt - 1 : 0)
        }
        return .message(createdAt: key.createdAt, messageID: key.messageID)
    }

    /// Stores a server page whose range `from...through` the server vouched for: its messages
    /// (except those the feed changed while it travelled), minus cached messages of the range
    /// that match the filters but the server no longer lists (deleted unseen), and the range
    /// as a chunk. Returns the range's messages as the cache now holds them.
    private func storeMessagePage(
        _ messages: [JSONValue], _ scope: MessageScope, load: PageLoad, touched: Set<Int64>,
        from: MessageKey, through: MessageKey, reachesOldest: Bool, reachesNewest: Bool
    ) throws(ParleyError) -> StoredMessages {
        guard let writer = store.writer else { throw .invalidState("the client has no cache open") }
        var listed = Set<Int64>()
        var fresh: [JSONValue] = []
        for message in messages {
            guard let id = WireMessage(message).messageID else { continue }
            listed.insert(id)
            if !touched.contains(id) { fresh.append(message) }
        }
        let channelURL = scope.channelURL
        let filter = scope.filter
        return try writer.write(.pageLoad(load)) { transaction throws(ParleyError) -> StoredMessages in
            try transaction.storeMessages(fresh)
            var now = try transaction.cache.messages(channelURL: channelURL, from: from, through: through, filter: filter)
            let stale = now.filter { !listed.contains($0.messageID) && !touched.contains($0.messageID) }
            if !stale.isEmpty {
                for message in stale { try transaction.removeMessage(message.messageID) }
                // A removal can rewrite the replies it summarized: read the range as it is now.
                now = try transaction.cache.messages(channelURL: channelURL, from: from, through: through, filter: filter)
            }
            // A chunk ends at a real key: past the last message only the stream can vouch.
            let end = through == .newest ? (now.last?.key ?? from.predecessor ?? from) : through
            try transaction.addContinuousRange(
                channelURL: channelURL, scope: filter.continuityScope, from: min(from, end), to: end,
                reachesOldest: reachesOldest, reachesNewest: reachesNewest)
            var confirmed: [ConfirmedLocal] = []
            for case .messageUpserted(let upsert) in transaction.changes {
                if let reqID = upsert.replacedLocalReqID { confirmed.append(ConfirmedLocal(reqID: reqID, key: upsert.key)) }
            }
            return StoredMessages(messages: now, confirmedLocals: confirmed)
        }
    }

    // MARK: Channel list pages

    /// The cache holds the whole list of `listScope` (a walk of the server's list reached its end).
    func holdsWholeChannelList(_ listScope: String) -> Bool {
        guard let cache else { return false }
        return (try? cache.syncToken(scope: listScope)) != nil
    }

    /// Up to `limit` cached channels after `after` in `sort`'s order that `matches` keeps
    /// (a view's filters), and whether more match. Member lists are read only when
    /// `readsMembers` (to filter by them) or, as text, for the channels kept when `showsMembers`.
    func cachedChannelPage(
        sort: ChannelListSort, after: [SQLiteValue]?, limit: Int, readsMembers: Bool, showsMembers: Bool,
        matches: (JSONValue) -> Bool, sortPosition: (JSONValue) -> [SQLiteValue]
    ) throws(ParleyError) -> (channels: [(value: JSONValue, text: String)], more: Bool) {
        guard let cache else { throw .invalidState("the client is disconnected from its cache") }
        var position = after
        var result: [(value: JSONValue, text: String)] = []
        let batch = max(limit * 2, 50)
        while true {
            let rows = try cache.channels(sort: sort, after: position, limit: batch, withMembers: readsMembers)
            var last: JSONValue?
            for row in rows {
                last = try? JSONValue.parse(row.json)
                guard let channel = last, matches(channel) else { continue }
                if result.count == limit { return (result, true) }
                let text = showsMembers ? try cache.channel(url: row.channelURL)?.json ?? row.json : row.json
                result.append((channel, text))
            }
            guard rows.count == batch, let last else { return (result, false) }
            position = sortPosition(last)
        }
    }

    /// A page of the user's channel list (`token` nil: the first), stored except the channels
    /// the feed changed while it travelled. A last page records `listScope` (when given: the
    /// list was walked from its first page) as the whole list.
    @discardableResult
    func loadChannelPage(
        userID: String, query: String, limit: Int, token: String?, completesScope listScope: String?,
        _ done: @escaping @Sendable (PageLoad, Result<(page: StoredChannelPage, touched: Set<String>), ParleyError>) -> Void
    ) -> PageLoad {
        let path = Endpoints.myChannels(userID: userID, query: query, limit: limit, token: token)
        return pageRequest(channelURL: nil, path: path) { load, result, watch in
            done(load, Result(catching: { () throws(ParleyError) in
                let answer = try result.get()
                let page = WireChannelListPage(answer)
                guard let list = page.channels, let next = page.next else {
                    throw ParleyError(.protocolViolation, "channel list: expected channels and next")
                }
                var urls: [String] = []
                for channel in list {
                    guard let url = WireChannel(channel).channelURL, !url.isEmpty else {
                        throw ParleyError(.protocolViolation, "channel list: a channel without channel_url")
                    }
                    urls.append(url)
                }
                let touched = watch.touchedChannels
                if watch.cleared {
                    // Not stored: the view that asked drops it and loads its first page again.
                    return (StoredChannelPage(urls: urls, stored: [:], lastListed: list.last, next: next), touched)
                }
                guard let writer = self.store.writer else { throw .invalidState("the client has no cache open") }
                let stored = try writer.write(.pageLoad(load)) { transaction throws(ParleyError) -> [String: CachedChannel] in
                    var stored: [String: CachedChannel] = [:]
                    for (channel, url) in zip(list, urls) where !touched.contains(url) {
                        try transaction.storeChannel(channel)
                    }
                    if next.isEmpty, let listScope { try transaction.setSyncToken("1", scope: listScope) }
                    for url in urls { stored[url] = try transaction.cache.channel(url: url) }
                    return stored
                }
                return (StoredChannelPage(urls: urls, stored: stored, lastListed: list.last, next: next), touched)
            }))
        }
    }
}
