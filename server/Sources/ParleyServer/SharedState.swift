import Foundation

// What requests share, and the counters a writer takes its numbers from.

/// The sequence counters (the `meta` table) and the size of the event log.
struct Counters: Sendable {
    var seq: Int64 = 0
    var prunedThrough: Int64 = 0
    var nextMessageId: Int64 = 1
    var nextReportId: Int64 = 1
    var lastMessageTs: Int64 = 0
    var channelCounter: Int64 = 0
    /// How many events the log holds (the events themselves stay in the database).
    var storedEvents = 0

    /// The counters as stored. On PostgreSQL the `meta` rows are not written by every writer
    /// (they would make every pair of writers wait for each other): the reserved bounds
    /// (`SharedCounters`) and the newest message say how far numbers and times went.
    static func load(_ database: any SQLDatabase) async throws -> Counters {
        try await database.read { db in
            let (values, eventCount) = try await RecordTables.loadCounters(db)
            var counters = Counters(
                seq: values["seq"] ?? 0, prunedThrough: values["pruned_through"] ?? 0,
                nextMessageId: values["next_message_id"] ?? 1, nextReportId: values["next_report_id"] ?? 1,
                lastMessageTs: values["last_message_ts"] ?? 0, channelCounter: values["channel_counter"] ?? 0,
                storedEvents: eventCount)
            if db.dialect == .postgres {
                let reserved = try await SharedCounters.loadReserved(db)
                counters.seq = max(counters.seq, reserved.seq)
                counters.nextMessageId = max(counters.nextMessageId, reserved.messageId + 1)
                counters.nextReportId = max(counters.nextReportId, reserved.reportId + 1)
                counters.channelCounter = max(counters.channelCounter, reserved.channelNumber)
                let newest = try await db.queryOne("SELECT created_at FROM messages ORDER BY id DESC LIMIT 1")?.int(0) ?? 0
                counters.lastMessageTs = max(counters.lastMessageTs, newest)
            }
            return counters
        }
    }
}

/// The highest number of each kind a writer took (or that may have been handed out).
struct TakenNumbers: Sendable {
    var seq: Int64 = 0
    var messageId: Int64 = 0
    var reportId: Int64 = 0
    var channelNumber: Int64 = 0

    mutating func merge(_ other: TakenNumbers) {
        seq = max(seq, other.seq)
        messageId = max(messageId, other.messageId)
        reportId = max(reportId, other.reportId)
        channelNumber = max(channelNumber, other.channelNumber)
    }
}

/// The counters of writers that run at once (PostgreSQL). Numbers are handed out in memory,
/// in order, and a number once handed out is never handed out again, even when its request
/// fails (it is then a gap). So that this holds across a crash, the database keeps a bound
/// per kind that no handed-out number passes, in sequences (`reserve`): they are outside
/// every transaction, so keeping them makes no writer wait for another's commit.
final class SharedCounters: @unchecked Sendable {
    private let mutex = NSLock()
    private var counters: Counters
    /// What the database promises no number passes (as of the last `reserve`).
    private var reserved: TakenNumbers
    private let reservation = AsyncLock()
    /// Numbers reserved at a time: a reservation is one statement per this many numbers.
    static let block: Int64 = 10_000
    static let sequenceNames = (seq: "parley_reserved_seq", messageId: "parley_reserved_message_id",
                                reportId: "parley_reserved_report_id", channelNumber: "parley_reserved_channel_number")

    init(_ counters: Counters) {
        self.counters = counters
        // Everything below the loaded values is in the database already (or reserved).
        reserved = TakenNumbers(seq: counters.seq, messageId: counters.nextMessageId - 1,
                                reportId: counters.nextReportId - 1, channelNumber: counters.channelCounter)
    }

    static func loadReserved(_ db: any SQLSession) async throws -> TakenNumbers {
        func value(_ name: String) async throws -> Int64 {
            try await db.queryOne("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \(name)")?.int(0) ?? 0
        }
        return TakenNumbers(seq: try await value(sequenceNames.seq), messageId: try await value(sequenceNames.messageId),
                            reportId: try await value(sequenceNames.reportId),
                            channelNumber: try await value(sequenceNames.channelNumber))
    }

    /// The next sequence number to be handed out (a writer's floor, `EventHub.beginWriter`).
    var nextSeq: Int64 { mutex.withLock { counters.seq + 1 } }
    var lastMessageTs: Int64 { mutex.withLock { counters.lastMessageTs } }

    func takeSeq() -> Int64 {
        mutex.withLock {
            counters.seq += 1
            return counters.seq
        }
    }

    func takeMessageId() -> Int64 {
        mutex.withLock {
            defer { counters.nextMessageId += 1 }
            return counters.nextMessageId
        }
    }

    func takeReportId() -> Int64 {
        mutex.withLock {
            defer { counters.nextReportId += 1 }
            return counters.nextReportId
        }
    }

