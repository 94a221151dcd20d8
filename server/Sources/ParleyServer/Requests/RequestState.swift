import Foundation

/// One request. Each attempt at the database (a backend may run a transaction again) gets
/// a transaction of its own (RequestTransaction.swift) and the stores over it (Stores/),
/// which hold what it loaded and changed. The request runs its handler over them and,
/// writing, ends the attempt: its checks, then its changes written and committed before the
/// response is sent. The services see the request through the protocols of
/// Services/Interfaces.swift, which it forwards to the store of each concern (Forwarding.swift).
///
/// After its commit the request's renderer is handed to the event hub, which renders its
/// events from the channels and users it loaded, as they stood at the commit. Between
/// requests only `shared.cache` keeps records (RecordCache.swift: bounded, and checked
/// against the database before each use).
final class RequestState {
    let shared: SharedState
    /// The backend's rules for its writers, which the write coordinator provides.
    let rules: any WriterRules
    let readOnly: Bool
    /// The stores of the current (or last) attempt.
    private var current: RequestStores?
    var stores: RequestStores {
        guard let current else { preconditionFailure("a request's stores used before its first attempt") }
        return current
    }
    /// The attempt's transaction, for statements of code outside the stores (the webhook
    /// worker's queue, a test hook).
    var db: any SQLSession { get throws { try stores.tx.db } }
    /// How many event numbers each lock of channels takes (raised for an attempt run again).
    private var numbersPerLock = 8
    /// A writer of a SQLite commit group or of a PostgreSQL channel batch: the channels the
    /// earlier members wrote, as they left them. Newer than the record cache, which takes them
    /// only once the group commits, and committed with this request or not at all: so a
    /// member writing the channel the one before it wrote finds it current instead of reading
    /// it again.
    var groupChannels: GroupChannels? = nil
    /// What a request of a commit group wrote, kept in the cache once the group commits.
    private var writtenAwaitingCommit = RecordTables.WrittenVersions()

    init(shared: SharedState, rules: any WriterRules, readOnly: Bool) {
        self.shared = shared
        self.rules = rules
        self.readOnly = readOnly
    }

    /// A new attempt in `session`: a transaction and stores of its own, nothing loaded yet.
    /// `leavingMembersOutOf`: the channel whose renders leave its members out (`FirstReads.leavesMembersOut`).
    private func startAttempt(_ session: any SQLSession, leavingMembersOutOf channel: String? = nil) -> RequestStores {
        let tx = RequestTransaction(shared: shared, rules: rules, readOnly: readOnly, session: session, numbersPerLock: numbersPerLock)
        let stores = RequestStores(tx, groupChannels: groupChannels)
        stores.channels.leaveMembersOut(of: channel)
        current = stores
        return stores
    }

