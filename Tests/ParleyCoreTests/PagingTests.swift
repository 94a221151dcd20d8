import Glibc
import Testing

@testable import ParleyCore

/// Sync's paging used directly, without a view, against the real server: each page it stores
/// equals the server's listing, chunks prove what the cache can serve alone, the gap check
/// tells a huge gap from a fill, and what the feed changes while a load travels is kept.
@Suite(.serialized) struct PagingTests {
    /// A server with alice and bob in "room" holding `count` messages, and alice connected.
    final class Fixture: Sendable {
        let server: EngineTestServer
        let admin: ParleyClient
        let client: ParleyClient
        var engine: Engine { client.syncEngine }
        let scope = MessageScope(channelURL: "room", filter: MessageFilter(), serverQuery: "")

        init(count: Int) throws {
            server = try EngineTestServer()
            admin = try server.adminClient()
            let tokens = try server.createUsers(["alice", "bob"], admin: admin)
            _ = try waitFor { [admin] done throws(ParleyError) in
                try admin.request(
                    method: "POST", path: "/v3/group_channels", body: ["user_ids": ["alice", "bob"], "channel_url": "room"], completion: done)
            }
            var configuration = ClientConfiguration()
            configuration.serverURL = server.url
            configuration.cacheDirectory = server.directory + "/cache"
            client = try ParleyClient(configuration: configuration)
            try send(count, from: 0)
            _ = try waitFor { [client] done throws(ParleyError) in
                try client.connect(userID: "alice", sessionToken: tokens["alice"] ?? "", completion: done)
            }
            _ = engineWaitUntil { client.syncEngine.runNow { client.syncEngine.isStreamOpen } }
        }

        func send(_ count: Int, from first: Int) throws {
            for index in first..<(first + count) {
                _ = try waitFor { [admin] done throws(ParleyError) in
                    try admin.request(
                        method: "POST", path: "/v3/group_channels/room/messages",
                        body: ["message_type": "MESG", "user_id": "bob", "message": .string("m\(index)")], completion: done)
                }
            }
        }

        /// The server's own listing of the channel for alice, oldest first (message ids).
        func serverListing() throws -> [Int64] {
            let answer = try waitFor { [admin] done throws(ParleyError) in
                try admin.request(
                    method: "GET", path: "/v3/group_channels/room/messages?message_ts=9999999999999&prev_limit=200&next_limit=0&include=true",
                    body: nil, completion: done)
            }
            return (answer["messages"]?.arrayValue ?? []).compactMap { $0["message_id"]?.int64Value }
        }

        /// The cache's copy of a message, field by field as the server sent it.
        func cachedJSON(_ id: Int64) -> JSONValue? {
            engine.runNow { (try? engine.cache?.message(id: id)).flatMap { $0 }.flatMap { try? JSONValue.parse($0.json) } }
        }

        /// Starts a paging call on the engine queue and waits for its result.
        func run<T: Sendable>(
            _ start: @escaping @Sendable (Engine, @escaping @Sendable (PageLoad, Result<T, ParleyError>) -> Void) -> PageLoad
        ) throws -> (PageLoad, T) {
            let outcome = Box<(PageLoad, Result<T, ParleyError>)?>(nil)
            let engine = self.engine
            engine.queue.async { _ = start(engine) { load, result in outcome.update { $0 = (load, result) } } }
            guard engineWaitUntil({ outcome.value != nil }), let (load, result) = outcome.value else {
                throw ParleyError(.timeout, "no page")
            }
            return (load, try result.get())
        }

        deinit {
            client.close()
            admin.close()
            server.stop()
        }
    }

