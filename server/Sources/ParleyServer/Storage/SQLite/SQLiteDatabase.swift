import CParleySQLite

/// One SQLite connection with its prepared statements, used by one task at a time.
final class SQLiteConnection: SQLSession, @unchecked Sendable {
    let dialect = SQLDialect.sqlite
    private let db: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    let path: String

    init(path: String, readOnly: Bool) throws {
        self.path = path
        var handle: OpaquePointer?
        // NOMUTEX: a connection is only ever used by the task that borrowed it.
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let handle { sqlite3_close(handle) }
            throw StorageError("cannot open database \(path): \(message)")
        }
        db = handle
        sqlite3_busy_timeout(db, 10_000)
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    private func failure(_ what: String, _ code: Int32) -> StorageError {
        let message = String(cString: sqlite3_errmsg(db))
        let kind: SQLFailureKind = switch code {
        // SQLITE_CONSTRAINT_PRIMARYKEY and SQLITE_CONSTRAINT_UNIQUE (macros Swift cannot import).
        case SQLITE_CONSTRAINT | (6 << 8), SQLITE_CONSTRAINT | (8 << 8): .uniqueViolation
        default: .other
        }
        return StorageError("sqlite \(what): \(message) (\(code))", kind: kind)
    }

    private func statement(_ sql: String) throws -> OpaquePointer {
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            sqlite3_clear_bindings(cached)
            return cached
        }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw failure("prepare", rc) }
        statements[sql] = stmt
        return stmt
    }

    private func bind(_ stmt: OpaquePointer, _ binds: [SQLValue]) throws {
        for (i, value) in binds.enumerated() {
            let index = Int32(i + 1)
            let rc: Int32
            switch value {
            case .null: rc = sqlite3_bind_null(stmt, index)
            case .int(let v): rc = sqlite3_bind_int64(stmt, index, v)
            case .text(let s): rc = sqlite3_bind_text(stmt, index, s, -1, parley_server_sqlite_transient())
            case .blob(let b):
                rc = b.withUnsafeBytes { raw in
                    // A zero-length blob still binds a blob, not NULL.
                    sqlite3_bind_blob(stmt, index, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(b.count),
                                      parley_server_sqlite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw failure("bind", rc) }
        }
    }

    private func column(_ stmt: OpaquePointer, _ i: Int32) -> SQLValue {
        switch sqlite3_column_type(stmt, i) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .int(sqlite3_column_int64(stmt, i))
        case SQLITE_FLOAT: return .int(Int64(sqlite3_column_double(stmt, i)))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(stmt, i))
            guard count > 0, let p = sqlite3_column_blob(stmt, i) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: p, count: count)))
        default:
            let count = Int(sqlite3_column_bytes(stmt, i))
            guard count > 0, let p = sqlite3_column_text(stmt, i) else { return .text("") }
            return .text(String(decoding: UnsafeBufferPointer(start: p, count: count), as: UTF8.self))
        }
    }

    func queryNow(_ sql: String, _ binds: [SQLValue] = []) throws -> [SQLRow] {
        let stmt = try statement(sql)
        defer { sqlite3_reset(stmt) }
        try bind(stmt, binds)
        let columns = sqlite3_column_count(stmt)
        var rows: [SQLRow] = []
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw failure("step", rc) }
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columns))
            for i in 0..<columns { values.append(column(stmt, i)) }
            rows.append(SQLRow(values: values))
        }
        return rows
    }

    @discardableResult
    func executeNow(_ sql: String, _ binds: [SQLValue] = []) throws -> Int {
        let stmt = try statement(sql)
        defer { sqlite3_reset(stmt) }
        try bind(stmt, binds)
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { throw failure("step", rc) }
        }
        return Int(sqlite3_changes64(db))
    }

    /// The WAL file SQLite uses for this connection's database (beside the file a symbolic
    /// link names, not beside the link).
    var walPath: String {
        get throws {
            guard let file = sqlite3_db_filename(db, "main"), let wal = sqlite3_filename_wal(file) else {
                throw StorageError("sqlite: no WAL file name for \(path)")
            }
            return String(cString: wal)
        }
    }

    /// No transaction is open (SQLite rolls one back by itself after some errors, such as a
    /// full disk).
    var isInAutocommit: Bool { sqlite3_get_autocommit(db) != 0 }

    /// Copies what the WAL holds into the database file without waiting for readers or the
    /// writer (a PASSIVE checkpoint). False if SQLite reported an error.
    @discardableResult
    func checkpointPassively() -> Bool {
        sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil) == SQLITE_OK
    }

    /// Replaces SQLite's automatic checkpoint of this connection: after each commit, `hook`
    /// hears how many pages the WAL holds (WALCheckpointer.swift).
    func onCommittedToWAL(_ checkpointer: WALCheckpointer) {
        let context = Unmanaged.passUnretained(checkpointer).toOpaque()
        sqlite3_wal_hook(db, { context, _, _, pages in
            guard let context else { return SQLITE_OK }
            Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().writerCommitted(walPages: pages)
            return SQLITE_OK
        }, context)
    }

    /// `PRAGMA data_version`: moves when another connection commits.
    func dataVersion() throws -> Int64 {
        guard let row = try queryNow("PRAGMA data_version", []).first else { throw StorageError("sqlite: no data_version") }
        return row.int(0)
    }

    func executeScriptNow(_ sql: String) throws {
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(db, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let message = err.map { String(cString: $0) } ?? "error \(rc)"
            sqlite3_free(err)
            throw StorageError("sqlite: \(message)", kind: rc == SQLITE_CONSTRAINT ? .uniqueViolation : .other)
        }
    }

    // The protocol's async requirements, met by the synchronous calls above.
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] { try queryNow(sql, binds) }
    @discardableResult
    func execute(_ sql: String, _ binds: [SQLValue]) async throws -> Int { try executeNow(sql, binds) }
    func executeScript(_ sql: String) async throws { try executeScriptNow(sql) }
}

