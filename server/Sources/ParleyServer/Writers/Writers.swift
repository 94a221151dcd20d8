// How the writers of each backend run (docs/ARCHITECTURE.md "Requests and locks", "Order across
// servers"): one coordinator per backend behind `Writers`, each writer begun and ended in a
// `WriterScope`. SQLite: one writer at a time, in commit groups (SQLiteWriters.swift).
// PostgreSQL: writers side by side, in channel batches, ordered across servers by stream
// positions (PostgresWriters.swift).

/// The write coordinator of one backend: how its writers run and what lets the hub deliver
/// their events in id order. `RequestRunner` runs every write through it.
protocol Writers: Sendable {
    /// What its writers do differently from the other backend's, for every request's
    /// transaction (WriterRules.swift).
    var rules: any WriterRules { get }
    /// Starts the hub, before the port opens.
    func start() async throws
    /// Runs `body` as one writer. `channel`: the channel the request names in its path, if any;
    /// `firstReads`: what the writer's first statement may read for its handler (`FirstReads`).
    func write<T>(channel: String?, firstReads: FirstReads, _ body: (RequestState) async throws -> T) async throws -> T
    /// Makes the hub deliver what every server committed up to now (`heardAt`: after another
    /// server's announcement heard then).
    func catchUp(heardAt: ContinuousClock.Instant?) async throws
    /// Asks for a catch-up soon.
    func catchUpSoon(heardAt: ContinuousClock.Instant?)
    /// Keeps the newest `retention` events of the log, where writers do not prune it themselves.
    func pruneLog() async throws
}

/// Bounds every write coordinator keeps.
enum WriterLimits {
    /// Writers one commit covers at most (a SQLite commit group, a PostgreSQL channel batch),
    /// so that the first one's answer does not wait long.
    static let groupLimit = 16
    /// Writers waiting in queued deliveries past which a writer waits for its own.
    static let deliveryBacklog = 32
}

/// One writer, from its registration in the write order (Writers/WriteOrder.swift), before it
/// can take a number, to its end: committed, with its events handed to the hub, or failed.
struct WriterScope {
    let request: RequestState
    private let ticket: Int
    private let shared: SharedState

    /// A writer whose numbers start at `firstNumber` (SQLite: the counters' next, read under
    /// the write lock).
    init(shared: SharedState, rules: any WriterRules, firstNumber: Int64, groupChannels: GroupChannels?) {
        self.init(shared: shared, rules: rules, ticket: shared.order.beginWriter(firstNumber: firstNumber),
                  groupChannels: groupChannels)
    }

    /// A writer that takes its numbers from a sequence (PostgreSQL), or was given numbers from
    /// `givenFrom` on (read for it by the member before it in its channel batch).
    init(shared: SharedState, rules: any WriterRules, givenFrom: Int64?, groupChannels: GroupChannels?) {
        let ticket = shared.order.beginWriter(atMost: givenFrom.map { $0 - 1 } ?? .max)
        self.init(shared: shared, rules: rules, ticket: ticket, groupChannels: groupChannels)
    }

    private init(shared: SharedState, rules: any WriterRules, ticket: Int, groupChannels: GroupChannels?) {
        self.shared = shared
        self.ticket = ticket
        request = RequestState(shared: shared, rules: rules, readOnly: false)
        request.groupChannels = groupChannels
    }

    /// The writer, or its commit, failed: it leaves the write order with nothing to deliver.
    func failed() {
        _ = shared.hub.finishWriter(ticket, nil)
    }

    /// The writer committed: the push notifications it held wait for its events, which go to
    /// the hub.
    func committed() -> (changes: CommittedChanges, delivery: Delivery) {
        shared.pushHold.hold(request.heldPushes)
        let changes = request.committedChanges
        return (changes, shared.hub.finishWriter(ticket, changes))
    }

    /// A writer faster than the streams waits (holding no lock) for its events to go out, so
    /// that the hub's queue, and the finished requests it holds, stays bounded: at most
    /// `deliveryBacklog` plus one per writer in flight.
    func waitIfBacklogged(_ delivery: Delivery) async {
        if shared.hub.backlog > WriterLimits.deliveryBacklog { await delivery.wait() }
    }
}

/// The channels a commit group's or a channel batch's members wrote, as they left them
/// (`RequestState.groupChannels`). Read and written only by the member whose turn it is.
final class GroupChannels: @unchecked Sendable {
    private var entries: [String: CachedChannel] = [:]

    func entry(_ url: String) -> CachedChannel? { entries[url] }

    func keep(_ written: [(url: String, entry: CachedChannel?)]) {
        for (url, entry) in written { entries[url] = entry }
    }
}