    func takeChannelNumber() -> Int64 {
        mutex.withLock {
            counters.channelCounter += 1
            return counters.channelCounter
        }
    }

    /// Message creation times never go backwards, so id order is time order: the time and
    /// the id are taken together.
    func takeMessage(at now: Int64) -> (id: Int64, createdAt: Int64) {
        mutex.withLock {
            counters.lastMessageTs = max(counters.lastMessageTs, now)
            defer { counters.nextMessageId += 1 }
            return (counters.nextMessageId, counters.lastMessageTs)
        }
    }

    /// Makes the database's bounds cover `taken` before the writer commits (in its
    /// transaction, on its connection: a sequence change stays when the transaction rolls
    /// back, and is durable once anything after it commits). Most calls change nothing: a
    /// bound moves a block at a time, half a block ahead of what was taken.
    func reserve(_ taken: TakenNumbers, _ db: any SQLSession) async throws {
        func needs(_ taken: Int64, _ bound: Int64) -> Bool { taken > bound - Self.block / 2 }
        let current = mutex.withLock { reserved }
        guard needs(taken.seq, current.seq) || needs(taken.messageId, current.messageId)
            || needs(taken.reportId, current.reportId) || needs(taken.channelNumber, current.channelNumber) else { return }
        try await reservation.withLock {
            var bounds = mutex.withLock { reserved }
            // What any writer may have taken by now: reserved past it, so that the bound
            // covers numbers other writers hold as well as this one's.
            let handedOut = mutex.withLock {
                TakenNumbers(seq: counters.seq, messageId: counters.nextMessageId - 1,
                             reportId: counters.nextReportId - 1, channelNumber: counters.channelCounter)
            }
            for (name, path) in [(Self.sequenceNames.seq, \TakenNumbers.seq), (Self.sequenceNames.messageId, \TakenNumbers.messageId),
                                 (Self.sequenceNames.reportId, \TakenNumbers.reportId),
                                 (Self.sequenceNames.channelNumber, \TakenNumbers.channelNumber)] {
                guard needs(max(taken[keyPath: path], handedOut[keyPath: path]), bounds[keyPath: path]) else { continue }
                let bound = handedOut[keyPath: path] + Self.block
                try await db.execute("SELECT setval('\(name)', ?)", [.int(bound)])
                bounds[keyPath: path] = bound
            }
            mutex.withLock { reserved = bounds }
        }
    }
}

/// What every request shares: the database, the counters as committed, the record cache, the
/// open event streams and the typing indicators. Each part guards itself; `committed` is
/// changed only by the writer that holds `Service`'s lock.
final class SharedState: @unchecked Sendable {
    let database: any SQLDatabase
    let retention: Int
    /// PARLEY_VERIFY_COUNTERS=1: every request checks the unread counters it touched, the
    /// order of the listings it read, and that it rendered no user it did not load.
    let verify: Bool
    let uploadLimit: Int
    /// Committed channels and users kept between requests.
    let cache = RecordCache(channels: 2_000, users: 20_000)
    let hub = EventHub()
    let typing = TypingIndicators()
    /// SQLite (one writer at a time): the counters as of the last commit (a writer starts
    /// from a copy of them).
    var committed = Counters()
    /// PostgreSQL (writers at once): the counters they share. Set at start.
    var sharedCounters: SharedCounters?
    /// Writers run at once (PostgreSQL), not one at a time.
    var concurrentWriters: Bool { database.dialect == .postgres }
    /// PostgreSQL: events stored and not pruned yet, and whether a pruning is under way.
    private var eventCount = 0
    private var pruning = false
    private let mutex = NSLock()
    private var baseURL = ""

    init(database: any SQLDatabase, retention: Int, uploadLimit: Int, verify: Bool) {
        self.database = database
        self.retention = max(1, retention)
        self.uploadLimit = uploadLimit
        self.verify = verify
    }

    /// PostgreSQL: counts events a writer committed. Returns how many old ones to drop when
    /// the log holds a tenth more than `retention` (so that a pruning, a transaction of its
    /// own, comes once per that many events, not after every write) and nobody is pruning yet
    /// (the caller then prunes and calls `prunedEvents`).
    func addedEvents(_ count: Int) -> Int? {
        mutex.withLock {
            eventCount += count
            guard eventCount > retention + retention / 10, !pruning else { return nil }
            pruning = true
            return eventCount - retention
        }
    }

    func prunedEvents(_ dropped: Int) {
        mutex.withLock {
            eventCount -= dropped
            pruning = false
        }
    }

    func setEventCount(_ count: Int) { mutex.withLock { eventCount = count } }

    /// The scheme, host and port the server listens on, for absolute file URLs.
    var publicBaseURL: String {
        get { mutex.withLock { baseURL } }
        set { mutex.withLock { baseURL = newValue } }
    }
}