/// The SQLite backend: one file in WAL mode, one writer connection (SQLite allows one
/// writer at a time anyway) and a few read-only connections whose snapshots never wait for
/// the writer's commit. An acknowledged commit survives a crash of the process or of the
/// machine: the writer's COMMIT appends to the WAL and `WALSyncer` syncs it outside the
/// write lock; nothing is answered, delivered or read before that sync.
final class SQLiteDatabase: GroupCommitting, @unchecked Sendable {
    let dialect = SQLDialect.sqlite
    let path: String
    private let writer: SQLiteConnection
    private let writerLock = AsyncLock()
    private let readers: AsyncPool<SQLiteConnection>
    private let checkpointer: WALCheckpointer
    private let syncer: WALSyncer
    /// The group transaction is open (guarded by `writerLock`).
    private var groupOpen = false
    /// Why the open group can no longer commit (a member's failure ended its transaction).
    private var groupFailure: StorageError? = nil

    /// Work each write transaction does just before its COMMIT, inside it; set once the
    /// schema is in place (App.swift), before any request: the search index takes in the
    /// messages the transaction changed (SearchQueries.indexNotedChanges).
    var beforeCommit: (@Sendable (SQLiteConnection) throws -> Void)? = nil

    /// Called at the start of a write transaction that follows commits of another process (an
    /// admin command beside the server, Operations/AdminCommands.swift): what the server keeps
    /// between requests on trust of its own writes must be read again.
    var afterOtherProcessCommits: (@Sendable () -> Void)? = nil
    /// The writer's `PRAGMA data_version` when it last looked: it moves only with commits of
    /// other connections, and nothing but the writer writes in this process. Guarded by
    /// `writerLock`; -1 after a failed transaction, so the next one looks again in full.
    private var seenDataVersion: Int64 = 0

    init(path: String, readers readerCount: Int = 4) throws {
        self.path = path
        writer = try SQLiteConnection(path: path, readOnly: false)
        // NORMAL: in WAL mode the writer's COMMIT does not sync; `syncer` does, after the
        // write lock is released. NORMAL still syncs the WAL's new header when the WAL starts
        // over after a full checkpoint, before any frame overwrites the old ones (with OFF a
        // power loss could then replay old frames over newer pages), and checkpoints with
        // syncs; the writer never checkpoints anyway (WALCheckpointer.swift).
        try writer.executeScriptNow("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
        syncer = try WALSyncer(walPath: writer.walPath)
        // Readers and the checkpointer open after the writer has switched the file to WAL.
        var opened: [SQLiteConnection] = []
        for _ in 0..<max(1, readerCount) { opened.append(try SQLiteConnection(path: path, readOnly: true)) }
        readers = AsyncPool(opened)
        checkpointer = try WALCheckpointer(path: path)
        writer.onCommittedToWAL(checkpointer)
        seenDataVersion = try writer.dataVersion()
    }

    /// After BEGIN IMMEDIATE, under `writerLock`: no other process commits until this
    /// transaction ends.
    private func noticeOtherProcessCommits() throws {
        let version = try writer.dataVersion()
        if version != seenDataVersion { afterOtherProcessCommits?() }
        seenDataVersion = version
    }

    func read<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await ServerMetrics.shared.transaction(.read) {
            let connection = await readers.borrow()
            let outcome: Result<T, any Error>
            do {
                defer { readers.giveBack(connection) }
                outcome = .success(try await transaction(on: connection, begin: "BEGIN", body))
            } catch {
                outcome = .failure(error)
            }
            // The snapshot may hold commits not yet on the disk: nothing it showed, an error
            // it led to included ("not found" after a deletion), goes out before they are.
            try await syncer.durableThroughBegun()
            return try outcome.get()
        }
    }

