/// What the writers of one backend do differently from the other's: how they take numbers and
/// ids, what they lock and check, and who prunes the log. Each write coordinator provides its
/// backend's (`Writers.rules`); request transactions and the stores over them ask it, and never
/// which backend they run on. SQLite's writers run one at a time and number from counters they
/// alone change; PostgreSQL's run side by side and number from sequences, under the locks of
/// what they change (docs/ARCHITECTURE.md "Requests and locks").
protocol WriterRules: Sendable {
    /// The attempt's next change number (event ids, change numbers and tombstones share them).
    func nextSeq(_ tx: RequestTransaction) -> Int64
    /// A new id of `kind`.
    func takeId(_ kind: IdKind, _ tx: RequestTransaction) async throws -> Int64
    /// A new message's id and creation time, taken together: creation times never go
    /// backwards among writers that follow each other (server-wide on SQLite, in the channel,
    /// whose lock the writer holds, on PostgreSQL), so id order is time order.
    func takeMessageNumbers(in channel: String, at now: Int64, _ tx: RequestTransaction,
                            channels: ChannelStore) async throws -> (id: Int64, createdAt: Int64)
    /// The newest creation time a new message of `channel` may not go below.
    func lastMessageTs(in channel: String, _ tx: RequestTransaction, channels: ChannelStore) -> Int64
    /// The change numbers the attempt took, used or not, in order (for the hub).
    func taken(_ tx: RequestTransaction) -> [ClosedRange<Int64>]
    /// A changelog's "now" (`RequestTransaction.currentSeq`).
    func currentSeq(_ tx: RequestTransaction) -> Int64
    /// A write attempt's first step, before its handler runs.
    func startWrite(_ stores: RequestStores, batch: ChannelBatch?, channelHint: String?, firstReads: FirstReads,
                    _ db: any SQLSession) async throws
    /// Before the request reads `urls`, channels it has not loaded yet.
    func willLoadChannels(_ urls: Set<String>, _ channels: ChannelStore) async throws
    /// Before a read that writers of other channels may change meanwhile (`name` names it).
    func lockForWriters(_ name: String, _ tx: RequestTransaction) async throws
    /// Writers move `users_written`, so a cached user found current at its value needs no
    /// version check while it stays (RecordCache.swift).
    var countsUsersWritten: Bool { get }
    /// A writer checks, under their locks, that the users it writes are still as it loaded
    /// them (`UserStore.checkWrittenUsers`): writers of other channels change users too.
    var checksWrittenUsers: Bool { get }
    /// Writers prune the log in their own transactions (`EventStore.pruneEvents`); otherwise
    /// the write coordinator prunes it apart (`Writers.pruneLog`).
    var writersPruneLog: Bool { get }
    /// A reader reads a session together with its user's version (`UserStore.session`), so
    /// that the check of a cached copy of that user needs no statement of its own.
    var readsUserVersionWithSession: Bool { get }
    /// A send may take its lock and write in one round trip (Writers/OneFlightSend.swift).
    var writesInOneFlight: Bool { get }
}

/// What a write's first statement may read for its handler besides its locks and numbers:
/// on PostgreSQL each spares a round trip (`ChannelStore.lockChannels`); SQLite's writers read
/// nothing ahead. A read is used only by the call that asks exactly it.
struct FirstReads: Sendable {
    /// The request most likely stores one new message (HTTP/Routes.swift `RouteHints`): its id is taken.
    var takesMessageId = false
    /// The request may go to the database in one round trip, its lock and its write together
    /// (a send: Writers/OneFlightSend.swift), where the backend can.
    var inOneFlight = false
    /// The request's session key, for the write's own check of the credentials.
    var sessionKey: String? = nil
    /// A send's lookup of an earlier send with its request id (`MessageQueries.earlierSend`).
    var earlierSend: EarlierSendKey? = nil
    /// The renders of the channel the request names leave its members out (a send: its events
    /// are of `RecordRenderer.memberlessCategories`), so its members' users are neither read
    /// with the first statement nor loaded, unless an event that shows them needs them
    /// (`ChannelStore.loadMembersShown`).
    var leavesMembersOut = false
    /// Users the handler will load besides those its channel's render names (a send's sender
    /// and mentions, named in its body): read with the first statement on PostgreSQL.
    var users: [String] = []
}

/// The arguments of `MessageQueries.earlierSend`.
struct EarlierSendKey: Sendable, Equatable {
    var channel: String
    /// The sender's id, "" for none.
    var sender: String
    var requestId: String
}

/// The ids writers take besides change numbers and message ids.
enum IdKind {
    case report, poll
    /// The number in a generated channel URL.
    case channelNumber
}

/// SQLite: one writer at a time, numbering from its copy of the counters, which become the
/// committed ones if it commits (`SQLiteWriters`).
struct SQLiteWriterRules: WriterRules {
    func nextSeq(_ tx: RequestTransaction) -> Int64 {
        tx.counters.seq += 1
        tx.pending.counters["seq"] = tx.counters.seq
        return tx.counters.seq
    }

    func takeId(_ kind: IdKind, _ tx: RequestTransaction) async throws -> Int64 {
        func next(_ counter: WritableKeyPath<Counters, Int64>, _ name: String) -> Int64 {
            let id = tx.counters[keyPath: counter]
            tx.counters[keyPath: counter] += 1
            tx.pending.counters[name] = tx.counters[keyPath: counter]
            return id
        }
        switch kind {
        case .report: return next(\.nextReportId, "next_report_id")
        case .poll: return next(\.nextPollId, "next_poll_id")
        case .channelNumber:
            // The counter holds the last number given, not the next.
            tx.counters.channelCounter += 1
            tx.pending.counters["channel_counter"] = tx.counters.channelCounter
            return tx.counters.channelCounter
        }
    }