    /// Runs `body` as a write request in one write transaction, which commits the request's
    /// changes (`pending`) with what it wrote directly. The backend's write coordinator calls it
    /// (Writers/).
    ///
    /// `group`: the request joins the group transaction of a database that groups commits
    /// (Writers/SQLiteWriters.swift); its changes are then durable, and kept in the cache, only
    /// once the group commits (`groupCommitted`).
    ///
    /// `channelHint`: the channel the request names, if any. On PostgreSQL the writer's first
    /// statement locks it and reads its version, which spares the check of a cached copy a
    /// round trip (`ChannelStore.lockBeforeNumbers`, `loadChannels`).
    /// `firstReads`: what the first statement may read for the handler on PostgreSQL
    /// (`FirstReads`).
    ///
    /// `batch`: on PostgreSQL, the request joins the open transaction of an earlier writer of
    /// its channel (Writers/ChannelBatch.swift); its changes are then kept in the cache only
    /// once the batch commits (`groupCommitted`). `batchLead`: the request may open such a
    /// batch for the writers queued behind it.
    func handleWriting<T>(group: (any GroupCommitting)? = nil, batch: ChannelBatch? = nil, batchLead: ChannelBatchLead? = nil,
                          channelHint: String? = nil, firstReads: FirstReads = FirstReads(),
                          _ body: (RequestState) async throws -> T) async throws -> T {
        var bodyDone = false
        // Once, first; only a writer that would commit alone (no group, no batch, nobody
        // queued behind it for its channel) on a server with few writers in flight, to a
        // channel no other server wrote under it lately.
        var tryOneFlight = firstReads.inOneFlight && rules.writesInOneFlight && group == nil && batch == nil
            && channelHint != nil && batchLead?.othersWaiting() != true
            && shared.order.writersInFlight <= OneFlightSend.mostWritersInFlight
            && !OneFlightSend.isContested(channelHint ?? "")
        do {
            func attempt(_ session: any SQLSession) async throws -> (T, RecordTables.WrittenVersions) {
                // Run again after its batch was handed on: the others ran in the transaction lost.
                try batchLead?.checkNotHandedOn()
                if tryOneFlight {
                    tryOneFlight = false
                    if let done = try await attemptInOneFlight(session, channelHint: channelHint, firstReads: firstReads, body) {
                        bodyDone = true
                        return done
                    }
                }
                let stores = startAttempt(session, leavingMembersOutOf: firstReads.leavesMembersOut ? channelHint : nil)
                bodyDone = false
                defer { stores.tx.close() }
                try await rules.startWrite(stores, batch: batch, channelHint: channelHint, firstReads: firstReads, session)
                let result = try await body(self)
                bodyDone = true
                let written = try await endWrite(stores, session, batch: batch, batchLead: batchLead, channelHint: channelHint)
                return (result, written)
            }
            let (result, written) = if let group { try await group.writeInGroup(attempt) } else if let batch {
                try await batch.run(attempt)
            } else {
                try await shared.database.writeBeginningLate(attempt)
            }
            if group == nil, batch == nil { keepInCache(written) } else { writtenAwaitingCommit = written }
            return result
        } catch {
            if let storage = error as? StorageError, storage.kind == .unavailable { throw error }
            if error is LeftBatch { throw error }
            if bodyDone, !(error is APIError) { throw APIError.internal("storage commit failed: \(error)") }
            throw error
        }
    }

    /// A send in one round trip (Writers/OneFlightSend.swift): the handler runs on what the
    /// record cache holds, with stand-in numbers and nothing sent; its lock statement and write
    /// then go out together; once they committed it runs again with the numbers taken, over
    /// what the database answered, and builds what the request keeps and answers. Nil: nothing
    /// was kept, and the usual attempt follows on the same session.
    private func attemptInOneFlight<T>(_ session: any SQLSession, channelHint: String?, firstReads: FirstReads,
                                       _ body: (RequestState) async throws -> T) async throws -> (T, RecordTables.WrittenVersions)? {
        let flight = OneFlightSend(channel: channelHint ?? "", eventNumbers: numbersPerLock)
        let capturing = CapturingSession(flight, dialect: session.dialect)
        let first = startAttempt(capturing, leavingMembersOutOf: firstReads.leavesMembersOut ? channelHint : nil)
        first.tx.oneFlight = flight
        let ready: Bool = await VersionTape.$current.withValue(flight.versions) {
            defer { first.tx.close() }
            do {
                try await rules.startWrite(first, batch: nil, channelHint: channelHint, firstReads: firstReads, capturing)
                _ = try await body(self)
                _ = try await endWrite(first, capturing, batch: nil, batchLead: nil, channelHint: channelHint)
                return true
            } catch {
                // Whatever stopped it (a record not cached, a statement, a refusal on what the
                // cache says): the usual attempt decides.
                OneFlightSend.fellBack(because: error)
                return false
            }
        }
        guard ready else { return nil }
        do {
            guard try await flight.send(on: session) else { return nil }
        } catch let error as NotInOneFlight {
            OneFlightSend.fellBack(because: error)
            return nil
        }
        let replaying = ReplayingSession(flight, dialect: session.dialect)
        let second = startAttempt(replaying, leavingMembersOutOf: firstReads.leavesMembersOut ? channelHint : nil)
        second.tx.oneFlight = flight
        let built = try await VersionTape.$current.withValue(flight.versions) {
            defer { second.tx.close() }
            do {
                try await rules.startWrite(second, batch: nil, channelHint: channelHint, firstReads: firstReads, replaying)
                let result = try await body(self)
                let written = try await endWrite(second, replaying, batch: nil, batchLead: nil, channelHint: channelHint)
                try replaying.checkDone()
                ServerMetrics.shared.wroteInOneFlight()
                return (result, written)
            } catch {
                flight.failedAfterCommit(error, cache: shared.cache)
                throw APIError.internal("the send was stored, but the server could not build its answer: \(error)")
            }
        }
        if shared.verify { try await ChannelStore.verifyStoredUnreadCounters(second.channels.channelsTouched, shared.database) }
        return built
    }