    func write<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        let (result, commit): (T, UInt64) = try await ServerMetrics.shared.transaction(.write) {
            await writerLock.lock()
            defer { writerLock.unlock() }
            if groupOpen { throw StorageError("sqlite: a write began while a group transaction is open") }
            // IMMEDIATE: the write lock is taken at BEGIN, so no statement inside fails as busy.
            try writer.executeScriptNow("BEGIN IMMEDIATE")
            do {
                try noticeOtherProcessCommits()
                let result = try await body(writer)
                try beforeCommit?(writer)
                return (result, try commitToWAL())
            } catch {
                if !writer.isInAutocommit { try? writer.executeScriptNow("ROLLBACK") }
                seenDataVersion = -1
                throw error
            }
        }
        try await syncer.durable(commit)
        return result
    }

    /// The writer's COMMIT, numbered for `syncer`: appended to the WAL, not yet durable.
    private func commitToWAL() throws -> UInt64 {
        let number = try syncer.beginCommit()
        defer { syncer.requestSync(through: number) }
        try writer.executeScriptNow("COMMIT")
        return number
    }

    func durable(_ commit: UInt64) async throws {
        try await syncer.durable(commit)
    }

    func writeInGroup<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await ServerMetrics.shared.transaction(.write) {
            await writerLock.lock()
            defer { writerLock.unlock() }
            if let groupFailure { throw groupFailure }
            if !groupOpen {
                try writer.executeScriptNow("BEGIN IMMEDIATE")
                groupOpen = true
                do {
                    try noticeOtherProcessCommits()
                } catch {
                    groupFailure = StorageError("sqlite: \(error)")
                    throw error
                }
            }
            try writer.executeScriptNow("SAVEPOINT request")
            do {
                let result = try await body(writer)
                try writer.executeScriptNow("RELEASE request")
                return result
            } catch {
                if writer.isInAutocommit {
                    groupFailure = StorageError("sqlite: the group transaction ended with a member's failure: \(error)")
                } else {
                    do {
                        try writer.executeScriptNow("ROLLBACK TO request")
                        try writer.executeScriptNow("RELEASE request")
                    } catch let undo {
                        groupFailure = StorageError("sqlite: a member's changes could not be undone: \(undo)")
                    }
                }
                throw error
            }
        }
    }

    func commitGroup() async throws -> UInt64 {
        try await ServerMetrics.shared.transaction(.commit) {
            await writerLock.lock()
            defer { writerLock.unlock() }
            guard groupOpen else { return syncer.visibleThrough }
            groupOpen = false
            let failure = groupFailure
            groupFailure = nil
            do {
                if let failure { throw failure }
                try beforeCommit?(writer)
                return try commitToWAL()
            } catch {
                if !writer.isInAutocommit { try? writer.executeScriptNow("ROLLBACK") }
                seenDataVersion = -1
                // The members answer with this failure; what they read came partly from the
                // groups before, which must be on the disk first (rare: held under the lock).
                try? await syncer.durableThroughBegun()
                throw error
            }
        }
    }

    /// A reader's transaction.
    private func transaction<T>(on connection: SQLiteConnection, begin: String,
                                _ body: (any SQLSession) async throws -> T) async throws -> T {
        try connection.executeScriptNow(begin)
        do {
            let result = try await body(connection)
            try connection.executeScriptNow("COMMIT")
            return result
        } catch {
            try? connection.executeScriptNow("ROLLBACK")
            throw error
        }
    }

    func close() async {}
}
