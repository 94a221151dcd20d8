import Foundation
import Synchronization

// What requests share, and the counters a writer takes its numbers from.

/// The sequence counters (the `meta` table) and the size of the event log.
struct Counters: Sendable, Equatable {
    var seq: Int64 = 0
    var prunedThrough: Int64 = 0
    var nextMessageId: Int64 = 1
    var nextReportId: Int64 = 1
    var lastMessageTs: Int64 = 0
    var channelCounter: Int64 = 0
    var nextPollId: Int64 = 1
    /// Moves with every transaction that writes users: cached users known current at one
    /// value need no check while it stays (RecordCache.swift).
    var usersWritten: Int64 = 0
    /// How many events the log holds (the events themselves stay in the database).
    var storedEvents = 0

    /// The counters as stored (`meta`), and the size of the event log.
    static func load(_ database: any SQLDatabase) async throws -> Counters {
        try await database.read { db in
            let (values, eventCount) = try await RecordTables.loadCounters(db)
            return Counters(values, storedEvents: eventCount)
        }
    }

    /// The counters from the rows of `meta` (absent rows are at their start).
    init(_ values: [String: Int64], storedEvents: Int) {
        seq = values["seq"] ?? 0
        prunedThrough = values["pruned_through"] ?? 0
        nextMessageId = values["next_message_id"] ?? 1
        nextReportId = values["next_report_id"] ?? 1
        lastMessageTs = values["last_message_ts"] ?? 0
        channelCounter = values["channel_counter"] ?? 0
        nextPollId = values["next_poll_id"] ?? 1
        usersWritten = values["users_written"] ?? 0
        self.storedEvents = storedEvents
    }

    init() {}
}

/// What every request shares: the database, the counters as committed, the record cache, the
/// open event streams and who is online. Each part guards itself; `committed` is
/// changed only by the SQLite writer that holds the write lock (Writers/SQLiteWriters.swift).
final class SharedState: @unchecked Sendable {
    let database: any SQLDatabase
    let retention: Int
    /// PARLEY_VERIFY_COUNTERS=1: every request checks the unread counters it touched, the
    /// order of the listings it read, and that it rendered no user it did not load.
    let verify: Bool
    let uploadLimit: Int
    /// The application settings where the database stores none (the command line's).
    let applicationDefaults: ApplicationSettings
    /// The webhook endpoints in force (OutgoingCalls/Webhooks.swift).
    let webhooks: WebhookRegistry
    /// Committed channels and users kept between requests.
    let cache = RecordCache(channels: 2_000, users: 20_000)
    /// This server's writers in flight and the numbers handed out: what orders delivery.
    let order = WriteOrder()
    let hub: EventHub
    /// Set once a stop was asked for (Operations/Lifecycle.swift): readiness answers 503.
    let stop = StopRequest()
    /// SQLite: the counters as of this server's last commit (a writer starts from a copy of
    /// them). PostgreSQL numbers from sequences and leaves them at their start.
    var committed = Counters()
    /// This server among others on one PostgreSQL database: it ignores its own announcements.
    let nodeId = randomHex(8)
    /// PostgreSQL: the streams of every server on the database, per user (nil on SQLite,
    /// where the hub's streams are all there are).
    let cluster: ClusterPresence?
    /// Push notifications of members online at the send, until the event reaches them.
    let pushHold: PushHold
    /// Session keys found valid before a body was read, for a few seconds (RecentSessions).
    let recentSessions = RecentSessions()
    private let mutex = NSLock()
    private var baseURL = ""

    init(database: any SQLDatabase, retention: Int, uploadLimit: Int,
         applicationDefaults: ApplicationSettings = ApplicationSettings(), hookDefaults: HookDefaults = HookDefaults(),
         verify: Bool) {
        self.database = database
        webhooks = WebhookRegistry(defaults: hookDefaults)
        self.applicationDefaults = applicationDefaults
        self.retention = max(1, retention)
        self.uploadLimit = uploadLimit
        self.verify = verify
        hub = EventHub(order: order)
        cluster = database.dialect == .postgres ? ClusterPresence(node: nodeId, database: database) : nil
        pushHold = PushHold { [hub, cluster] userId in hub.isOnline(userId) || cluster?.isOnlineElsewhere(userId) == true }
    }

    /// The user has an event stream open on this server or on another running one.
    func isOnline(_ userId: String) -> Bool {
        hub.isOnline(userId) || cluster?.isOnlineElsewhere(userId) == true
    }

    /// The scheme, host and port the server listens on, for absolute file URLs.
    var publicBaseURL: String {
        get { mutex.withLock { baseURL } }
        set { mutex.withLock { baseURL = newValue } }
    }
}

/// Session keys this server found valid in its check before a request's body, each for
/// `lifetime`: a request with one is let in to its body without that check, a statement (a
/// round trip on PostgreSQL) spared. The request checks its key again where it runs (every
/// handler authenticates in its own transaction; a PostgreSQL write reads the session under its
/// locks), so a key revoked meanwhile is refused all the same, after its body was read.
final class RecentSessions: Sendable {
    static let lifetimeMilliseconds: Int64 = 10_000
    /// Keys kept at most; past it, those that expired go, or all.
    static let capacity = 20_000
    private let entries = Mutex<[String: (userId: String, until: Int64)]>([:])

    /// The caller of a key found valid less than `lifetime` ago, if any.
    func caller(key: String, now: Int64) -> Caller? {
        entries.withLock { entries in
            guard let entry = entries[key], entry.until > now else { return nil }
            return Caller(isAdmin: false, userId: entry.userId)
        }
    }

    /// Sessions as last read, by key, whatever became of them since: what the first run of a
    /// send in one round trip assumes (Writers/OneFlightSend.swift), and its flight checks.
    private let records = Mutex<[String: SessionRecord]>([:])

    func session(_ key: String) -> SessionRecord? { records.withLock { $0[key] } }

    func keep(_ session: SessionRecord) {
        records.withLock { records in
            if records.count >= Self.capacity, records[session.token] == nil { records.removeAll(keepingCapacity: true) }
            records[session.token] = session
        }
    }

    func note(key: String, userId: String, now: Int64) {
        entries.withLock { entries in
            if entries.count >= Self.capacity {
                entries = entries.filter { $0.value.until > now }
                if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = (userId, now + Self.lifetimeMilliseconds)
        }
    }
}