    /// The end of a write attempt, after its handler: the checks, the webhook calls, the log
    /// pruned, the changes written, and the transaction handed on to the channel's next
    /// writer if others continue it.
    private func endWrite(_ stores: RequestStores, _ session: any SQLSession, batch: ChannelBatch?,
                          batchLead: ChannelBatchLead?, channelHint: String?) async throws -> RecordTables.WrittenVersions {
        let tx = stores.tx
        try await stores.channels.loadMembersShown(by: tx.pending.events)
        try stores.users.checkRendering()
        try await stores.channels.verifyTouchedCounters()
        if tx.numbersShort > 0 {
            numbersPerLock += tx.numbersShort + 8
            throw StorageError("a write needed more event numbers than it took; it runs again taking more", kind: .retryable)
        }
        if rules.checksWrittenUsers { try await stores.users.checkWrittenUsers(session) }
        try await stores.events.insertHookCalls(session)
        // Pruned first, so that the boundary and the log's size go out with the other
        // counters; unless the request adds more events than the log retains (a tiny
        // retention), which must then prune some of its own. (Where writers do not prune the
        // log, nothing is pruned here.)
        let added = tx.pending.events.count
        let prunesFirst = added <= shared.retention || !rules.writersPruneLog
        if prunesFirst { try await stores.events.pruneEvents(adding: added, session) }
        // A writer whose transaction others continue does not end it here, and reads for the
        // next one when it knows one follows. A batch's member that nobody is certain to
        // follow ends the batch: its last statement carries the COMMIT (and a writer queued
        // after it waits for the next turn).
        let endsBatch = batch.map { prunesFirst && !$0.nextMemberCertain } ?? false
        let continued = (batch != nil && !endsBatch) || batchLead?.othersWaiting() == true
        let followed = batch?.nextMemberCertain ?? continued
        let prefetch = followed ? stores.channels.prefetchExpression(
            for: channelHint, alsoNaming: batch?.usersNamedByWaiting ?? batchLead?.usersNamedByWaiting ?? []) : nil
        let written = try await RecordTables.write(tx.pending, last: prunesFirst && !continued, selecting: prefetch, session)
        if prefetch != nil {
            let read = ChannelBatch.Prefetched(written.selected)
            if let batch { batch.prefetched = read } else { batchLead?.prefetched = read }
            if let highest = read?.numbers.last { shared.order.saw(highest) }
            if let handedOut = read?.bound.handedOut { shared.order.saw(handedOut) }
        }
        if !prunesFirst {
            let prunedBefore = tx.counters.prunedThrough
            try await stores.events.pruneEvents(adding: added, session)
            if tx.counters.prunedThrough != prunedBefore {
                try await RecordTables.putCounter("pruned_through", tx.counters.prunedThrough, session)
            }
        }
        if continued, batch == nil, let batchLead {
            try await batchLead.handOn(session, channels: stores.channels.writtenEntries(written))
        }
        return written
    }

