import Dispatch
import Glibc
import Testing

@testable import ParleyCore

/// A stand-in for what a message view reaches below itself (MessageViewContext): it serves
/// pages from a scripted list of one channel's messages, with exact end flags, and publishes
/// what the test hands it on its own change feed. Only the view's logic is under test here;
/// Paging against the real server is PagingTests.
final class PagingStandIn: FeedStandIn, MessageViewContext, @unchecked Sendable {
    /// The channel's messages on the "server", in key order. Guarded by `queue`.
    var server: [CachedMessage] = []
    var locals: [CachedLocalMessage] = []
    var streamOpen = true
    /// Local messages the next server page reports as confirmed by it.
    var confirmNext: [ConfirmedLocal] = []
    /// The next gap check's answer.
    var gapAnswer: GapRound = .huge
    /// Calls made, in order (by name).
    var calls: [String] = []
    /// Answers held back until `release` (to publish batches while a load travels).
    var holdAnswers = false
    private var held: [@Sendable () -> Void] = []
    private var nextLoad: UInt64 = 0

    init() { super.init(label: "test.view-context") }

    func log(_ level: LogLevel, _ message: String) {}
    var isConnected: Bool { true }
    var isStreamOpen: Bool { streamOpen }
    func retainChannel(_ channelURL: String) { calls.append("retain") }
    func releaseChannel(_ channelURL: String) { calls.append("release") }
    func cachedChannelText(_ channelURL: String) -> JSONText? { JSONText(#"{"channel_url":"room"}"#) }
    func refreshChannel(_ channelURL: String, then done: @escaping @Sendable () -> Void) { queue.async { done() } }

    /// The cache holds nothing provably: every page comes from the "server".
    func cachedStart(
        _ scope: MessageScope, anchor: MessageKey?, extraAtAnchor: Bool, previous: Int, next: Int
    ) throws(ParleyError) -> CachedStart {
        CachedStart(messages: [], locals: locals, reachesOldest: false)
    }
    func cachedPage(_ scope: MessageScope, before low: MessageKey, size: Int) -> CachedPage? { nil }
    func cachedPage(_ scope: MessageScope, after high: MessageKey, size: Int, mayReachNewest: Bool) -> CachedPage? { nil }

    private func answer(_ name: String, _ deliver: @escaping @Sendable (PageLoad) -> Void) -> PageLoad {
        nextLoad += 1
        let load = PageLoad(id: nextLoad)
        calls.append(name)
        let job: @Sendable () -> Void = { deliver(load) }
        if holdAnswers { held.append(job) } else { queue.async(execute: job) }
        return load
    }

    /// Sends the answers held back (on the queue).
    func release() {
        queue.async {
            let jobs = self.held
            self.held = []
            self.holdAnswers = false
            for job in jobs { job() }
        }
    }

    private func takeConfirmed() -> [ConfirmedLocal] {
        defer { confirmNext = [] }
        return confirmNext
    }

    func loadStartPage(
        _ scope: MessageScope, anchorTime: Int64?, extraAtAnchor: Bool, previous: Int, next requestedNext: Int,
        _ done: @escaping @Sendable (PageLoad, Result<StartPage, ParleyError>) -> Void
    ) -> PageLoad {
        answer("start") { load in
            let page = Array(self.server.suffix(previous))
            let hasPrevious = self.server.count > previous
            done(load, .success(StartPage(
                stored: StoredMessages(messages: page, confirmedLocals: self.takeConfirmed()),
                low: hasPrevious ? (page.first?.key ?? .newest) : .oldest, high: .newest, hasPrevious: hasPrevious, hasNext: false,
                live: self.streamOpen)))
        }
    }

    func loadPage(
        _ scope: MessageScope, before low: MessageKey, size: Int,
        _ done: @escaping @Sendable (PageLoad, Result<(stored: StoredMessages, low: MessageKey, hasPrevious: Bool), ParleyError>) -> Void
    ) -> PageLoad {
        answer("previous") { load in
            let older = self.server.filter { $0.key < low }
            let page = Array(older.suffix(size))
            let hasPrevious = older.count > size
            done(load, .success((StoredMessages(messages: page, confirmedLocals: self.takeConfirmed()),
                                 hasPrevious ? (page.first?.key ?? low) : .oldest, hasPrevious)))
        }
    }

    func loadPage(
        _ scope: MessageScope, after high: MessageKey, size: Int,
        _ done: @escaping @Sendable (PageLoad, Result<(stored: StoredMessages, high: MessageKey, hasNext: Bool, live: Bool), ParleyError>) -> Void
    ) -> PageLoad {
        answer("next") { load in
            let newer = self.server.filter { $0.key > high }
            let page = Array(newer.prefix(size))
            let hasNext = newer.count > size
            done(load, .success((StoredMessages(messages: page, confirmedLocals: self.takeConfirmed()),
                                 hasNext ? (page.last?.key ?? high) : .newest, hasNext, !hasNext && self.streamOpen)))
        }
    }

    func checkGap(
        _ scope: MessageScope, shown: (first: MessageKey, last: MessageKey, count: Int)?, high: MessageKey,
        threshold: Int, filled: Int, liveAtRequest: Bool,
        _ done: @escaping @Sendable (PageLoad, Result<GapRound, ParleyError>) -> Void
    ) -> PageLoad {
        answer("gap") { load in done(load, .success(self.gapAnswer)) }
    }

    /// Publishes a batch on the feed (on the queue), as the cache writer would.
    func publish(_ cause: ChangeCause, _ changes: [CacheChange]) {
        queue.sync { feed.publish(cause: cause, changes: changes) }
    }

    static func message(_ id: Int64, _ text: String, reqID: String = "") -> CachedMessage {
        let json = JSONValue.object([
            "message_id": .int(id), "channel_url": "room", "created_at": .int(1_000 + id), "updated_at": .int(0),
            "type": "MESG", "message": .string(text), "req_id": .string(reqID), "user": ["user_id": "bob"],
        ])
        return CachedMessage(messageID: id, channelURL: "room", createdAt: 1_000 + id, updatedAt: 0, reqID: reqID, json: json.canonicalText)
    }
}

@Suite(.serialized) struct MessageViewLogicTests {
    struct Reported: Sendable {
        var kind: String
        var source: CollectionEventSource
        var status: MessageSendingStatus
        var texts: [String]
    }

    final class Harness: Sendable {
        let context = PagingStandIn()
        let dispatcher: CallbackDispatcher
        let reported = Box<[Reported]>([])
        let hugeGaps = Box(0)
        let collection: MessageCollection

        init(serverCount: Int, pageSize: Int = 10, fillsGaps: Bool = true, prepare: (PagingStandIn) -> Void = { _ in }) throws {
            context.server = (1...Int64(serverCount)).map { PagingStandIn.message($0, "m\($0)") }
            prepare(context)
            dispatcher = try CallbackDispatcher(mode: .thread)
            var params = MessageListParams()
            params.previousResultSize = pageSize
            let reported = self.reported
            let hugeGaps = self.hugeGaps
            func record(_ kind: String) -> @Sendable (MessageEventContext, JSONText, MessageList) -> Void {
                { context, _, list in
                    reported.update {
                        $0.append(Reported(kind: kind, source: context.source, status: context.sendingStatus,
                                           texts: list.items.map { $0.value["message"]?.stringValue ?? "" }))
                    }
                }
            }
            collection = try MessageCollection(
                context: context, dispatcher: dispatcher, outbox: WeakSender(nil), channelURL: "room",
                startingPoint: MessageCollection.newestStartingPoint, params: params,
                handler: MessageCollectionHandler(
                    added: record("added"), updated: record("updated"), deleted: record("deleted"),
                    hugeGapDetected: { hugeGaps.update { $0 += 1 } }),
                fillsGapsByItself: fillsGaps)
        }

        func start() throws -> [String] {
            let outcome = Box<Result<MessageList, ParleyError>?>(nil)
            collection.start(cacheResult: { _ in }, apiResult: { result in outcome.update { $0 = result } })
            guard engineWaitUntil({ outcome.value != nil }), let result = outcome.value else { throw ParleyError(.timeout, "no start") }
            return try result.get().items.map { $0.value["message"]?.stringValue ?? "" }
        }

        func previous() throws -> [String] {
            let outcome = Box<Result<MessageList, ParleyError>?>(nil)
            collection.loadPrevious { result in outcome.update { $0 = result } }
            guard engineWaitUntil({ outcome.value != nil }), let result = outcome.value else { throw ParleyError(.timeout, "no page") }
            return try result.get().items.map { $0.value["message"]?.stringValue ?? "" }
        }

        /// Waits until every callback queued so far ran.
        func settle() {
            let done = Box(false)
            // Not `self`: the harness must not be released last by the queue (its deinit
            // disposes the view, which waits for the queue).
            let dispatcher = self.dispatcher
            context.queue.async { dispatcher.enqueue { done.update { $0 = true } } }
            _ = engineWaitUntil { done.value }
        }

        var shown: [String] { collection.messages.map { $0["message"]?.stringValue ?? "" } }

        deinit {
            collection.dispose()
            dispatcher.close()
        }
    }

    @Test func theEndFlagsComeFromTheServerNotFromHowFullAPageIs() throws {
        // 30 messages in pages of 10: the last page is full, yet nothing is older.
        let harness = try Harness(serverCount: 30)
        #expect(try harness.start() == (21...30).map { "m\($0)" })
        #expect(harness.collection.hasPrevious)
        #expect(try harness.previous() == (11...20).map { "m\($0)" })
        #expect(harness.collection.hasPrevious)
        #expect(try harness.previous() == (1...10).map { "m\($0)" })
        #expect(!harness.collection.hasPrevious)
        // No fourth request: the view knows it reached the oldest.
        #expect(try harness.previous().isEmpty)
        #expect(harness.context.runNow { harness.context.calls.filter { $0 == "previous" }.count } == 2)
        #expect(harness.shown == (1...30).map { "m\($0)" })
        harness.settle()
        #expect(harness.reported.value.isEmpty)
    }

    @Test func theViewSkipsTheFeedsReportOfItsOwnLoadAndAppliesAnothers() throws {
        let harness = try Harness(serverCount: 20)
        _ = try harness.start()
        let context = harness.context
        // A load of this view travels while the feed reports its page: nothing is reported
        // twice, the page arrives once through the result.
        context.runNow { context.holdAnswers = true }
        let outcome = Box<Result<MessageList, ParleyError>?>(nil)
        harness.collection.loadPrevious { result in outcome.update { $0 = result } }
        _ = engineWaitUntil { context.runNow { context.calls.contains("previous") } }
        let ownLoad = PageLoad(id: 2)
        // The page's messages, and (as a start page's would) a shown one: the view takes its
        // page from the load's result, never from the feed's report of it.
        let older = context.runNow { context.server.prefix(10) } + [PagingStandIn.message(15, "own load's copy")]
        context.publish(.pageLoad(ownLoad), older.map { message in
            .messageUpserted(MessageUpsert(
                message: (try? JSONValue.parse(message.json)) ?? .null, channelURL: "room", key: message.key, inserted: true,
                extendedRange: false, replacedLocalReqID: nil))
        })
        context.release()
        _ = engineWaitUntil { outcome.value != nil }
        #expect(try outcome.value?.get().items.count == 10)
        harness.settle()
        #expect(harness.reported.value.isEmpty)

        // Another load (another view's) changes a shown message: reported as updated, api_load.
        var edited = try #require(try? JSONValue.parse(PagingStandIn.message(15, "edited").json))
        if case .object(var fields) = edited {
            fields["updated_at"] = .int(5)
            edited = .object(fields)
        }
        context.publish(.pageLoad(PageLoad(id: 99)), [.messageUpserted(MessageUpsert(
            message: edited, channelURL: "room", key: PagingStandIn.message(15, "").key, inserted: false, extendedRange: false,
            replacedLocalReqID: nil))])
        harness.settle()
        let reports = harness.reported.value
        #expect(reports.count == 1)
        #expect(reports.first?.kind == "updated" && reports.first?.source == .apiLoad && reports.first?.texts == ["edited"])
        #expect(harness.shown.count == 20 && harness.shown[14] == "edited")
    }

    @Test func aLocalMessageThePageConfirmedIsReportedAsSent() throws {
        let local = CachedLocalMessage(
            reqID: "r1", channelURL: "room", createdAt: 1_021, status: .pending, errorCode: 0, errorMessage: "",
            json: JSONValue.object([
                "message_id": 0, "req_id": "r1", "channel_url": "room", "created_at": 1_021, "message": "mine",
                "sending_status": "pending", "user": ["user_id": "alice"],
            ]).canonicalText)
        let harness = try Harness(serverCount: 21) { context in
            context.locals = [local]
            // The server's copy of the pending message is the newest one the start page brings.
            context.server[20] = PagingStandIn.message(21, "mine", reqID: "r1")
            context.confirmNext = [ConfirmedLocal(reqID: "r1", key: PagingStandIn.message(21, "").key)]
        }
        let first = try harness.start()
        harness.settle()
        // The page's copy replaced the pending one: shown once, reported as sent.
        #expect(first.filter { $0 == "mine" }.count == 1)
        #expect(harness.shown.filter { $0 == "mine" }.count == 1)
        let reports = harness.reported.value
        #expect(reports.count == 1)
        #expect(reports.first?.kind == "updated" && reports.first?.source == .messageSent && reports.first?.status == .succeeded)
        #expect(reports.first?.texts == ["mine"])
    }

    @Test func afterADropTheViewChecksTheGapOnceTheCatchUpEnds() throws {
        let harness = try Harness(serverCount: 5)
        _ = try harness.start()
        let context = harness.context
        context.runNow { context.gapAnswer = .huge }
        context.publish(.connectionLost, [.newestEndUnknown(channelURL: nil)])
        // No gap check before the catch-up ends.
        harness.settle()
        #expect(context.runNow { !context.calls.contains("gap") })
        context.publish(.catchUpStarted, [])
        context.publish(.catchUpFinished, [])
        _ = engineWaitUntil { harness.hugeGaps.value == 1 }
        #expect(harness.hugeGaps.value == 1)
        #expect(context.runNow { context.calls.filter { $0 == "gap" }.count } == 1)
        #expect(harness.collection.hasNext)
    }

    @Test func aGapFillThatBringsAShownMessageChangedReportsItUpdated() throws {
        let harness = try Harness(serverCount: 5)
        _ = try harness.start()
        let context = harness.context
        let edited = PagingStandIn.message(5, "m5 edited")
        let fill = GapFill(
            stored: StoredMessages(messages: [PagingStandIn.message(4, "m4"), edited, PagingStandIn.message(6, "m6")], confirmedLocals: []),
            from: PagingStandIn.message(4, "").key, through: PagingStandIn.message(6, "").key, count: 3, more: false,
            streamHeld: true, live: true)
        context.runNow { context.gapAnswer = .filled(fill) }
        context.publish(.connectionLost, [.newestEndUnknown(channelURL: nil)])
        context.publish(.catchUpStarted, [])
        context.publish(.catchUpFinished, [])
        _ = engineWaitUntil { harness.reported.value.count >= 2 }
        harness.settle()
        let reports = harness.reported.value
        // The unchanged m4 is not news; the edited m5 is an update, m6 an addition.
        #expect(reports.count == 2)
        #expect(reports.contains { $0.kind == "updated" && $0.source == .messageFill && $0.texts == ["m5 edited"] })
        #expect(reports.contains { $0.kind == "added" && $0.source == .messageFill && $0.texts == ["m6"] })
        #expect(harness.shown == ["m1", "m2", "m3", "m4", "m5 edited", "m6"])
    }
}
