import CParleySQLite

/// The kinds of records the server persists. Each record is one JSON document under a key.
/// A channel's members are records of their own (`member`, keyed by `memberRecordKey`), not
/// part of the channel's record: a change to a few members (a message moves its sender's
/// read receipt) rewrites those members only, whatever the size of the channel.
enum RecordKind: String, Sendable, CaseIterable {
    case user, session, channel, member, message, messageTombstone = "message_tombstone"
    case membershipTombstone = "membership_tombstone", file, report
}

/// Separates a member record's channel URL from its user id. Channel URLs are
/// `[A-Za-z0-9_.-]` (`validateChannelURL`), so the key splits at its first separator.
let memberKeySeparator: Character = "\u{1}"

func memberRecordKey(_ channelUrl: String, _ userId: String) -> String {
    channelUrl + String(memberKeySeparator) + userId
}

/// One entry of the global event log (drives SSE fan-out and `Last-Event-ID` resume).
struct StoredEvent: Sendable {
    let id: Int64
    let createdAt: Int64
    let category: String
    let recipients: [String]
    let data: String
}

struct StorageSnapshot: Sendable {
    var records: [RecordKind: [(key: String, body: String)]] = [:]
    var events: [StoredEvent] = []
    var counters: [String: Int64] = [:]
}

/// Everything one request changed; committed atomically before the response is sent.
struct StorageBatch: Sendable {
    var puts: [RecordKind: [String: String]] = [:]
    var deletes: [RecordKind: Set<String>] = [:]
    var events: [StoredEvent] = []
    var counters: [String: Int64] = [:]
    /// Events with an id at or below this are dropped (retention).
    var pruneEventsThrough: Int64? = nil

    var isEmpty: Bool {
        puts.isEmpty && deletes.isEmpty && events.isEmpty && counters.isEmpty && pruneEventsThrough == nil
    }
}

/// The storage backend. SQLite is the embedded default; another backend (PostgreSQL) only
/// has to implement these two operations with the same atomicity.
protocol ChatStorage: Sendable {
    func load() throws -> StorageSnapshot
    func commit(_ batch: StorageBatch) throws
}

/// SQLite backend: one file, WAL journal, synchronous=FULL so an acknowledged commit
/// survives a crash of the process or the machine.
final class SQLiteChatStorage: ChatStorage, @unchecked Sendable {
    // Only used while the caller holds the server state lock, so no lock of its own.
    private let db: OpaquePointer

    init(path: String) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let handle { sqlite3_close(handle) }
            throw StorageError(description: "cannot open database \(path): \(message)")
        }
        db = handle
        sqlite3_busy_timeout(db, 5000)
        try exec("PRAGMA journal_mode=WAL")
        try exec("PRAGMA synchronous=FULL")
        try exec("""
            CREATE TABLE IF NOT EXISTS records (kind TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL,
                PRIMARY KEY (kind, key)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, created_at INTEGER NOT NULL,
                category TEXT NOT NULL, recipients TEXT NOT NULL, data TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
            """)
    }

    deinit { sqlite3_close(db) }

    private func exec(_ sql: String) throws {
        var err: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &err) != SQLITE_OK {
            let message = err.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(err)
            throw StorageError(description: "sqlite: \(message)")
        }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw StorageError(description: "sqlite prepare: \(String(cString: sqlite3_errmsg(db)))")
        }
        return stmt
    }

    private func text(_ stmt: OpaquePointer, _ column: Int32) -> String {
        guard let p = sqlite3_column_text(stmt, column) else { return "" }
        return String(cString: p)
    }

    private func bind(_ stmt: OpaquePointer, _ index: Int32, _ value: String) {
        sqlite3_bind_text(stmt, index, value, -1, parley_server_sqlite_transient())
    }

    private func step(_ stmt: OpaquePointer) throws {
        let rc = sqlite3_step(stmt)
        guard rc == SQLITE_DONE || rc == SQLITE_ROW else {
            throw StorageError(description: "sqlite step: \(String(cString: sqlite3_errmsg(db)))")
        }
    }

    func load() throws -> StorageSnapshot {
        var snapshot = StorageSnapshot()
        let records = try prepare("SELECT kind, key, body FROM records")
        defer { sqlite3_finalize(records) }
        while sqlite3_step(records) == SQLITE_ROW {
            guard let kind = RecordKind(rawValue: text(records, 0)) else { continue }
            snapshot.records[kind, default: []].append((text(records, 1), text(records, 2)))
        }
        let events = try prepare("SELECT id, created_at, category, recipients, data FROM events ORDER BY id")
        defer { sqlite3_finalize(events) }
        while sqlite3_step(events) == SQLITE_ROW {
            let recipients = text(events, 3).split(separator: "\u{1}").map(String.init)
            snapshot.events.append(StoredEvent(
                id: sqlite3_column_int64(events, 0), createdAt: sqlite3_column_int64(events, 1),
                category: text(events, 2), recipients: recipients, data: text(events, 4)))
        }
        let counters = try prepare("SELECT name, value FROM counters")
        defer { sqlite3_finalize(counters) }
        while sqlite3_step(counters) == SQLITE_ROW {
            snapshot.counters[text(counters, 0)] = sqlite3_column_int64(counters, 1)
        }
        return snapshot
    }

    func commit(_ batch: StorageBatch) throws {
        if batch.isEmpty { return }
        try exec("BEGIN IMMEDIATE")
        do {
            let put = try prepare("INSERT OR REPLACE INTO records (kind, key, body) VALUES (?, ?, ?)")
            defer { sqlite3_finalize(put) }
            for (kind, entries) in batch.puts {
                for (key, body) in entries {
                    sqlite3_reset(put)
                    bind(put, 1, kind.rawValue); bind(put, 2, key); bind(put, 3, body)
                    try step(put)
                }
            }
            let delete = try prepare("DELETE FROM records WHERE kind = ? AND key = ?")
            defer { sqlite3_finalize(delete) }
            for (kind, keys) in batch.deletes {
                for key in keys where batch.puts[kind]?[key] == nil {
                    sqlite3_reset(delete)
                    bind(delete, 1, kind.rawValue); bind(delete, 2, key)
                    try step(delete)
                }
            }
            let event = try prepare("INSERT INTO events (id, created_at, category, recipients, data) VALUES (?, ?, ?, ?, ?)")
            defer { sqlite3_finalize(event) }
            for e in batch.events {
                sqlite3_reset(event)
                sqlite3_bind_int64(event, 1, e.id)
                sqlite3_bind_int64(event, 2, e.createdAt)
                bind(event, 3, e.category)
                bind(event, 4, e.recipients.joined(separator: "\u{1}"))
                bind(event, 5, e.data)
                try step(event)
            }
            let counter = try prepare("INSERT OR REPLACE INTO counters (name, value) VALUES (?, ?)")
            defer { sqlite3_finalize(counter) }
            for (name, value) in batch.counters {
                sqlite3_reset(counter)
                bind(counter, 1, name)
                sqlite3_bind_int64(counter, 2, value)
                try step(counter)
            }
            if let through = batch.pruneEventsThrough {
                let prune = try prepare("DELETE FROM events WHERE id <= ?")
                defer { sqlite3_finalize(prune) }
                sqlite3_bind_int64(prune, 1, through)
                try step(prune)
            }
            try exec("COMMIT")
        } catch {
            try? exec("ROLLBACK")
            throw error
        }
    }
}
