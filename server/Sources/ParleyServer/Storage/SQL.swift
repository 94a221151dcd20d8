// The one interface both storage backends (SQLite, PostgreSQL) implement: statements with
// positional `?` parameters, run inside a transaction, returning rows of plain values.
// Queries are written once in the SQL both engines accept; the few places where the two
// dialects differ (DDL above all) ask `dialect`.

/// A value bound to a statement or read from a row. Integers are 64-bit everywhere;
/// booleans are stored as 0/1 integers so that one statement serves both engines.
enum SQLValue: Sendable, Hashable {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])

    static func bool(_ value: Bool) -> SQLValue { .int(value ? 1 : 0) }
    static func optional(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }
    static func optional(_ value: Int64?) -> SQLValue { value.map { .int($0) } ?? .null }

    /// The integer held; 0 for any other value (a version a write did not return).
    var intOrZero: Int64 { if case .int(let number) = self { number } else { 0 } }
}

/// One result row. Accessors are by column position, in the order of the SELECT list.
struct SQLRow: Sendable {
    var values: [SQLValue]

    /// NULL reads as 0: columns the schema declares NOT NULL never are.
    func int(_ i: Int) -> Int64 { values[i].intOrZero }
    func bool(_ i: Int) -> Bool { int(i) != 0 }
    func optionalInt(_ i: Int) -> Int64? {
        if case .int(let v) = values[i] { return v }
        return nil
    }
    func text(_ i: Int) -> String { optionalText(i) ?? "" }
    func optionalText(_ i: Int) -> String? {
        switch values[i] {
        case .text(let s): return s
        case .blob(let b): return String(decoding: b, as: UTF8.self)
        default: return nil
        }
    }
    func blob(_ i: Int) -> [UInt8] {
        switch values[i] {
        case .blob(let b): return b
        case .text(let s): return Array(s.utf8)
        default: return []
        }
    }
}

enum SQLDialect: String, Sendable {
    case sqlite, postgres

    /// A condition that `column` is one of the texts of a JSON array, bound as one value: one
    /// statement text for any number of them, which PostgreSQL can keep prepared (an IN list
    /// of placeholders is a new text, planned anew, for every count). On PostgreSQL a subquery,
    /// which the plan joins by hash or by key: `= ANY (ARRAY(…))` compared each row with every
    /// element in turn (17 ms for 1,000 users of a channel of 1,000, against 1.2 ms).
    func isInJSONList(_ column: String) -> String {
        switch self {
        case .sqlite: "\(column) IN (SELECT value FROM json_each(?))"
        case .postgres: "\(column) IN (SELECT json_array_elements_text(?::json))"
        }
    }
}

/// Why a statement failed, as far as callers act on it.
enum SQLFailureKind: Sendable {
    /// A UNIQUE or PRIMARY KEY constraint refused the row.
    case uniqueViolation
    /// The engine asks to retry the transaction (PostgreSQL deadlock or serialization failure).
    case retryable
    /// The database cannot be reached (its server is down or restarting): the request may
    /// be retried later, and the client is told so (503 with Retry-After).
    case unavailable
    case other
}

struct StorageError: Error, CustomStringConvertible {
    var kind: SQLFailureKind = .other
    let description: String
    /// PostgreSQL's SQLSTATE, when the database refused a statement.
    var sqlState: String? = nil

    init(_ description: String, kind: SQLFailureKind = .other) {
        self.kind = kind
        self.description = description
    }

    init(description: String) { self.init(description) }
}

/// A connection inside one transaction. Not shared between tasks.
protocol SQLSession: AnyObject {
    var dialect: SQLDialect { get }
    /// Runs one statement and returns every row it produced.
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]
    /// Runs one statement and returns the number of rows it inserted, updated or deleted.
    @discardableResult
    func execute(_ sql: String, _ binds: [SQLValue]) async throws -> Int
    /// Runs statements without parameters separated by semicolons (DDL of a migration).
    func executeScript(_ sql: String) async throws
    /// A statement whose rows nobody reads, that must run before the session's next one and
    /// may run outside the transaction (an advisory lock before a read). PostgreSQL sends it
    /// with that statement, in the same round trip; by default it runs at once.
    func runBeforeNext(_ sql: String, _ binds: [SQLValue]) async throws
    /// A write whose row count nobody reads. PostgreSQL holds it and sends it with the
    /// transaction's next statement, in the same round trip; SQLite runs it at once. A
    /// failure of a held write shows at the statement that sends it.
    func executeHeld(_ write: SQLWrite) async throws
    /// Runs the held writes and `writes` in order, in one round trip where the engine allows
    /// it, and returns the value each write with `returnsOne` produced, in order, followed by
    /// the value of `selecting` (an SQL expression such as a notification) when given.
    /// `last`: no statement follows in this transaction (a write that began late may then
    /// commit with it, `SQLDatabase.writeBeginningLate`).
    func writeTogether(_ writes: [SQLWrite], selecting: SQLExpression?, last: Bool) async throws -> [SQLValue]
    /// A write that has sent nothing yet sends `lock`, then its held writes and `writes` as
    /// `writeTogether` with `last` would, in one round trip and one transaction, with each
    /// write statement as `rewritten` gives it (PostgreSQL: Writers/OneFlightSend.swift).
    /// Returns `lock`'s rows and the write's values. Engines without it throw.
    func writeInOneFlight(lock: SQLExpression, locks: StreamPositions.Locks, writes: [SQLWrite], selecting: SQLExpression?,
                          rewritten: (String, [SQLValue]) throws -> (String, [SQLValue])) async throws
        -> (lockRows: [SQLRow], values: [SQLValue])
}

