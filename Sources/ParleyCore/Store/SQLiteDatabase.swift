/// A small SQLite wrapper for the local cache (the Store layer builds its tables on it).
///
/// Threading rule: a `SQLiteDatabase` and its statements are NOT thread-safe. They
/// belong to the client's one serial engine executor, which makes every call, in order,
/// never two at once (which thread runs a call does not matter). The connection is
/// therefore opened with `SQLITE_OPEN_NOMUTEX` ("multi-thread" mode): SQLite's own
/// per-connection mutex would only add locking cost to what the executor already
/// guarantees, and it would not make a statement cache or a transaction nesting depth
/// safe to share anyway. The types are marked non-Sendable so the compiler enforces it.
///
/// Recovery rule: opening never crashes and never fails just because the file is bad.
/// A file that is not a database, fails `PRAGMA quick_check`, or whose `user_version`
/// is newer than the newest migration (written by a newer program) is moved aside with
/// its `-wal`/`-shm`/`-journal` to "<path>.corrupt-<unix-ms>" / "<path>.newer-<unix-ms>"
/// and a fresh database is created; `recovery` says what happened so the caller can log
/// it. Errors that say nothing about the file itself (busy, I/O error, disk full,
/// permission denied) are thrown instead: moving a good cache aside because of them
/// would throw away data for nothing.

import CParleySystem
import CSQLite
import Glibc

public enum SQLiteLocation: Sendable, Hashable {
    case file(path: String)
    /// A private in-memory database, gone on close.
    case memory
}

/// One step of the schema: the database moves from `version - 1` to `version` by running
/// `sql` (or `apply`) and setting `PRAGMA user_version`, in one transaction.
public struct SQLiteMigration: Sendable {
    public let version: Int32
    /// Statements to execute; empty when the migration is a closure.
    public let sql: String
    let apply: (@Sendable (SQLiteDatabase) throws(ParleyError) -> Void)?

    public init(version: Int32, sql: String) {
        self.version = version
        self.sql = sql
        self.apply = nil
    }

    /// A migration that needs code (data rewrites). It runs inside the migration's
    /// transaction; throwing rolls it back.
    public init(version: Int32, apply: @escaping @Sendable (SQLiteDatabase) throws(ParleyError) -> Void) {
        self.version = version
        self.sql = ""
        self.apply = apply
    }
}

public enum SQLiteRecoveryReason: Sendable, Equatable {
    /// Not a database, failed integrity checks, or a schema this program did not write.
    case corrupt(detail: String)
    /// Written by a newer program: `found` is its user_version, `newest` ours.
    case newerVersion(found: Int32, newest: Int32)

    var fileLabel: String {
        switch self {
        case .corrupt: "corrupt"
        case .newerVersion: "newer"
        }
    }
}

/// What opening had to do to get a usable database.
public enum SQLiteRecovery: Sendable, Equatable, CustomStringConvertible {
    /// The old file (with its -wal/-shm/-journal, suffixed to the new name) is kept at
    /// `movedTo`; the database now in place is fresh.
    case movedAside(reason: SQLiteRecoveryReason, movedTo: String)

    public var movedTo: String {
        switch self {
        case .movedAside(_, let movedTo): movedTo
        }
    }

    public var description: String {
        switch self {
        case .movedAside(.corrupt(let detail), let movedTo):
            "cache database was unusable (\(detail)); moved to \(movedTo) and recreated"
        case .movedAside(.newerVersion(let found, let newest), let movedTo):
            "cache database has schema version \(found), newer than \(newest); moved to \(movedTo) and recreated"
        }
    }
}

public final class SQLiteDatabase {
    public static let defaultBusyTimeoutMilliseconds: Int32 = 5000
    /// Cached statements beyond this are dropped (all at once: simple, and a workload
    /// that exceeds it is generating SQL dynamically and gains nothing from caching).
    static let statementCacheLimit = 256

    public let location: SQLiteLocation
    /// Nil when the file opened as it was.
    public private(set) var recovery: SQLiteRecovery?
    /// The file was larger than `fullCheckLimitBytes`: opening read its schema but did not
    /// walk every page; run `quickCheck` on it (off the owner's thread) to finish the job.
    public private(set) var integrityCheckDeferred = false
    /// Files up to this size get the full structural check (`quick_check`) at open, unless
    /// the last clean close left them as they are (`closedMarkerSuffix`).
    public static let fullCheckLimitBytes: Int64 = 64 << 20
    /// This open walked the file whole (`quick_check`).
    public var walkedAtOpen: Bool { walkedAt != nil && printAtOpen == nil }
    /// When the file was last walked whole (unix ms): at this open, or at an earlier one
    /// whose file every clean close since left byte for byte as this open found it. Nil:
    /// not walked at open (a large file, a reading connection, memory).
    private var walkedAt: Int64?
    /// The file's fingerprint as this open found it matching the last clean close's.
    private var printAtOpen: SQLiteFiles.FilePrint?
    /// The journal mode in effect: "wal" for files ("memory" for in-memory databases;
    /// something else only where the file system cannot do WAL).
    public private(set) var journalMode: String = ""