    /// Runs `body` as a read request (a GET) in a read transaction, which on SQLite does not
    /// queue behind the writer's connection and on PostgreSQL is READ ONLY. Returns false
    /// instead of a result when the request changed something (a first login): it must then
    /// run again as a write request.
    ///
    /// `mode`: in one snapshot, or each statement in a snapshot of its own
    /// (`SQLDatabase.readStatementByStatement`).
    func handleReading<T>(mode: ReadMode = .oneSnapshot, _ body: (RequestState) async throws -> T) async throws -> T? {
        func run(_ session: any SQLSession) async throws -> T {
            let stores = startAttempt(session)
            stores.tx.loadsFromCopies = mode != .oneSnapshot
            defer { stores.tx.close() }
            let result = try await body(self)
            try stores.users.checkRendering()
            return result
        }
        let database = shared.database
        let result = switch mode {
        case .oneSnapshot: try await database.read(run)
        case .statementByStatement: try await database.readStatementByStatement(run)
        case .requestStatementByStatement: try await database.readStatementByStatement(onRequestConnections: true, run)
        }
        if !stores.tx.changedNothing || !stores.events.queuedNoCalls { return nil }
        keepInCache(RecordTables.WrittenVersions())
        return result
    }

    /// The group or batch this request joined has committed.
    func groupCommitted() { keepInCache(writtenAwaitingCommit) }

    /// What this member of a commit group wrote, for the members after it (`groupChannels`).
    var channelsWrittenInGroup: [(url: String, entry: CachedChannel?)] { stores.channels.writtenEntries(writtenAwaitingCommit) }

    /// PostgreSQL: the bound this writer read after taking its last numbers (nil: it took none).
    var boundAfterNumbers: WriterBound? { stores.tx.boundAfterNumbers }

    /// The push notifications this committed request held (OutgoingCalls/Push.swift).
    var heldPushes: [HeldPush] { stores.events.heldPushes }

    /// The counters as this request left them: the committed ones once it commits, where
    /// writers number from counters (SQLite).
    var counters: Counters { stores.tx.counters }

    /// What the hub needs to deliver this committed request's events.
    var committedChanges: CommittedChanges {
        CommittedChanges(events: stores.tx.pendingFanout, taken: stores.tx.taken, renderer: stores.renderer)
    }

    /// After a commit (or a read): keeps what the request read whole, then what it wrote,
    /// under the versions its writes returned.
    private func keepInCache(_ written: RecordTables.WrittenVersions) {
        stores.channels.keepRead()
        stores.users.keepRead()
        stores.channels.keepWritten(written)
        stores.users.keepWritten(written)
    }

    /// Another server's events, with the channels loaded of those `rendered` here (EventStore.committedEvents).
    func committedEvents(in ranges: [ClosedRange<Int64>], rendered: ([String]) -> Bool)
        async throws -> (events: [StoredEvent], prunedThrough: Int64) {
        try await stores.events.committedEvents(in: ranges, rendered: rendered)
    }
}

/// How a read request runs (`RequestState.handleReading`).
enum ReadMode {
    /// In one snapshot (a read transaction).
    case oneSnapshot
    /// Each statement in a snapshot of its own, on the connections for other servers' events.
    case statementByStatement
    /// Each statement in a snapshot of its own, on the requests' connections.
    case requestStatementByStatement
}

/// The stores of one attempt of a request, over its transaction.
final class RequestStores {
    let tx: RequestTransaction
    let users: UserStore
    let channels: ChannelStore
    let messages: MessageStore
    let polls: PollStore
    let reports: ReportStore
    let events: EventStore
    let settings: SettingsStore
    let renderer: RecordRenderer

    init(_ tx: RequestTransaction, groupChannels: GroupChannels?) {
        let users = UserStore(tx)
        let channels = ChannelStore(tx, users: users, groupChannels: groupChannels)
        let messages = MessageStore(tx, channels: channels)
        let polls = PollStore(tx)
        self.tx = tx
        self.users = users
        self.channels = channels
        self.messages = messages
        self.polls = polls
        reports = ReportStore(tx)
        events = EventStore(tx, channels: channels, users: users)
        settings = SettingsStore(tx)
        renderer = RecordRenderer(shared: tx.shared, users: users, channels: channels, messages: messages, polls: polls)
    }
}
