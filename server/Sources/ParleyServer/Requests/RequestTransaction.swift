/// One attempt of a request at the database, which the request's stores share (Stores/): its
/// transaction, the numbers it took, and what it writes and announces as it ends. A write
/// request writes the changes of the records kept in memory (`pending`) at its end, with what
/// the stores wrote as they went, and commits before it answers; a read request (a GET) runs
/// in a read transaction beside the writers. A backend may run a transaction again: each
/// attempt has a transaction, and stores, of its own (`RequestState.startAttempt`).
final class RequestTransaction {
    let shared: SharedState
    /// How the backend's writers take numbers and what they lock and check (Writers/WriterRules.swift).
    let rules: any WriterRules
    let readOnly: Bool
    /// The attempt's transaction, until it ends.
    private var session: (any SQLSession)?
    var db: any SQLSession {
        get throws {
            guard let session else { throw APIError.internal("no transaction open") }
            return session
        }
    }
    /// A SQLite writer's copy of the counters, which become the committed ones if it commits
    /// (the ones the previous writer committed). PostgreSQL writers number from sequences.
    var counters: Counters
    /// The sequence as a SQLite writer began: the numbers it took are the ones after it.
    let seqAtStart: Int64
    /// Every sequence number up to here was resolved when the request began (read before its
    /// snapshot, so everything it covers is in the snapshot).
    let resolvedAtStart: Int64
    /// A read request took a sequence number (which only writers may do).
    private var allocatedWhileReading = false
    /// A PostgreSQL writer: event numbers taken and not used yet, in order, and every number
    /// taken (`StreamPositions`).
    var freshNumbers: ArraySlice<Int64> = []
    private(set) var takenNumbers: [ClosedRange<Int64>] = []
    /// Numbers asked for once `freshNumbers` ran out: the attempt runs again, taking more.
    var numbersShort = 0
    /// How many numbers each lock of channels takes (raised for an attempt run again).
    let numbersPerLock: Int
    /// A PostgreSQL writer: the bound read after its last numbers were taken
    /// (`StreamPositions.definitionsWithBound`), nil before any.
    private(set) var boundAfterNumbers: WriterBound? = nil
    /// A PostgreSQL writer: a message id taken with its first statement.
    var prefetchedMessageId: Int64? = nil
    /// A PostgreSQL writer: an earlier-send lookup made with its first statement, under the
    /// channel's lock, and what it found.
    var prefetchedEarlierSend: (key: EarlierSendKey, found: EarlierSend?)? = nil

    /// A send tried in one round trip (Writers/OneFlightSend.swift): its stand-in numbers, and
    /// the cached records both of its runs read.
    var oneFlight: OneFlightSend? = nil

    /// Each statement reads in a snapshot taken as it starts (a writer's, or a read statement
    /// by statement): a copy the record cache held before it is no newer than what it reads,
    /// so a stale copy may be the base of a load (ChannelQueries.swift, "Members written since
    /// a copy"). Not in a read of one snapshot, which may have begun before the copy was committed.
    var loadsFromCopies = true

    /// The record cache's copy of a channel (the one the first run of a send in one round trip read).
    func cachedChannel(_ url: String) -> CachedChannel? {
        guard let oneFlight else { return shared.cache.channel(url) }
        return oneFlight.channel(url) { shared.cache.channel(url) }
    }

    func cachedUser(_ id: String) -> CachedUser? {
        guard let oneFlight else { return shared.cache.user(id) }
        return oneFlight.user(id) { shared.cache.user(id) }
    }

    /// What the request changed of the records kept in memory, written at its end.
    var pending = StorageBatch()
    /// The events the hub delivers once the request committed.
    private(set) var pendingFanout: [StoredEvent] = []

    init(shared: SharedState, rules: any WriterRules, readOnly: Bool, session: any SQLSession, numbersPerLock: Int) {
        self.shared = shared
        self.rules = rules
        self.readOnly = readOnly
        self.session = session
        self.numbersPerLock = numbersPerLock
        // Only the writer reads the committed counters: it alone changes them.
        counters = readOnly ? Counters() : shared.committed
        seqAtStart = counters.seq
        resolvedAtStart = shared.hub.resolvedThrough
    }

    /// The attempt's transaction has ended: nothing reads through it any more.
    func close() { session = nil }

    /// Nothing to write or announce, and no number taken: a read request that may end as one.
    var changedNothing: Bool { pending.isEmpty && pendingFanout.isEmpty && !allocatedWhileReading }

    /// An event, stored with the request's changes and handed to the hub once it commits.
    func append(_ event: StoredEvent) {
        pending.events.append(event)
        pendingFanout.append(event)
    }

    // MARK: numbers

    // Only writers take numbers, as their backend's rules say (Writers/WriterRules.swift). A
    // read request that takes one fails (`RequestState.handleReading`).

    /// Notes that the request takes a number (a reader that does must run again as a writer).
    func willTakeNumber() {
        if readOnly { allocatedWhileReading = true }
    }

    func nextSeq() -> Int64 {
        willTakeNumber()
        return rules.nextSeq(self)
    }

    /// A new id of `kind`.
    func takeId(_ kind: IdKind) async throws -> Int64 {
        willTakeNumber()
        return try await rules.takeId(kind, self)
    }

    /// Event numbers taken for this request (sorted): the next ones it uses, and noted as its own.
    func takeNumbers(_ numbers: [Int64]) {
        freshNumbers = numbers[...]
        for number in numbers {
            if let last = takenNumbers.last, last.upperBound + 1 == number {
                takenNumbers[takenNumbers.count - 1] = last.lowerBound...number
            } else {
                takenNumbers.append(number...number)
            }
        }
    }

    /// The bound read in the statement that took numbers, after them.
    func noteBound(_ bound: WriterBound) {
        boundAfterNumbers = boundAfterNumbers.map { $0.bound >= bound.bound ? $0 : bound } ?? bound
    }

    /// The sequence numbers the request took, used or not, in order (for the hub).
    var taken: [ClosedRange<Int64>] { rules.taken(self) }

    /// A changelog's "now": every change up to here is in what this request reads (the
    /// changelogs list nothing past it). A writer on SQLite, the only one running, knows the
    /// exact number. Otherwise the hub's watermark as the request began, read before its
    /// snapshot: every number up to it was committed (or never will be) by then, by a writer
    /// of a commit group on SQLite or by any server on PostgreSQL.
    func currentSeq() -> Int64 { rules.currentSeq(self) }
}

/// PostgreSQL: the bound a writer read right after taking its numbers: every number up to
/// `bound` that another server took was committed or never will be (Writers/StreamPositions.swift),
/// so its own events up to there may go out once it commits, with no read of its own.
struct WriterBound: Sendable {
    var bound: Int64
    /// The sequence's last value, read with it.
    var handedOut: Int64
    /// Other servers registered in `stream_writers` then: with none, nobody listens for this
    /// server's announcements or reads its floor.
    var otherServers: Int
}
