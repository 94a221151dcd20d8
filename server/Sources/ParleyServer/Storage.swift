import Foundation

// The state store between ServerState and the database. ServerState still keeps every
// record in memory and writes each request's changes through `commit`; the tables below
// are the relational schema of Storage/Migrations.swift, which the queries of later steps
// read directly.

/// One entry of the global event log (drives SSE fan-out and `Last-Event-ID` resume).
struct StoredEvent: Sendable {
    let id: Int64
    let createdAt: Int64
    let category: String
    let recipients: [String]
    let data: String
}

struct MemberKey: Hashable, Sendable {
    let channelUrl: String
    let userId: String
}

struct MembershipKey: Hashable, Sendable {
    let userId: String
    let channelUrl: String
}

struct StorageSnapshot: Sendable {
    var users: [UserRecord] = []
    var sessions: [SessionRecord] = []
    /// With their members.
    var channels: [ChannelRecord] = []
    var messages: [MessageRecord] = []
    var messageTombstones: [MessageTombstoneRecord] = []
    var membershipTombstones: [MembershipTombstoneRecord] = []
    var files: [FileRecord] = []
    var reports: [ReportRecord] = []
    var events: [StoredEvent] = []
    var counters: [String: Int64] = [:]
}

/// Everything one request changed; committed atomically before the response is sent.
/// A key mapped to nil is deleted.
struct StorageBatch: Sendable {
    var users: [String: UserRecord?] = [:]
    var sessions: [String: SessionRecord?] = [:]
    /// Channel rows with their operators, restrictions, metadata and counters; members apart.
    var channels: [String: ChannelRecord?] = [:]
    var members: [MemberKey: MemberRecord?] = [:]
    var messages: [Int64: MessageRecord?] = [:]
    var messageTombstones: [Int64: MessageTombstoneRecord?] = [:]
    var membershipTombstones: [MembershipKey: MembershipTombstoneRecord?] = [:]
    var files: [String: FileRecord?] = [:]
    var reports: [Int64: ReportRecord?] = [:]
    var events: [StoredEvent] = []
    var counters: [String: Int64] = [:]
    /// Events with an id at or below this are dropped (retention).
    var pruneEventsThrough: Int64? = nil

    var isEmpty: Bool {
        users.isEmpty && sessions.isEmpty && channels.isEmpty && members.isEmpty && messages.isEmpty
            && messageTombstones.isEmpty && membershipTombstones.isEmpty && files.isEmpty && reports.isEmpty
            && events.isEmpty && counters.isEmpty && pruneEventsThrough == nil
    }
}

protocol ChatStorage: Sendable {
    func load() async throws -> StorageSnapshot
    func commit(_ batch: StorageBatch) async throws
}

/// Recipients of an event in one text column: each id between separators, so that "is
/// user X a recipient" is a substring test (user ids never contain U+0001).
let recipientSeparator = "\u{1}"

/// ChatStorage on the tables of Storage/Migrations.swift, for either backend.
struct TableStorage: ChatStorage {
    let database: any SQLDatabase

    func load() async throws -> StorageSnapshot {
        try await database.read { db in try await RecordTables.loadAll(db) }
    }

    func commit(_ batch: StorageBatch) async throws {
        if batch.isEmpty { return }
        try await database.write { db in try await RecordTables.write(batch, db) }
    }
}