    private var connection: SQLiteConnection
    private var cachedStatements: [String: SQLiteStatement] = [:]
    /// The cached statements by where their SQL text's bytes live: most SQL is a literal or
    /// a `static let`, whose bytes stay put, so a lookup hashes one integer instead of the
    /// whole text (this runs for every statement of every received message). A hit is
    /// confirmed by comparing the texts, which is immediate for the same storage.
    private var statementsByTextAddress: [Int: SQLiteStatement] = [:]
    /// Migrations run one by one even on a new database (`FreshSchema` captures with it).
    private var replaysMigrations = true
    /// The file's WAL outlives the connection, emptied (`configure`, `close`).
    private var keepsEmptyWAL = false
    private var savepointDepth = 0

    /// Runs at the end of every outermost `transaction`, just before its COMMIT, inside it
    /// (a failure rolls the whole transaction back). The cache applies its search notes
    /// there once enough wait (ChatCache+Search.swift, `indexChangedMessages`).
    public var beforeCommit: ((SQLiteDatabase) throws(ParleyError) -> Void)?

    /// Opens (creating if needed) the database, configures it (WAL, synchronous=NORMAL,
    /// foreign_keys=ON, busy timeout), recovers from a bad file (see the file comment),
    /// then applies the migrations newer than its `user_version`, each in its own
    /// transaction. `migrations` must be numbered 1...N in order.
    ///
    /// A file is created with mode 0600 (whatever the umask) before SQLite sees it, and
    /// an existing one is set to 0600; SQLite creates `-wal`/`-shm` with the same mode.
    /// A failing migration throws and leaves the database at the last good version.
    ///
    /// A new, empty database gets the schema the migrations leave in one transaction
    /// (`FreshSchema`), not each migration in turn; `replayingMigrations` forces the steps.
    public init(
        location: SQLiteLocation,
        migrations: [SQLiteMigration],
        busyTimeoutMilliseconds: Int32 = SQLiteDatabase.defaultBusyTimeoutMilliseconds,
        replayingMigrations: Bool = false
    ) throws(ParleyError) {
        try Self.validate(migrations)
        self.replaysMigrations = replayingMigrations
        let newest = migrations.last?.version ?? 0
        let handle: OpaquePointer
        switch location {
        case .memory:
            handle = try Self.openHandle(":memory:", busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        case .file(let path):
            guard !path.isEmpty, !path.utf8.contains(0) else {
                throw ParleyError.invalidArgument("database path must be non-empty and contain no NUL byte")
            }
            let freshImage = { replayingMigrations ? nil : FreshSchema.fileImage(for: migrations) }
            let opened = try Self.openFile(path: path, newest: newest, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
                                           freshImage: freshImage)
            handle = opened.handle
            recovery = opened.recovery
            integrityCheckDeferred = opened.checkDeferred
            walkedAt = opened.walkedAt
            printAtOpen = opened.printAtOpen
        }
        self.location = location
        self.connection = SQLiteConnection(handle: handle)
        do throws(ParleyError) {
            try configureAndMigrate(migrations)
        } catch {
            // Damage that quick_check cannot see (index contents) may surface only when a
            // migration touches it: that file is moved aside too, once.
            guard case .file(let path) = location, recovery == nil, lastFailureIsCorruption else {
                close()
                throw error
            }
            close()
            let reason = SQLiteRecoveryReason.corrupt(detail: error.message)
            let movedTo = try SQLiteFiles.moveAside(path: path, label: reason.fileLabel)
            try SQLiteFiles.prepare(path: path)
            connection = SQLiteConnection(handle: try Self.openHandle(path, busyTimeoutMilliseconds: busyTimeoutMilliseconds))
            recovery = .movedAside(reason: reason, movedTo: movedTo)
            do throws(ParleyError) {
                try configureAndMigrate(migrations)
            } catch {
                close()
                throw error
            }
        }
    }

    /// The main database's bytes as a file would hold them (`sqlite3_serialize`), nil
    /// when SQLite cannot produce them.
    func serializedImage() -> [UInt8]? {
        guard let handle = connection.handle else { return nil }
        var size: sqlite3_int64 = 0
        guard let bytes = sqlite3_serialize(handle, "main", &size, 0) else { return nil }
        defer { sqlite3_free(bytes) }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(size)))
    }

    /// Opens an existing database file read-only, as is (no check, no migration): a second
    /// connection beside the writer's, for reads that must not wait for its transactions
    /// (WAL lets readers and the writer work at once).
    public init(readingExisting path: String, busyTimeoutMilliseconds: Int32 = SQLiteDatabase.defaultBusyTimeoutMilliseconds)
        throws(ParleyError)
    {
        try Self.checkDescriptorsLeft(1, opening: path)
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE, Self.vfs(for: path))
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { SQLiteErrorText.message(handle: $0, code: code) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(handle)
            throw ParleyError(.cache, "opening \(path) for reading: \(message)")
        }
        sqlite3_busy_timeout(handle, max(0, busyTimeoutMilliseconds))
        Self.keepTemporaryFilesInMemory(handle, path: path)
        try SQLiteFunctions.register(on: handle, path: path)
        location = .file(path: path)
        connection = SQLiteConnection(handle: handle)
    }

    private func configureAndMigrate(_ migrations: [SQLiteMigration]) throws(ParleyError) {
        connection.lastFailureCode = SQLITE_OK
        journalMode = try configure()
        try migrate(migrations)
    }

    deinit {
        close()
    }

    /// Finalizes the cached statements and closes the connection (an open transaction is
    /// rolled back). Idempotent. Statements still held afterwards throw `invalidState`.
    public func close() {
        for statement in cachedStatements.values {
            statement.finalize()
        }
        cachedStatements.removeAll()
        statementsByTextAddress.removeAll()
        let closesFile = keepsEmptyWAL && connection.handle != nil
        if keepsEmptyWAL, let handle = connection.handle {
            // Only now: a limit while open would shrink the WAL at each restart after a
            // checkpoint, and every later frame would then extend the file (new blocks,
            // zeroed by the kernel) instead of overwriting it. With it, the last close
            // truncates the WAL it keeps to nothing.
            _ = Self.firstColumn(handle, "PRAGMA journal_size_limit=0")
        }
        connection.close()
        if closesFile, case .file(let path) = location, let walkedAt {
            Self.noteCleanClose(path: path, walkedAt: walkedAt, printAtOpen: printAtOpen)
        }
    }

    /// Beside a file its last connection closed with its WAL empty: the file's length and
    /// fingerprint then (`SQLiteFiles.fingerprint`), and when it was last walked whole. An
    /// open that finds the file byte for byte so, its WAL empty, within a day of that walk,
    /// skips the walk: what SQLite left at a close it had checked is not walked again at
    /// each connect (`quick_check` reads every row, about 1.4 µs per KiB here; the
    /// fingerprint about a tenth of that, at the close and at the open).
    public static let closedMarkerSuffix = ".closed"

    private static func noteCleanClose(path: String, walkedAt: Int64, printAtOpen: SQLiteFiles.FilePrint?) {
        // Another connection still open (a reader) keeps the WAL: then nothing is noted.
        guard (SQLiteFiles.size(path + "-wal") ?? 0) == 0 else { return }
        // A file whose stamp did not move since the open is not read again. Were it changed
        // within the same clock tick (the stamp would not show it), the fingerprint noted
        // would not match it at the next open, which then walks it: never a walk skipped
        // wrongly, at worst one done again.
        let unchanged = printAtOpen.flatMap { opened in SQLiteFiles.FilePrint.Stamp(path: path) == opened.stamp ? opened : nil }
        guard let print = unchanged ?? SQLiteFiles.fingerprint(path), print.length <= fullCheckLimitBytes else { return }
        SQLiteFiles.writeSmallFile(path + closedMarkerSuffix,
                                   "parley-closed length=\(print.length) fingerprint=\(print.value) walked=\(walkedAt)\n",
                                   synced: false)
    }

    /// The walk time `noteCleanClose` recorded, if the file is still as it left it and that
    /// walk is less than `fullCheckIntervalSeconds` old; else nil (the file is walked).
    private static func walkedBeforeUnchanged(path: String) -> (walked: Int64, print: SQLiteFiles.FilePrint)? {
        guard let text = SQLiteFiles.readSmallFile(path + closedMarkerSuffix) else { return nil }
        var fields: [Substring: Substring] = [:]
        for part in text.split(whereSeparator: { $0 == " " || $0 == "\n" }) {
            guard let equals = part.firstIndex(of: "=") else { continue }
            fields[part[..<equals]] = part[part.index(after: equals)...]
        }
        guard text.hasPrefix("parley-closed "), let length = fields["length"].flatMap({ Int64($0) }),
              let value = fields["fingerprint"].flatMap({ UInt64($0) }), let walked = fields["walked"].flatMap({ Int64($0) })
        else { return nil }
        let age = SQLiteFiles.unixMilliseconds() - walked
        guard age >= 0, age < Int64(fullCheckIntervalSeconds) * 1000, length <= fullCheckLimitBytes,
              (SQLiteFiles.size(path + "-wal") ?? 0) == 0,
              let print = SQLiteFiles.fingerprint(path), print.length == length, print.value == value else { return nil }
        return (walked, print)
    }

    public var isClosed: Bool { connection.handle == nil }

    /// Gives the memory of the connection's page cache back (pages are read again from the
    /// file when needed): what an idle cache of a process with thousands of them does.
    public func releaseMemory() {
        guard let handle = connection.handle else { return }
        _ = sqlite3_db_release_memory(handle)
    }

    private func liveHandle(_ operation: String) throws(ParleyError) -> OpaquePointer {
        guard let handle = connection.handle else {
            throw ParleyError(.invalidState, "\(operation): the database is closed")
        }
        return handle
    }

    // MARK: State

    /// `PRAGMA user_version`: the schema version. 0 if it cannot be read (closed).
    public var userVersion: Int32 {
        guard let handle = connection.handle,
              case (SQLITE_OK, .integer(let version)) = Self.firstColumn(handle, "PRAGMA user_version") else { return 0 }
        return Int32(truncatingIfNeeded: version)
    }

    /// Rows changed by the most recent INSERT/UPDATE/DELETE.
    public var changes: Int {
        guard let handle = connection.handle else { return 0 }
        return Int(sqlite3_changes64(handle))
    }

    public var lastInsertRowID: Int64 {
        guard let handle = connection.handle else { return 0 }
        return sqlite3_last_insert_rowid(handle)
    }

    /// Extended SQLite result code of the most recent failed call (`SQLITE_OK` if none):
    /// lets the Store tell a full disk (13) or corruption from other `.cache` errors.
    public var lastFailureCode: Int32 { connection.lastFailureCode }

    /// The most recent failure says the file is damaged; closing and reopening the
    /// database moves it aside (if `quick_check` or the migrations see it).
    public var lastFailureIsCorruption: Bool { SQLiteErrorText.isCorruption(connection.lastFailureCode) }

    /// True while a transaction is open (including one SQLite has not yet rolled back).
    public var isInTransaction: Bool {
        guard let handle = connection.handle else { return false }
        return sqlite3_get_autocommit(handle) == 0
    }

    // MARK: Running SQL

    /// Executes one or more statements, discarding any rows.
    public func execute(_ sql: String) throws(ParleyError) {
        let handle = try liveHandle("execute")
        guard !sql.utf8.contains(0) else {
            throw ParleyError.invalidArgument("execute: SQL contains a NUL byte: \(SQLiteErrorText.prefix(of: sql))")
        }
        var errorText: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &errorText)
        guard code != SQLITE_OK else { return }
        connection.lastFailureCode = code
        let message = errorText.map { String(cString: $0) } ?? SQLiteErrorText.message(handle: handle, code: code)
        sqlite3_free(errorText)
        throw ParleyError(.cache, SQLiteErrorText.make("execute", message: message, code: code, sql: sql))
    }

    /// The prepared statement for `sql` (exactly one statement), from the cache when it
    /// was prepared before. A cached statement comes back reset with its bindings cleared,
    /// even if its last user abandoned it mid-iteration. While it is being iterated by
    /// `rows(_:)`, a separate uncached statement is returned instead, so that a loop body
    /// may run the same query without restarting the loop under it.
    public func statement(_ sql: String) throws(ParleyError) -> SQLiteStatement {
        let address = Self.textAddress(sql)
        if let address, let cached = statementsByTextAddress[address], cached.sql == sql {
            return try reused(cached)
        }
        if let cached = cachedStatements[sql] {
            if let address { rememberAddress(address, of: cached) }
            return try reused(cached)
        }
        let statement = try prepare(sql, persistent: true)
        if cachedStatements.count >= Self.statementCacheLimit {
            // Dropped statements are finalized when their last holder lets go.
            cachedStatements.removeAll(keepingCapacity: true)
            statementsByTextAddress.removeAll(keepingCapacity: true)
        }
        cachedStatements[sql] = statement
        if let address { rememberAddress(address, of: statement) }
        return statement
    }

    private func reused(_ cached: SQLiteStatement) throws(ParleyError) -> SQLiteStatement {
        guard !cached.isIterating else { return try prepare(cached.sql, persistent: false) }
        cached.resetForReuse()
        return cached
    }

    /// SQL built anew for each call has a new address each time: the map is emptied when it
    /// outgrows the cache, and its literals come back at their next use.
    private func rememberAddress(_ address: Int, of statement: SQLiteStatement) {
        if statementsByTextAddress.count >= 2 * Self.statementCacheLimit {
            statementsByTextAddress.removeAll(keepingCapacity: true)
        }
        statementsByTextAddress[address] = statement
    }

    /// Nil for a text of up to 15 bytes: Swift keeps those inside the value, so their address
    /// is a temporary one (and hashing them costs little).
    private static func textAddress(_ sql: String) -> Int? {
        guard sql.utf8.count > 15 else { return nil }
        return sql.utf8.withContiguousStorageIfAvailable { bytes in bytes.baseAddress.map { Int(bitPattern: $0) } } ?? nil
    }


    /// A new statement that is not cached (finalized when released).
    public func prepare(_ sql: String) throws(ParleyError) -> SQLiteStatement {
        try prepare(sql, persistent: false)
    }

    var cachedStatementCount: Int { cachedStatements.count }

    private enum PrepareOutcome {
        case prepared(OpaquePointer)
        case failed(Int32)
        case empty
        case multiple
    }

    private func prepare(_ sql: String, persistent: Bool) throws(ParleyError) -> SQLiteStatement {
        let handle = try liveHandle("prepare")
        guard !sql.utf8.contains(0) else {
            throw ParleyError.invalidArgument("prepare: SQL contains a NUL byte: \(SQLiteErrorText.prefix(of: sql))")
        }
        let flags = UInt32(persistent ? SQLITE_PREPARE_PERSISTENT : 0)
        let outcome = sql.withCString { text -> PrepareOutcome in
            var statement: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v3(handle, text, -1, flags, &statement, &tail)
            guard code == SQLITE_OK else {
                sqlite3_finalize(statement)
                return .failed(code)
            }
            guard let statement else { return .empty }
            // Anything after the first statement other than blanks and comments is a
            // second statement, which a prepared statement would silently ignore.
            if let tail, tail.pointee != 0 {
                var extra: OpaquePointer?
                let extraCode = sqlite3_prepare_v2(handle, tail, -1, &extra, nil)
                if extraCode != SQLITE_OK || extra != nil {
                    sqlite3_finalize(extra)
                    sqlite3_finalize(statement)
                    return .multiple
                }
            }
            return .prepared(statement)
        }
        switch outcome {
        case .prepared(let statement):
            return SQLiteStatement(sql: sql, connection: connection, handle: statement)
        case .failed(let code):
            throw connection.failure("prepare", code: code, sql: sql)
        case .empty:
            throw ParleyError.invalidArgument("prepare: no SQL statement in: \(SQLiteErrorText.prefix(of: sql))")
        case .multiple:
            throw ParleyError.invalidArgument(
                "prepare: more than one SQL statement (use execute for scripts): \(SQLiteErrorText.prefix(of: sql))")
        }
    }

    // MARK: Transactions

    /// Runs `body` in a transaction: BEGIN IMMEDIATE (takes the write lock up front, so a
    /// writer never fails half-way on a lock upgrade) ... COMMIT, or ROLLBACK if `body`
    /// throws. Called inside another transaction it uses a SAVEPOINT, so an inner failure
    /// undoes only the inner work and the outer body may carry on.
    @discardableResult
    public func transaction<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        let handle = try liveHandle("transaction")
        if sqlite3_get_autocommit(handle) != 0 {
            return try outermostTransaction(handle, body)
        }
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let name = "parley_savepoint_\(savepointDepth)"
        let texts = Self.savepointTexts(depth: savepointDepth)
        try runPrepared(texts.open)
        let value: T
        do throws(ParleyError) {
            value = try body()
        } catch {
            // If SQLite already rolled the whole transaction back (disk full, I/O error),
            // there is no savepoint left to roll back to.
            if sqlite3_get_autocommit(handle) == 0 {
                try? execute("ROLLBACK TO \(name)")
                try? execute("RELEASE \(name)")
            }
            throw error
        }
        try runPrepared(texts.release)
        return value
    }

    /// The statements that open and release the savepoint at `depth`. The usual depths are
    /// made once: a statement looked up by the same text storage skips hashing it
    /// (`statement(_:)`), and several savepoints open for every received message.
    private static func savepointTexts(depth: Int) -> (open: String, release: String) {
        depth < commonSavepointTexts.count ? commonSavepointTexts[depth] : makeSavepointTexts(depth: depth)
    }

    private static let commonSavepointTexts = (0..<16).map(makeSavepointTexts)

    private static func makeSavepointTexts(depth: Int) -> (open: String, release: String) {
        ("SAVEPOINT parley_savepoint_\(depth)", "RELEASE parley_savepoint_\(depth)")
    }


    /// Runs one statement through the statement cache: the statements that open and close
    /// every write are compiled once, not parsed again at each use as `execute` would.
    private func runPrepared(_ sql: String) throws(ParleyError) {
        try statement(sql).run()
    }

    private func outermostTransaction<T>(_ handle: OpaquePointer, _ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        try runPrepared("BEGIN IMMEDIATE")
        do throws(ParleyError) {
            let value = try body()
            try beforeCommit?(self)
            try runPrepared("COMMIT")
            return value
        } catch {
            if sqlite3_get_autocommit(handle) == 0 {
                try? execute("ROLLBACK")
            }
            throw error
        }
    }

    // MARK: Opening

    private static func validate(_ migrations: [SQLiteMigration]) throws(ParleyError) {
        for (offset, migration) in migrations.enumerated() where Int(migration.version) != offset + 1 {
            throw ParleyError.invalidArgument(
                "migrations must be numbered 1...N in order; position \(offset + 1) has version \(migration.version)")
        }
    }

    private func migrate(_ migrations: [SQLiteMigration]) throws(ParleyError) {
        let handle = try liveHandle("migrate")
        let current: Int64
        switch Self.firstColumn(handle, "PRAGMA user_version") {
        case (SQLITE_OK, .integer(let version)): current = version
        case (let code, _): throw connection.failure("read user_version", code: code)
        }
        if current == 0, !replaysMigrations, let schema = FreshSchema.statements(for: migrations) {
            let created = try transaction { () throws(ParleyError) -> Bool in
                // Under the write lock: another process may have created it meanwhile.
                guard case (SQLITE_OK, .integer(0)) = Self.firstColumn(handle, "PRAGMA user_version"),
                    case (SQLITE_OK, .integer(0)) = Self.firstColumn(handle, "SELECT count(*) FROM sqlite_schema")
                else { return false }
                for statement in schema { try execute(statement) }
                try execute("PRAGMA user_version = \(migrations.last?.version ?? 0)")
                return true
            }
            if created { return }
        }
        for migration in migrations where Int64(migration.version) > current {
            do throws(ParleyError) {
                try transaction { () throws(ParleyError) in
                    // Another process may have migrated since the version was read: under the
                    // write lock (BEGIN IMMEDIATE) the version read again is the truth.
                    guard case (SQLITE_OK, .integer(let now)) = Self.firstColumn(handle, "PRAGMA user_version") else {
                        throw connection.failure("read user_version", code: sqlite3_errcode(handle))
                    }
                    guard now < Int64(migration.version) else { return }
                    if let apply = migration.apply {
                        try apply(self)
                    } else {
                        try execute(migration.sql)
                    }
                    try execute("PRAGMA user_version = \(migration.version)")
                }
            } catch {
                throw ParleyError(
                    error.code,
                    "migration to version \(migration.version) failed (database left at version \(migration.version - 1)): \(error.message)")
            }
        }
    }

    /// Walks every page of the file on a connection of its own, read-only (a deferred check
    /// at open); nil when the structure is sound (or it is encrypted and its key is not
    /// registered: it cannot be read), else what is wrong. Safe beside the owner's
    /// connection (WAL: it reads a snapshot).
    public static func quickCheck(path: String) -> String? {
        // An encrypted file without its key cannot be read, which says nothing of its health.
        if !CacheSealing.isSealed(path: path), case .sealed? = try? CacheSealing.kind(of: path) { return nil }
        let result = salvageRows(path: path, sql: "PRAGMA quick_check(1)")
        if let failure = result.failure { return failure }
        guard let first = result.rows.first?.first else { return "quick_check gave no answer" }
        switch first {
        case .text(let text) where text == "ok": return nil
        case .blob(let bytes) where bytes == Array("ok".utf8): return nil
        case .text(let text): return text
        case .blob(let bytes): return String(decoding: bytes, as: UTF8.self)
        default: return "quick_check gave no answer"
        }
    }

    /// Beside a database file: "replace me at the next open" (`markDamaged`).
    public static let damageMarkerSuffix = ".damaged"
    /// Written beside a large file when its deferred full check found nothing; while it is
    /// younger than `fullCheckIntervalSeconds` connects skip that check.
    public static let checkedMarkerSuffix = ".checked"
    public static let fullCheckIntervalSeconds = 86_400

    /// Records that this file holds damage found while reading it: the next open moves it
    /// aside (see the file comment) as if its checks had failed. No effect in memory.
    public func markDamaged(_ detail: String) {
        guard case .file(let path) = location else { return }
        SQLiteFiles.writeSmallFile(path + Self.damageMarkerSuffix, detail)
    }

    /// Reads what it can of `sql`'s rows from a database file opened read-only, without any
    /// check or migration (salvaging a damaged file). Returns the rows read before a
    /// failure, and the failure.
    public static func salvageRows(path: String, sql: String) -> (rows: [[SQLiteValue]], failure: String?) {
        var handle: OpaquePointer?
        let code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, vfs(for: path))
        defer { sqlite3_close_v2(handle) }
        guard code == SQLITE_OK, let handle else { return ([], "open: \(String(cString: sqlite3_errstr(code)))") }
        keepTemporaryFilesInMemory(handle, path: path)
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            return ([], String(cString: sqlite3_errmsg(handle)))
        }
        defer { sqlite3_finalize(statement) }
        var rows: [[SQLiteValue]] = []
        while true {
            let step = sqlite3_step(statement)
            if step == SQLITE_DONE { return (rows, nil) }
            guard step == SQLITE_ROW else { return (rows, String(cString: sqlite3_errmsg(handle))) }
            var row: [SQLiteValue] = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(statement, column)))
                case SQLITE_NULL: row.append(.null)
                default:
                    let count = Int(sqlite3_column_bytes(statement, column))
                    let bytes = sqlite3_column_blob(statement, column).map {
                        Array(UnsafeRawBufferPointer(start: $0, count: count).bindMemory(to: UInt8.self))
                    } ?? []
                    row.append(.blob(bytes))
                }
            }
            rows.append(row)
        }
    }

    /// Refuses to open a file whose descriptors (`count`) would come from those the library
    /// keeps free below the process's limit (`PARLEY_DESCRIPTOR_RESERVE`).
    private static func checkDescriptorsLeft(_ count: Int, opening path: String) throws(ParleyError) {
        let lowest = parley_lowest_free_descriptor()
        guard lowest < 0 || parley_descriptor_in_reserve(lowest + count - 1) != 0 else { return }
        throw ParleyError(.io, "open \(path): no file descriptor left for the cache: the process holds all but the last "
            + "\(PARLEY_DESCRIPTOR_RESERVE) of its limit (RLIMIT_NOFILE \(parley_descriptor_limit())), which the library "
            + "leaves free; close clients or raise the limit")
    }

    private static func openHandle(_ path: String, busyTimeoutMilliseconds: Int32) throws(ParleyError) -> OpaquePointer {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let code = sqlite3_open_v2(path, &handle, flags, vfs(for: path))
        guard code == SQLITE_OK, let handle else {
            let error = code == SQLITE_AUTH
                ? ParleyError(.cacheKey, "open \(path): the key registered for it does not open it")
                : SQLiteErrorText.error("open \(path)", handle: handle, code: code)
            sqlite3_close_v2(handle)
            throw error
        }
        sqlite3_busy_timeout(handle, max(0, busyTimeoutMilliseconds))
        if keepTemporaryFilesInMemory(handle, path: path) {
            // Room for each page's nonce and tag, from the first page of a new file on.
            var reserve = CacheSealing.reserveBytes
            _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
        }
        _ = parley_sqlite_set_lookaside(handle, 0, 0)
        try SQLiteFunctions.register(on: handle, path: path)
        return handle
    }

    /// The sealing VFS for a path whose key is registered (CacheSealing), else the default.
    private static func vfs(for path: String) -> String? {
        CacheSealing.isSealed(path: path) ? CacheSealing.vfsName : nil
    }

    /// A sealed file's connection keeps its temporary tables and indexes in memory (they
    /// would be written unsealed otherwise). Returns whether the file is sealed.
    @discardableResult
    private static func keepTemporaryFilesInMemory(_ handle: OpaquePointer, path: String) -> Bool {
        guard CacheSealing.isSealed(path: path) else { return false }
        _ = firstColumn(handle, "PRAGMA temp_store=MEMORY")
        return true
    }

    /// Writes a compact copy of the database at `path` (closed by its owner) to `target`,
    /// which must not exist, with `reserveBytes` per page at least: through the sealing VFS,
    /// so that each file is read and written under the key registered for it (or plain).
    /// The source's WAL is checkpointed into it first and goes when the copy's connection closes.
    static func copy(path: String, into target: String, reserveBytes: Int32) throws(ParleyError) {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let code = sqlite3_open_v2(path, &handle, flags, CacheSealing.vfsName)
        defer { sqlite3_close_v2(handle) }
        guard code == SQLITE_OK, let handle else {
            throw SQLiteErrorText.error("open \(path) to copy it", handle: handle, code: code)
        }
        sqlite3_busy_timeout(handle, Self.defaultBusyTimeoutMilliseconds)
        _ = firstColumn(handle, "PRAGMA temp_store=MEMORY")
        var reserve = reserveBytes
        _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve)
        let checkpoint = firstColumn(handle, "PRAGMA wal_checkpoint(TRUNCATE)")
        guard checkpoint.code == SQLITE_OK else {
            throw copyFailure(path, handle, checkpoint.code, "PRAGMA wal_checkpoint(TRUNCATE)")
        }
        var statement: OpaquePointer?
        let sql = "VACUUM INTO ?1"
        var result = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        defer { sqlite3_finalize(statement) }
        if result == SQLITE_OK {
            result = sqlite3_bind_text(statement, 1, target, -1, parley_sqlite_transient())
        }
        if result == SQLITE_OK {
            result = sqlite3_step(statement)
        }
        guard result == SQLITE_DONE else { throw copyFailure(path, handle, result, sql) }
    }

    private static func copyFailure(_ path: String, _ handle: OpaquePointer, _ code: Int32, _ sql: String) -> ParleyError {
        let text = SQLiteErrorText.make("copying \(path)", message: SQLiteErrorText.message(handle: handle, code: code), code: code, sql: sql)
        return ParleyError(code & 0xFF == SQLITE_AUTH ? .cacheKey : .cache, text)
    }

    private enum FileHealth {
        case healthy(checkDeferred: Bool, walked: Bool)
        case unusable(SQLiteRecoveryReason)
    }

    /// Opens the file; if it is corrupt or newer, moves it aside and opens a fresh one.
    private static func openFile(
        path: String, newest: Int32, busyTimeoutMilliseconds: Int32, freshImage: () -> [UInt8]?
    ) throws(ParleyError) -> (handle: OpaquePointer, recovery: SQLiteRecovery?, checkDeferred: Bool, walkedAt: Int64?,
                               printAtOpen: SQLiteFiles.FilePrint?) {
        // The file, its -wal and -shm, and a reading connection's file.
        try checkDescriptorsLeft(4, opening: path)
        // A new plain file starts as a copy of the fresh schema's file: no DDL to parse and
        // run, no first transaction. (A sealed file's pages need its key: it runs the DDL.)
        if !SQLiteFiles.exists(path), !CacheSealing.isSealed(path: path), let image = freshImage() {
            _ = SQLiteFiles.createHolding(image, at: path)
        }
        try SQLiteFiles.prepare(path: path)
        // Read before SQLite opens it: as the last clean close left it, it is not walked again.
        let walkedBefore = walkedBeforeUnchanged(path: path)
        let existing = try openHandle(path, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        // Until the file is judged, closing must not checkpoint: that would write a
        // suspect WAL into the file and delete the WAL, altering what is moved aside.
        parley_sqlite_set_checkpoint_on_close(existing, 0)
        var health: FileHealth
        do throws(ParleyError) {
            health = try inspect(existing, newest: newest, walks: walkedBefore == nil)
        } catch {
            sqlite3_close_v2(existing)
            throw error
        }
        let marker = path + damageMarkerSuffix
        if case .healthy = health, let detail = SQLiteFiles.readSmallFile(marker) {
            // Its owner found damage that the checks at open do not see (a row that is not
            // valid UTF-8, say): replaced like any corrupt file.
            health = .unusable(.corrupt(detail: "marked damaged: \(detail)"))
        }
        let reason: SQLiteRecoveryReason
        switch health {
        case .healthy(let checkDeferred, let walked):
            parley_sqlite_set_checkpoint_on_close(existing, 1)
            return (existing, nil, checkDeferred, walked ? SQLiteFiles.unixMilliseconds() : walkedBefore?.walked,
                    walkedBefore?.print)
        case .unusable(let found):
            reason = found
        }
        sqlite3_close_v2(existing)

        let movedTo = try SQLiteFiles.moveAside(path: path, label: reason.fileLabel)
        unlink(marker)
        unlink(path + closedMarkerSuffix)
        try SQLiteFiles.prepare(path: path)
        let fresh = try openHandle(path, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
        do throws(ParleyError) {
            if case .unusable(let again) = try inspect(fresh, newest: newest, walks: true) {
                throw ParleyError(.cache, "open \(path): a freshly created database is unusable: \(again)")
            }
        } catch {
            sqlite3_close_v2(fresh)
            throw error
        }
        return (fresh, .movedAside(reason: reason, movedTo: movedTo), false, SQLiteFiles.unixMilliseconds(), nil)
    }

    /// Decides whether the file can be used. Reading `user_version` loads page 1 (so a
    /// file that is not a database fails here); `quick_check` then walks every b-tree page
    /// (structure, not index contents: O(file size), a fraction of `integrity_check`).
    /// Only corruption-class codes condemn the file; other errors are thrown. `walks`: false
    /// for a file the last clean close left as it is (`closedMarkerSuffix`), whose schema
    /// alone is read.
    private static func inspect(_ handle: OpaquePointer, newest: Int32, walks: Bool) throws(ParleyError) -> FileHealth {
        let versionResult = firstColumn(handle, "PRAGMA user_version")
        guard versionResult.code == SQLITE_OK else {
            return try corruptOrThrow(handle, versionResult.code, "read user_version")
        }
        guard case .integer(let version) = versionResult.value, version >= 0 else {
            return .unusable(.corrupt(detail: "invalid user_version"))
        }
        if version > Int64(newest) {
            return .unusable(.newerVersion(found: Int32(truncatingIfNeeded: version), newest: newest))
        }
        let pages = firstColumn(handle, "PRAGMA page_count")
        let pageSize = firstColumn(handle, "PRAGMA page_size")
        guard pages.code == SQLITE_OK, pageSize.code == SQLITE_OK else {
            return try corruptOrThrow(handle, pages.code == SQLITE_OK ? pageSize.code : pages.code, "read the page count")
        }
        var checkDeferred = false
        let large = if case .integer(let count) = pages.value, case .integer(let size) = pageSize.value {
            count * size > fullCheckLimitBytes
        } else { false }
        if large || !walks {
            // Walking every page of a large file at each open would make opening cost grow
            // with the cache: the schema is read below (every table's root), the full walk
            // runs later on its own connection (`quickCheck`).
            let schema = firstColumn(handle, "SELECT count(*) FROM sqlite_schema")
            guard schema.code == SQLITE_OK else { return try corruptOrThrow(handle, schema.code, "read schema") }
            checkDeferred = large
        } else {
            let check = firstColumn(handle, "PRAGMA quick_check(1)")
            guard check.code == SQLITE_OK else {
                return try corruptOrThrow(handle, check.code, "quick_check")
            }
            guard check.value == .text("ok") else {
                let detail: String = if case .text(let text) = check.value { text } else { "no answer" }
                return .unusable(.corrupt(detail: "quick_check: \(detail)"))
            }
        }
        if version == 0 && newest > 0 {
            // Version 0 with tables means a file some other program wrote: our migrations
            // would collide with its schema.
            let objects = firstColumn(handle, "SELECT count(*) FROM sqlite_schema")
            guard objects.code == SQLITE_OK else {
                return try corruptOrThrow(handle, objects.code, "read schema")
            }
            if case .integer(let count) = objects.value, count > 0 {
                return .unusable(.corrupt(detail: "user_version is 0 but the file already holds \(count) schema objects"))
            }
        }
        return .healthy(checkDeferred: checkDeferred, walked: walks && !large)
    }

    private static func corruptOrThrow(_ handle: OpaquePointer, _ code: Int32, _ operation: String) throws(ParleyError) -> FileHealth {
        let message = SQLiteErrorText.make(operation, message: SQLiteErrorText.message(handle: handle, code: code), code: code)
        if SQLiteErrorText.isCorruption(code) {
            return .unusable(.corrupt(detail: message))
        }
        throw ParleyError(.cache, message)
    }

    private func configure() throws(ParleyError) -> String {
        let handle = try liveHandle("configure")
        var mode = Self.firstColumn(handle, "PRAGMA journal_mode=WAL")
        // Switching a new file to WAL needs it alone; SQLite answers BUSY at once (no busy
        // handler) while another process creates the same file, so wait here, bounded.
        var waitedMs = 0
        while mode.code & 0xFF == SQLITE_BUSY || mode.code & 0xFF == SQLITE_LOCKED, waitedMs < 5_000 {
            sqlite3_sleep(10)
            waitedMs += 10
            mode = Self.firstColumn(handle, "PRAGMA journal_mode=WAL")
        }
        guard mode.code == SQLITE_OK else {
            throw connection.failure("set journal_mode", code: mode.code)
        }
        for pragma in ["PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"] {
            let result = Self.firstColumn(handle, pragma)
            guard result.code == SQLITE_OK else {
                throw connection.failure(pragma, code: result.code, sql: pragma)
            }
        }
        if case .file = location, mode.value == .text("wal") {
            // The last close keeps the WAL, emptied (`close`), and the -shm beside the file, so
            // that opening it again creates no file: two new inodes per connect cost a process
            // that reconnects thousands of users (on ext4 without a journal, each is a search
            // past the inodes recently freed).
            var persist: Int32 = 1
            _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
            keepsEmptyWAL = true
        }
        if case .text(let name) = mode.value { return name }
        return ""
    }

    /// Runs a one-statement query and returns its first row's first column (.null when
    /// there is no row), or the failing SQLite code. Used before the object exists.
    private static func firstColumn(_ handle: OpaquePointer, _ sql: String) -> (code: Int32, value: SQLiteValue) {
        var statement: OpaquePointer?
        let prepared = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard prepared == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            return (prepared == SQLITE_OK ? SQLITE_MISUSE : prepared, .null)
        }
        defer { sqlite3_finalize(statement) }
        let stepped = sqlite3_step(statement)
        if stepped == SQLITE_DONE { return (SQLITE_OK, .null) }
        guard stepped == SQLITE_ROW else { return (stepped, .null) }
        switch sqlite3_column_type(statement, 0) {
        case SQLITE_INTEGER:
            return (SQLITE_OK, .integer(sqlite3_column_int64(statement, 0)))
        case SQLITE_TEXT:
            guard let text = sqlite3_column_text(statement, 0) else { return (SQLITE_NOMEM, .null) }
            let count = Int(sqlite3_column_bytes(statement, 0))
            return (SQLITE_OK, .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)))
        default:
            return (SQLITE_OK, .null)
        }
    }
}

@available(*, unavailable, message: "SQLite handles belong to one serial executor")
extension SQLiteDatabase: Sendable {}
