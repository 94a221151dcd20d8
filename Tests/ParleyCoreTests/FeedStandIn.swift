import Dispatch

@testable import ParleyCore

/// What every view stand-in shares (ChannelViewLogicTests, MessageViewLogicTests): the queue
/// the view runs on, a change feed the test publishes on, and a cache of user "alice". The
/// subclasses script the session's state and the pages.
class FeedStandIn: @unchecked Sendable {
    let queue: DispatchQueue
    let feed = ChangeFeed()

    private let queueKey = DispatchSpecificKey<UInt8>()

    init(label: String) {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: queueKey, value: 1)
    }

    /// Inline when already on the queue, as the engine's (a view released by a block on the
    /// queue disposes itself from there).
    func runNow<T>(_ body: () -> T) -> T {
        DispatchQueue.getSpecific(key: queueKey) != nil ? body() : queue.sync(execute: body)
    }
    var hasCache: Bool { true }
    var cacheUserID: String? { "alice" }
    func subscribe(_ observer: @escaping ChangeFeed.Observer) -> UInt64 { feed.subscribe(observer) }
    func subscribe(channelURL: String, _ observer: @escaping ChangeFeed.Observer) -> UInt64 {
        feed.subscribe(channelURL: channelURL, observer)
    }
    func unsubscribe(_ id: UInt64) { feed.unsubscribe(id) }
}