    @Test func pagesBackToTheOldestEqualTheServerListingAndTheCacheThenServesThem() throws {
        let fixture = try Fixture(count: 45)
        let scope = fixture.scope
        let truth = try fixture.serverListing()
        #expect(truth.count == 45)

        // The newest page: its range reaches the newest end, vouched for by the open stream.
        let (_, start) = try fixture.run { engine, done in engine.loadStartPage(scope, anchorTime: nil, extraAtAnchor: false, previous: 20, next: 0, done) }
        #expect(start.stored.messages.map(\.messageID) == Array(truth.suffix(20)))
        #expect(start.high == .newest && start.live && !start.hasNext && start.hasPrevious)
        #expect(start.low == start.stored.messages.first?.key)

        // Back to the oldest: every page continues the last one, and the whole equals the listing.
        var low = start.low
        var walked = start.stored.messages.map(\.messageID)
        var hasPrevious = true
        while hasPrevious {
            let before = low
            let (_, page) = try fixture.run { engine, done in engine.loadPage(scope, before: before, size: 20, done) }
            #expect(page.stored.messages.allSatisfy { $0.key < before })
            walked = page.stored.messages.map(\.messageID) + walked
            low = page.low
            hasPrevious = page.hasPrevious
        }
        #expect(low == .oldest)
        #expect(walked == truth)
        for id in truth {
            let cached = fixture.cachedJSON(id)
            #expect(cached?["message_id"]?.int64Value == id && cached?["message"]?.stringValue?.hasPrefix("m") == true)
        }

        // Now the cache alone serves every page, proven by its chunk; the oldest one says so.
        let engine = fixture.engine
        let newest = try engine.sync { () throws(ParleyError) in try engine.cachedStart(scope, anchor: nil, extraAtAnchor: false, previous: 20, next: 0) }
        #expect(newest.messages.map(\.messageID) == Array(truth.suffix(20)) && !newest.reachesOldest)
        var cachedLow = try #require(newest.messages.first?.key)
        var cachedWalk = newest.messages.map(\.messageID)
        var more = true
        while more {
            let from = cachedLow
            guard let page = engine.runNow({ engine.cachedPage(scope, before: from, size: 20) }) else {
                Issue.record("the cache did not serve a page it holds")
                break
            }
            cachedWalk = page.messages.map(\.messageID) + cachedWalk
            cachedLow = page.messages.first?.key ?? cachedLow
            more = page.more
        }
        #expect(cachedWalk == truth)
        let start2 = try engine.sync { () throws(ParleyError) in try engine.cachedStart(scope, anchor: nil, extraAtAnchor: false, previous: 50, next: 0) }
        #expect(start2.messages.map(\.messageID) == truth && start2.reachesOldest)
    }

    @Test func aCacheWithoutAChunkDoesNotServeAPage() throws {
        let fixture = try Fixture(count: 5)
        let scope = fixture.scope
        let engine = fixture.engine
        // Nothing was listed yet: the cache cannot prove it holds the channel's messages.
        #expect(engine.runNow { engine.cachedPage(scope, before: .newest, size: 20) } == nil)
        #expect(engine.runNow { engine.cachedPage(scope, after: .oldest, size: 20, mayReachNewest: true) } == nil)
        // After a page from the start: the newest end is served while the stream vouches for it.
        let (_, start) = try fixture.run { engine, done in engine.loadStartPage(scope, anchorTime: nil, extraAtAnchor: false, previous: 20, next: 0, done) }
        #expect(start.low == .oldest && !start.hasPrevious)
        let first = try #require(start.stored.messages.first?.key)
        let after = engine.runNow { engine.cachedPage(scope, after: first, size: 20, mayReachNewest: true) }
        #expect(after?.messages.map(\.messageID) == Array(start.stored.messages.dropFirst().map(\.messageID)))
        #expect(after?.more == false)
        // A catch-up running (mayReachNewest false): the end is not vouched for.
        #expect(engine.runNow { engine.cachedPage(scope, after: first, size: 20, mayReachNewest: false) } == nil)
    }

