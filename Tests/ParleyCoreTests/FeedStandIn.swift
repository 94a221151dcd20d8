import Dispatch

@testable import ParleyCore

/// What every view stand-in shares (ChannelViewLogicTests, MessageViewLogicTests): the queue
/// the view runs on, a change feed the test publishes on, and a cache of user "alice". The
/// subclasses script the session's state and the pages.
class FeedStandIn: @unchecked Sendable {
    let queue: DispatchQueue
    let feed = ChangeFeed()

    init(label: String) { queue = DispatchQueue(label: label) }

    func runNow<T>(_ body: () -> T) -> T { queue.sync(execute: body) }
    var hasCache: Bool { true }
    var cacheUserID: String? { "alice" }
    func subscribe(_ observer: @escaping ChangeFeed.Observer) -> UInt64 { feed.subscribe(observer) }
    func subscribe(channelURL: String, _ observer: @escaping ChangeFeed.Observer) -> UInt64 {
        feed.subscribe(channelURL: channelURL, observer)
    }
    func unsubscribe(_ id: UInt64) { feed.unsubscribe(id) }
}