/// One data-changing statement (INSERT, UPDATE or DELETE) for `SQLSession.executeHeld` or
/// `writeTogether`. `table` is the one table it changes: writes of different tables can
/// share a statement (PostgreSQL's data-modifying WITH, one snapshot for all of them), two
/// of the same table cannot.
struct SQLWrite: Sendable {
    let sql: String
    let binds: [SQLValue]
    let table: String
    /// The statement ends in `RETURNING` one column and changes exactly one row.
    var returnsOne = false
    /// The binds are rows of this many values each, in no order that matters (a multi-row
    /// upsert built from a dictionary).
    var rowWidth: Int? = nil
}

/// An expression with its own `?` values.
struct SQLExpression: Sendable {
    let sql: String
    let binds: [SQLValue]
}

extension SQLSession {
    func runBeforeNext(_ sql: String, _ binds: [SQLValue]) async throws { _ = try await query(sql, binds) }

    /// One statement at a time, at once: for engines where a round trip costs nothing (SQLite).
    func executeHeld(_ write: SQLWrite) async throws {
        try await execute(write.sql, write.binds)
    }

    func writeTogether(_ writes: [SQLWrite], selecting: SQLExpression?, last: Bool) async throws -> [SQLValue] {
        var values: [SQLValue] = []
        for write in writes {
            if write.returnsOne {
                values.append(try await query(write.sql, write.binds).first?.values.first ?? .null)
            } else {
                try await execute(write.sql, write.binds)
            }
        }
        if let selecting {
            values.append(try await query("SELECT " + selecting.sql, selecting.binds).first?.values.first ?? .null)
        }
        return values
    }

    func writeInOneFlight(lock: SQLExpression, locks: StreamPositions.Locks, writes: [SQLWrite], selecting: SQLExpression?,
                          rewritten: (String, [SQLValue]) throws -> (String, [SQLValue])) async throws
        -> (lockRows: [SQLRow], values: [SQLValue]) {
        throw StorageError("this database cannot send a write in one round trip")
    }

    func query(_ sql: String) async throws -> [SQLRow] { try await query(sql, []) }
    func queryOne(_ sql: String, _ binds: [SQLValue] = []) async throws -> SQLRow? {
        try await query(sql, binds).first
    }
}

/// A database: transactions on pooled connections. A write transaction commits when its
/// body returns and rolls back when it throws.
protocol SQLDatabase: Sendable {
    var dialect: SQLDialect { get }
    /// A read-only transaction: one consistent snapshot for every statement of the body.
    func read<T>(_ body: (any SQLSession) async throws -> T) async throws -> T
    /// A read whose statements each see their own snapshot, for a body whose first statement
    /// reads together what must be consistent: PostgreSQL then spares BEGIN and COMMIT, a
    /// round trip each. `onRequestConnections`: on the connections of requests rather than
    /// those for other servers' events (PostgreSQL). By default a `read`.
    func readStatementByStatement<T>(onRequestConnections: Bool, _ body: (any SQLSession) async throws -> T) async throws -> T
    func write<T>(_ body: (any SQLSession) async throws -> T) async throws -> T
    /// A write whose transaction begins at its first write: statements before it run each on
    /// its own, and a write that fits the body's last statement (`writeTogether`'s `last`)
    /// commits with it. PostgreSQL thus spares BEGIN and COMMIT, a round trip each, where the
    /// body reads, then writes once; the channel locks a body takes there are the session's
    /// until its last statement keeps them to the commit (`parley_hold_to_commit`,
    /// Writers/StreamPositions.swift).
    /// By default a `write`.
    func writeBeginningLate<T>(_ body: (any SQLSession) async throws -> T) async throws -> T
    /// Closes every connection; later calls fail.
    func close() async
}

extension SQLDatabase {
    func readStatementByStatement<T>(onRequestConnections: Bool, _ body: (any SQLSession) async throws -> T) async throws -> T {
        try await read(body)
    }

    func readStatementByStatement<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await readStatementByStatement(onRequestConnections: false, body)
    }

    func writeBeginningLate<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await write(body)
    }
}

/// A database whose writers can share one commit (SQLite: one writer, and a commit's fsync
/// costs more than most requests). A member's changes are its own — they roll back alone
/// when it fails — but become durable only with `commitGroup` and `durable`, which every
/// member waits for before it answers (Writers/SQLiteWriters.swift).
protocol GroupCommitting: SQLDatabase {
    /// Runs `body` in the open group transaction (beginning one if none is open), inside a
    /// savepoint of its own: undone alone when it throws.
    func writeInGroup<T>(_ body: (any SQLSession) async throws -> T) async throws -> T
    /// Commits the open group transaction; returns the commit's number for `durable`.
    /// Throws when it could not (then nothing of the group is stored), or when a member's
    /// failure took the whole transaction with it.
    func commitGroup() async throws -> UInt64
    /// Returns once the commit numbered `commit` is on the disk (called outside the write
    /// lock: the next group runs meanwhile). Throws if it could not be written.
    func durable(_ commit: UInt64) async throws
}
