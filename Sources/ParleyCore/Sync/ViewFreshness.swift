// Freshness: whether what a view shows is live or may be stale, and where a page came from.
//
// Design note. A view's freshness has two sides:
// - the session's, the same for every view: whether the event stream is open (as the engine
//   queue applied it: `Engine.session.linkOpen`, not the stream's own state, which runs
//   ahead of what was applied) and whether a catch-up (replayed events, changelogs) runs.
//   The engine publishes both as empty batches on the change feed (`connectivityChanged`,
//   `catchUpStarted`, `catchUpFinished`), so a view learns them in commit order, between the
//   changes they frame;
// - the view's own: whether it still runs its part of the catch-up (`followUp`: a message
//   view's gap check, channel refresh or the server's page a start could not get; a channel
//   view's first page it could not get from the server), and whether the server confirmed
//   what it shows (`confirmed`) since it was created.
// `ViewFreshness.derive` combines them; `FreshnessTracker` is what a view holds: it follows
// the session's side from the feed and reports each real change once, through the view's own
// delivery (so on the callback context, in order with the view's other callbacks, never
// after dispose). A new view adopts it in a few lines: hand it to `ViewContext.attach` (Sync/
// MessageViewContext.swift) where the view subscribes, call `observe` for every batch, and
// `update` after every step that may change its own side.

/// Whether a view's content is live or possibly stale (`PARLEY_FRESHNESS_*`).
public enum ViewFreshness: Int32, Sendable, CaseIterable {
    /// The stream is open, the catch-up is over, and the server confirmed what the view shows.
    case live = 1
    /// The stream is open and caught up, but the view shows what the cache held and the server
    /// has not confirmed yet (also a view that has loaded nothing yet).
    case cached = 2
    /// The stream is open and the catch-up (changelogs after a (re)connection), or the view's
    /// own part of it, still runs.
    case catchingUp = 3
    /// No event stream (disconnected, the server unreachable, reconnecting): changes may be
    /// missed until it is back.
    case offline = 4

    /// Stable lower-case name: the constant's suffix (`PARLEY_FRESHNESS_CATCHING_UP` is
    /// "catching_up"), as the bindings name it.
    public var name: String {
        switch self {
        case .live: "live"
        case .cached: "cached"
        case .catchingUp: "catching_up"
        case .offline: "offline"
        }
    }

    /// The one rule. The session's side wins: without the stream nothing is live, and while
    /// the catch-up runs what the view shows may still change because of what was missed.
    static func derive(_ link: FreshnessLink, followUp: Bool, confirmed: Bool) -> ViewFreshness {
        guard link.streamOpen else { return .offline }
        if link.catchingUp || followUp { return .catchingUp }
        return confirmed ? .live : .cached
    }
}

/// Where a load's result came from (`PARLEY_PAGE_ORIGIN_*`).
public enum PageOrigin: Int32, Sendable, CaseIterable {
    /// Read from the cache (or nothing to read: past the end), not from the server by this load.
    case cache = 1
    /// The server's answer to this load vouched for the whole result (the messages or channels
    /// as the cache holds them once it stored the answer; this client's own unsent messages
    /// ride along).
    case server = 2

    /// Several pages given as one result: the server's only when it gave each of them.
    func combined(with other: PageOrigin) -> PageOrigin {
        self == .server && other == .server ? .server : .cache
    }
}

/// The session's side of every view's freshness.
struct FreshnessLink: Sendable, Equatable {
    /// The engine queue applied the stream's `connected` and no drop since.
    var streamOpen: Bool
    /// `catchUpStarted` was published and `catchUpFinished` was not yet.
    var catchingUp: Bool

    static let offline = FreshnessLink(streamOpen: false, catchingUp: false)
}

/// One view's freshness, on the engine queue; `published` is the value as the callbacks
/// delivered so far left it (any thread).
final class FreshnessTracker: @unchecked Sendable {
    private var link: FreshnessLink
    /// Engine queue: the value last derived (and queued for the application).
    private(set) var current: ViewFreshness
    private let publishedValue: Locked<ViewFreshness>

    /// Made with the view (offline until `start`). A view starts unconfirmed.
    init() {
        link = .offline
        current = ViewFreshness.derive(.offline, followUp: false, confirmed: false)
        publishedValue = Locked(current)
    }

    /// Engine queue, in the same block where the view subscribes to the feed (so that no
    /// batch falls between the read and the subscription), before the view's init returns.
    func start(link: FreshnessLink) {
        self.link = link
        current = ViewFreshness.derive(link, followUp: false, confirmed: false)
        let current = self.current
        publishedValue.withLock { $0 = current }
    }

    /// The value as of the callbacks delivered so far.
    var published: ViewFreshness { publishedValue.withLock { $0 } }

    /// Engine queue: follows the session's side from a batch (every batch may be given).
    func observe(_ batch: ChangeBatch) {
        switch batch.cause {
        case .connectivityChanged(let open): link.streamOpen = open
        case .catchUpStarted: link.catchingUp = true
        case .catchUpFinished: link.catchingUp = false
        default: break
        }
    }

    /// Engine queue: derives the value with the view's side; when it changed, `deliver` gets
    /// the job that publishes it and calls `report` (the view queues it on the callback
    /// context behind its other callbacks, skipped once disposed).
    func update(
        followUp: Bool, confirmed: Bool, deliver: (@escaping @Sendable () -> Void) -> Void,
        report: @escaping @Sendable (ViewFreshness) -> Void
    ) {
        let next = ViewFreshness.derive(link, followUp: followUp, confirmed: confirmed)
        guard next != current else { return }
        current = next
        let publishedValue = self.publishedValue
        deliver {
            publishedValue.withLock { $0 = next }
            report(next)
        }
    }
}