    func takeMessageNumbers(in channel: String, at now: Int64, _ tx: RequestTransaction,
                            channels: ChannelStore) async throws -> (id: Int64, createdAt: Int64) {
        tx.counters.lastMessageTs = max(tx.counters.lastMessageTs, now)
        let numbers = (id: tx.counters.nextMessageId, createdAt: tx.counters.lastMessageTs)
        tx.counters.nextMessageId += 1
        tx.pending.counters["next_message_id"] = tx.counters.nextMessageId
        tx.pending.counters["last_message_ts"] = tx.counters.lastMessageTs
        return numbers
    }

    func lastMessageTs(in channel: String, _ tx: RequestTransaction, channels: ChannelStore) -> Int64 {
        tx.counters.lastMessageTs
    }

    func taken(_ tx: RequestTransaction) -> [ClosedRange<Int64>] {
        tx.counters.seq > tx.seqAtStart ? [(tx.seqAtStart + 1)...tx.counters.seq] : []
    }

    /// A writer, the only one running, knows the exact number.
    func currentSeq(_ tx: RequestTransaction) -> Int64 {
        tx.readOnly ? tx.resolvedAtStart : tx.counters.seq
    }

    func startWrite(_ stores: RequestStores, batch: ChannelBatch?, channelHint: String?, firstReads: FirstReads,
                    _ db: any SQLSession) async throws {}
    func willLoadChannels(_ urls: Set<String>, _ channels: ChannelStore) async throws {}
    func lockForWriters(_ name: String, _ tx: RequestTransaction) async throws {}
    var countsUsersWritten: Bool { true }
    var checksWrittenUsers: Bool { false }
    var writersPruneLog: Bool { true }
    var readsUserVersionWithSession: Bool { false }
    var writesInOneFlight: Bool { false }
}

/// PostgreSQL: writers side by side, numbering from sequences after the locks of the channels
/// the numbers change (StreamPositions.swift), and holding a lock of whatever else another
/// writer may change meanwhile.
struct PostgresWriterRules: WriterRules {
    /// This server among the writers of every server.
    let positions: StreamPositions

    func nextSeq(_ tx: RequestTransaction) -> Int64 {
        if let number = tx.freshNumbers.popFirst() { return number }
        // Ran out: the attempt fails at its end and runs again taking more
        // (`RequestState.handleWriting`). A number no row keeps until then.
        tx.numbersShort += 1
        return -Int64(tx.numbersShort)
    }

    func takeId(_ kind: IdKind, _ tx: RequestTransaction) async throws -> Int64 {
        let sequence = switch kind {
        case .report: "parley_report_ids"
        case .poll: "parley_poll_ids"
        case .channelNumber: "parley_channel_numbers"
        }
        return try await StreamPositions.next(sequence, tx.db)
    }

    func takeMessageNumbers(in channel: String, at now: Int64, _ tx: RequestTransaction,
                            channels: ChannelStore) async throws -> (id: Int64, createdAt: Int64) {
        let id: Int64
        if let prefetched = tx.prefetchedMessageId { id = prefetched } else { id = try await StreamPositions.next("parley_message_ids", tx.db) }
        tx.prefetchedMessageId = nil
        return (id, max(now, lastMessageTs(in: channel, tx, channels: channels)))
    }

    /// The channel's newest, loaded under its lock: writers of other channels share no time.
    func lastMessageTs(in channel: String, _ tx: RequestTransaction, channels: ChannelStore) -> Int64 {
        channels.lastMessages[channel]?.createdAt ?? 0
    }

    func taken(_ tx: RequestTransaction) -> [ClosedRange<Int64>] { tx.takenNumbers }

    /// Other writers run meanwhile: the hub's watermark as the request began.
    func currentSeq(_ tx: RequestTransaction) -> Int64 { tx.resolvedAtStart }

    /// The channel the request names locked, then the busy lock and the first numbers.
    func startWrite(_ stores: RequestStores, batch: ChannelBatch?, channelHint: String?, firstReads: FirstReads,
                    _ db: any SQLSession) async throws {
        try await stores.channels.lockBeforeNumbers(positions, batch: batch, channelHint: channelHint,
                                                    firstReads: firstReads, db)
    }

    /// A writer holds the lock of every channel it loads, from before it reads it.
    func willLoadChannels(_ urls: Set<String>, _ channels: ChannelStore) async throws {
        try await channels.lockBeforeReading(urls, positions)
    }

    /// A lock named by the read, held from before it to the commit, so that writers of other
    /// channels reading the same wait for each other; a reader takes none.
    func lockForWriters(_ name: String, _ tx: RequestTransaction) async throws {
        guard !tx.readOnly else { return }
        let db = try tx.db
        StreamPositions.noteSessionLocks(StreamPositions.Locks(names: [name]), in: db)
        // Sent with the read it guards, in one round trip: that statement's snapshot is taken
        // after the lock is held.
        try await db.runBeforeNext("SELECT 1 FROM pg_advisory_lock(\(StreamPositions.keyLockSpace), hashtext(?))", [.text(name)])
    }

    var countsUsersWritten: Bool { false }
    var checksWrittenUsers: Bool { true }
    /// The log's size would be a row every writer updates (`PostgresWriters.pruneLog`).
    var writersPruneLog: Bool { false }
    /// Every statement is a round trip.
    var readsUserVersionWithSession: Bool { true }
    var writesInOneFlight: Bool { OneFlightSend.enabled }
}
