import Dispatch
import Glibc
import Testing

@testable import ParleyCore

/// Freshness without the network: the one rule (`ViewFreshness.derive`), the tracker that
/// follows the session's side from the feed and reports only real changes, and a message view
/// over the scripted stand-in (MessageViewLogicTests.swift) through a drop and a catch-up.
@Suite struct ViewFreshnessTests {
    private static let open = FreshnessLink(streamOpen: true, catchingUp: false)
    private static let catchingUp = FreshnessLink(streamOpen: true, catchingUp: true)

    @Test func theSessionsSideWinsThenTheViewsOwn() {
        for followUp in [false, true] {
            for confirmed in [false, true] {
                // No stream: offline, whatever the view did; a catch-up without a stream too.
                #expect(ViewFreshness.derive(.offline, followUp: followUp, confirmed: confirmed) == .offline)
                #expect(ViewFreshness.derive(FreshnessLink(streamOpen: false, catchingUp: true), followUp: followUp, confirmed: confirmed)
                    == .offline)
                #expect(ViewFreshness.derive(Self.catchingUp, followUp: followUp, confirmed: confirmed) == .catchingUp)
            }
        }
        #expect(ViewFreshness.derive(Self.open, followUp: true, confirmed: true) == .catchingUp)
        #expect(ViewFreshness.derive(Self.open, followUp: false, confirmed: false) == .cached)
        #expect(ViewFreshness.derive(Self.open, followUp: false, confirmed: true) == .live)
        #expect(ViewFreshness.allCases.map(\.rawValue) == [1, 2, 3, 4])
        #expect(PageOrigin.server.combined(with: .server) == .server)
        #expect(PageOrigin.server.combined(with: .cache) == .cache && PageOrigin.cache.combined(with: .server) == .cache)
    }

    @Test func theTrackerFollowsTheFeedAndReportsOnlyChanges() {
        let tracker = FreshnessTracker()
        #expect(tracker.current == .offline && tracker.published == .offline)
        // Started where the view subscribes: the session's side then.
        tracker.start(link: FreshnessLink(streamOpen: true, catchingUp: false))
        #expect(tracker.current == .cached && tracker.published == .cached)
        tracker.start(link: .offline)
        let delivered = Box<[ViewFreshness]>([])
        func step(_ cause: ChangeCause?, followUp: Bool = false, confirmed: Bool = true) {
            if let cause { tracker.observe(ChangeBatch(sequence: 0, cause: cause, changes: [])) }
            tracker.update(followUp: followUp, confirmed: confirmed, deliver: { job in job() }, report: { value in
                delivered.update { $0.append(value) }
            })
        }
        // The engine announces the catch-up before it publishes the open stream: no live in between.
        step(.catchUpStarted)
        step(.connectivityChanged(streamOpen: true))
        step(.realtime(RealtimeEvent(id: 1, category: nil, name: "x", data: .null, channelURL: "", isOwnEcho: false)))
        step(.catchUpFinished, followUp: true)
        step(nil, followUp: true)
        step(nil)
        step(nil)
        step(.connectivityChanged(streamOpen: false))
        step(.connectivityChanged(streamOpen: false))
        step(.catchUpStarted)
        step(.connectivityChanged(streamOpen: true))
        step(.catchUpFinished, confirmed: false)
        #expect(delivered.value == [.catchingUp, .live, .offline, .catchingUp, .cached])
        #expect(tracker.published == .cached)
    }

    /// A message view over the stand-in, recording its freshness changes and reading the getter
    /// inside each.
    final class Harness: Sendable {
        let context = PagingStandIn()
        let dispatcher: CallbackDispatcher
        let seen = Box<[ViewFreshness]>([])
        let getterAgreed = Box(true)
        let collection: MessageCollection
        /// The handler reads the view through it: emptied at the end, or the two hold each other.
        let holder = Box<MessageCollection?>(nil)

        init() throws {
            context.server = (1...Int64(30)).map { PagingStandIn.message($0, "m\($0)") }
            dispatcher = try CallbackDispatcher(mode: .thread)
            var params = MessageListParams()
            params.previousResultSize = 10
            let seen = self.seen
            let agreed = self.getterAgreed
            let holder = self.holder
            collection = try MessageCollection(
                context: context, dispatcher: dispatcher, outbox: WeakSender(nil), channelURL: "room",
                startingPoint: MessageCollection.newestStartingPoint, params: params,
                handler: MessageCollectionHandler(freshnessChanged: { freshness in
                    if let view = holder.value, view.freshness != freshness { agreed.update { $0 = false } }
                    seen.update { $0.append(freshness) }
                }))
            holder.update { $0 = collection }
        }

        func settle() {
            let done = Box(false)
            let dispatcher = self.dispatcher
            context.queue.async { dispatcher.enqueue { done.update { $0 = true } } }
            _ = engineWaitUntil { done.value }
        }

        deinit {
            collection.dispose()
            dispatcher.close()
            holder.update { $0 = nil }
        }
    }

    @Test func aMessageViewIsLiveOnlyOnceItsGapCheckEnded() throws {
        let harness = try Harness()
        let context = harness.context
        let view = harness.collection
        // Nothing loaded yet: cached (nothing confirmed), not live.
        #expect(view.freshness == .cached)
        let origins = Box<[PageOrigin?]>([])
        let done = Box(0)
        view.start(
            cacheResult: { _ in origins.update { $0.append(view.lastLoadOrigin) } },
            apiResult: { _ in
                origins.update { $0.append(view.lastLoadOrigin) }
                // Reported before the completion: the getter already says so.
                done.update { $0 += view.freshness == .live ? 1 : 100 }
            })
        _ = engineWaitUntil { done.value > 0 }
        #expect(done.value == 1)
        #expect(origins.value == [.cache, .server])
        let older = Box<PageOrigin??>(nil)
        view.loadPrevious { _ in older.update { $0 = .some(view.lastLoadOrigin) } }
        _ = engineWaitUntil { older.value != nil }
        #expect(older.value == .some(.server))

        // The stream drops: offline before the view stops at its last message.
        context.publish(.connectivityChanged(streamOpen: false), [])
        context.publish(.connectionLost, [.newestEndUnknown(channelURL: nil)])
        harness.settle()
        #expect(view.freshness == .offline)
        // Back: catching up through the catch-up and the gap check after it, then live.
        context.runNow { context.holdAnswers = true }
        context.publish(.catchUpStarted, [])
        context.publish(.connectivityChanged(streamOpen: true), [])
        context.publish(.catchUpFinished, [])
        _ = engineWaitUntil { context.runNow { context.calls.contains("gap") } }
        harness.settle()
        #expect(view.freshness == .catchingUp)
        context.release()
        _ = engineWaitUntil { view.freshness == .live }
        harness.settle()
        #expect(harness.seen.value == [.live, .offline, .catchingUp, .live])
        #expect(harness.getterAgreed.value)

        // Disposed: nothing more is reported.
        view.dispose()
        context.publish(.connectivityChanged(streamOpen: false), [])
        harness.settle()
        #expect(harness.seen.value == [.live, .offline, .catchingUp, .live])
    }
}