    @Test func theLoadsOwnWriteNamesItAndWhatTheFeedChangedMeanwhileIsKept() throws {
        let fixture = try Fixture(count: 12)
        let scope = fixture.scope
        let engine = fixture.engine
        let truth = try fixture.serverListing()
        _ = try fixture.run { engine, done in engine.loadStartPage(scope, anchorTime: nil, extraAtAnchor: false, previous: 20, next: 0, done) }
        let causes = Box<[ChangeCause]>([])
        engine.runNow { _ = engine.feed.subscribe { batch in causes.update { $0.append(batch.cause) } } }

        // While the second page travels, the feed removes one of its messages and edits
        // another: the page's older copies must not put them back.
        let removedID = truth[3]
        let changedID = truth[5]
        var edited = try #require(fixture.cachedJSON(changedID))
        if case .object(var fields) = edited {
            fields["message"] = "edited meanwhile"
            // A later edit than the server's copy the page brings (the cache keeps the later).
            fields["updated_at"] = .int((fields["updated_at"]?.int64Value ?? 0) + 1_000)
            edited = .object(fields)
        }
        let editedCopy = edited
        let outcome = Box<(PageLoad, Result<StartPage, ParleyError>)?>(nil)
        engine.queue.async {
            _ = engine.loadStartPage(scope, anchorTime: nil, extraAtAnchor: false, previous: 20, next: 0) { load, result in outcome.update { $0 = (load, result) } }
            // Still on the queue: the answer cannot have been handled yet.
            engine.write(.operation("test_change"), "changes during the load") { transaction throws(ParleyError) in
                try transaction.storeMessages([editedCopy])
                try transaction.removeMessage(removedID)
            }
        }
        guard engineWaitUntil({ outcome.value != nil }), let (load, result) = outcome.value else {
            throw ParleyError(.timeout, "no page")
        }
        let page = try result.get()
        #expect(fixture.cachedJSON(changedID)?["message"]?.stringValue == "edited meanwhile")
        #expect(fixture.cachedJSON(removedID) == nil)
        #expect(page.stored.messages.first { $0.messageID == changedID }.map { $0.json.contains("edited meanwhile") } == true)
        #expect(page.stored.messages.map(\.messageID) == truth.filter { $0 != removedID })
        // The page's own write is published with a cause naming this load.
        let named = causes.value.contains { if case .pageLoad(let other) = $0 { other == load } else { false } }
        #expect(named)

        // A third load with nothing changed meanwhile brings the removed message back (the
        // server still lists it); the edit stays, being later than the server's copy.
        let (_, again) = try fixture.run { engine, done in engine.loadStartPage(scope, anchorTime: nil, extraAtAnchor: false, previous: 20, next: 0, done) }
        #expect(again.stored.messages.map(\.messageID) == truth)
        #expect(fixture.cachedJSON(removedID)?["message"]?.stringValue == "m3")
        #expect(fixture.cachedJSON(changedID)?["message"]?.stringValue == "edited meanwhile")
    }

    @Test func aGapCheckTellsAHugeGapFromAFillAndTheFillEqualsTheServer() throws {
        let fixture = try Fixture(count: 10)
        let scope = fixture.scope
        let (_, start) = try fixture.run { engine, done in engine.loadStartPage(scope, anchorTime: nil, extraAtAnchor: false, previous: 20, next: 0, done) }
        let first = try #require(start.stored.messages.first?.key)
        let last = try #require(start.stored.messages.last?.key)
        try fixture.send(6, from: 10)
        let truth = try fixture.serverListing()
        #expect(truth.count == 16)

        // A threshold below what was missed: huge, nothing stored.
        let (_, huge) = try fixture.run { engine, done in
            engine.checkGap(scope, shown: (first, last, 10), high: last, threshold: 3, filled: 0, liveAtRequest: true, done)
        }
        guard case .huge = huge else {
            Issue.record("expected a huge gap, got \(huge)")
            return
        }
        // Above it: the six new messages, stored, reaching the newest end with the stream open.
        let (_, round) = try fixture.run { engine, done in
            engine.checkGap(scope, shown: (first, last, 10), high: last, threshold: 100, filled: 0, liveAtRequest: true, done)
        }
        guard case .filled(let fill) = round else {
            Issue.record("expected a fill, got \(round)")
            return
        }
        #expect(!fill.more && fill.live && fill.through == .newest && fill.count == 6)
        #expect(fill.stored.messages.filter { $0.key > last }.map(\.messageID) == Array(truth.suffix(6)))
        for id in truth.suffix(6) { #expect(fixture.cachedJSON(id)?["message_id"]?.int64Value == id) }
    }
}
