// The PostgreSQL backend of SQLDatabase, on libpq (PQConnection.swift) and a pool of its own
// (PQPool.swift). Statements arrive with SQLite-style `?` placeholders and are rewritten to
// `$1..$n` once per SQL text; a transaction runs on its connection's thread.
import Foundation
import Logging
import Synchronization

final class PostgresDatabase: SQLDatabase {
    let dialect = SQLDialect.postgres

    /// The requests' connections.
    let pool: PQPool
    /// A small pool of its own for the reads that follow the other servers' commits
    /// (`readStatementByStatement`): its sessions plan every statement generically
    /// (`peerReadStartupParameters`).
    let peerReadsPool: PQPool
    private let placeholders = PostgresPlaceholderCache()
    /// Pings the pools' idle connections (`PQPool.keepIdleAlive`).
    private let keepAlive: Task<Void, Never>

    /// False while this server's own connection to PostgreSQL (Writers/PeerFollower.swift) is lost
    /// and not yet back: requests then fail at once with `.unavailable` instead of waiting on
    /// a database that cannot answer, and those running are cut (`PQPool.abandonLeased`).
    private let reachable = Mutex(true)

    func setReachable(_ value: Bool) {
        reachable.withLock { $0 = value }
        if !value {
            pool.abandonLeased()
            peerReadsPool.abandonLeased()
        }
    }

    /// A write transaction is run again this many times after a deadlock or a serialization
    /// failure; its body must therefore have no effect outside the database.
    static let writeRetries = 5

    /// How long a session may sit between statements, in a transaction or holding a write's
    /// locks, before PostgreSQL ends it (docs/DEPLOYMENT.md): the longest a hung server holds
    /// back the others (Writers/StreamPositions.swift). Longer than any pause of a healthy write,
    /// including the test hook's hold (at most 5 s, ServerConfig.testHooks).
    static let idleSessionSeconds = 6

    init(url: PostgresURL, logger: Logger = Logger(label: "parley-server.postgres"), maximumConnections: Int = 20) {
        pool = PQPool(settings: Self.connectionSettings(url, Self.poolStartupParameters), maximum: maximumConnections,
                      threadName: "parley-pg", logger: logger)
        peerReadsPool = PQPool(settings: Self.connectionSettings(url, Self.peerReadStartupParameters),
                               maximum: Self.peerReadConnections, threadName: "parley-pg-peer", logger: logger)
        // Connections idle in the pools run a statement well within the idle timeout.
        keepAlive = Task { [pool, peerReadsPool] in
            let period = Duration.seconds(Self.idleSessionSeconds) / 3
            while !Task.isCancelled {
                try? await Task.sleep(for: period)
                await pool.keepIdleAlive(after: period)
                await peerReadsPool.keepIdleAlive(after: period)
            }
        }
    }

    /// The pooled sessions' settings. A server that hangs (or is frozen, or cut off) while its
    /// connection holds a write's locks would hold them, and with them its channels' writers
    /// and every server's delivery of later numbers, for as long as it hangs: PostgreSQL ends
    /// such a session once it has been idle this long, inside a transaction or not (a write
    /// takes its locks before it begins one, Writers/StreamPositions.swift). The check in `open` sends
    /// them too, so that a PostgreSQL that refuses one (`idle_session_timeout` needs 14) says
    /// so at startup. The application_name shows in pg_stat_activity. Writes read each
    /// statement in a snapshot of its own, taken after the locks the statements before it
    /// took (a lock function's reads, a read sent after its named lock): READ COMMITTED,
    /// whatever the database's default (reads ask REPEATABLE READ themselves).
    private static let poolStartupParameters = [
        ("application_name", "parley-server"),
        ("idle_in_transaction_session_timeout", "\(idleSessionSeconds)s"),
        ("idle_session_timeout", "\(idleSessionSeconds)s"),
        ("default_transaction_isolation", "read committed"),
    ]

    /// The sessions of `peerReadsPool`. Their one statement per message of another server
    /// (the events with the channels they changed, prepared: HotStatements.swift) costs about
    /// 0.4 ms to run with its generic plan, but PostgreSQL, once the event log holds thousands
    /// of rows, estimates that plan dearer than one planned for the values and plans it again
    /// at every execution: 1.5–4 ms of planning each time (docs/BENCHMARKS.md "Planned once").
    /// Every statement with parameters on these sessions gets a generic plan: the read of
    /// several ranges, the channels loaded after it and the catch-up's counter, each a lookup
    /// by key. The main pool's statements keep the default, planned for their values.
    static let peerReadStartupParameters = poolStartupParameters + [("plan_cache_mode", "force_generic_plan")]

    /// Connections of `peerReadsPool`: a read per batch of other servers' events, one at a
    /// time on the hub, and the catch-ups (every second, after the listening connection
    /// returns, and before a stream resumes from an id this server has not delivered), one
    /// short statement each.
    static let peerReadConnections = 2

    /// libpq's connection keywords for `url`, with `parameters` as the session's settings
    /// (application_name as its keyword, the others as `-c` options).
    static func connectionSettings(_ url: PostgresURL, _ parameters: [(String, String)]) -> [(String, String)] {
        var settings = [("host", url.host), ("port", "\(url.port)"), ("user", url.user), ("dbname", url.database),
                        ("connect_timeout", "10"), ("client_encoding", "UTF8")]
        if let password = url.password { settings.append(("password", password)) }
        switch url.tlsMode {
        case .disable: settings.append(("sslmode", "disable"))
        case .prefer: settings.append(("sslmode", "prefer"))
        case .require: settings.append(("sslmode", "require"))
        case .verifyFull:
            settings.append(("sslmode", "verify-full"))
            // The system's certificate authorities unless PGSSLROOTCERT names others.
            if ProcessInfo.processInfo.environment["PGSSLROOTCERT"] == nil {
                settings.append(("sslrootcert", "/etc/ssl/certs/ca-certificates.crt"))
            }
        }
        var options: [String] = []
        for (name, value) in parameters {
            guard name != "application_name" else {
                settings.append((name, value))
                continue
            }
            // libpq splits `options` at spaces; a backslash keeps one (or itself) in a value.
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: " ", with: "\\ ")
            options.append("-c \(name)=\(escaped)")
        }
        if !options.isEmpty { settings.append(("options", options.joined(separator: " "))) }
        return settings
    }

    /// Creates the database object and checks with one connection (kept in a pool) that the
    /// server accepts us: a wrong address, password or database name shows at startup, with
    /// the server's reason.
    static func open(url: PostgresURL, logger: Logger = Logger(label: "parley-server.postgres"),
                     maximumConnections: Int = 20) async throws -> PostgresDatabase {
        let database = PostgresDatabase(url: url, logger: logger, maximumConnections: maximumConnections)
        do {
            database.peerReadsPool.release(try await database.peerReadsPool.lease())
        } catch {
            await database.close()
            throw StorageError("cannot connect to PostgreSQL database \(url): \(error)")
        }
        return database
    }

    /// Closes the pools' idle connections; later transactions fail.
    func close() async {
        keepAlive.cancel()
        pool.close()
        peerReadsPool.close()
    }

    // MARK: Transactions

    /// Throws `.unavailable` while the database is known to be unreachable.
    private func checkReachable() throws {
        if !reachable.withLock({ $0 }) {
            throw StorageError("PostgreSQL cannot be reached; retry shortly", kind: .unavailable)
        }
    }

    /// Runs `body` with a connection of `pool`, the task on the connection's thread.
    private func withConnection<T>(_ pool: PQPool, _ body: (PQConnection) async throws -> T) async throws -> T {
        try checkReachable()
        let connection: PQConnection
        do {
            connection = try await pool.lease()
        } catch {
            throw PostgresErrors.leaseFailure(error)
        }
        defer { pool.release(connection) }
        return try await withTaskExecutorPreference(connection.thread) { try await body(connection) }
    }

    func read<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await read(inOneSnapshot: true, pool, body)
    }

    /// Without a transaction: each statement commits on its own (the body only reads).
    func readStatementByStatement<T>(onRequestConnections: Bool, _ body: (any SQLSession) async throws -> T) async throws -> T {
        try await read(inOneSnapshot: false, onRequestConnections ? pool : peerReadsPool, body)
    }

    private func read<T>(inOneSnapshot: Bool, _ pool: PQPool, _ body: (any SQLSession) async throws -> T) async throws -> T {
        try await ServerMetrics.shared.transaction(.read) {
            try await withConnection(pool) { connection in
                let session = PostgresSession(connection: connection, placeholders: placeholders)
                guard inOneSnapshot else { return try await body(session) }
                try await session.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                do {
                    let value = try await body(session)
                    try await session.run("COMMIT")
                    return value
                } catch {
                    // The body's error is the one worth reporting; a failed ROLLBACK leaves the
                    // connection broken or in its transaction, and the pool closes it.
                    session.discardHeld()
                    try? await session.run("ROLLBACK")
                    throw error
                }
            }
        }
    }

    func write<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await write(beginningLate: false, body)
    }

    func writeBeginningLate<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await write(beginningLate: true, body)
    }

    private func write<T>(beginningLate: Bool, _ body: (any SQLSession) async throws -> T) async throws -> T {
        try await ServerMetrics.shared.transaction(.write) {
            var retriesLeft = Self.writeRetries
            while true {
                do {
                    return try await withConnection(pool) { connection in
                        let session = PostgresSession(connection: connection, placeholders: placeholders,
                                                      beginsLate: beginningLate)
                        if beginningLate {
                            do {
                                let value = try await body(session)
                                try await session.finishLateWrite()
                                return value
                            } catch {
                                await session.abandonLateWrite()
                                throw error
                            }
                        }
                        try await session.run("BEGIN")
                        let value: T
                        do {
                            value = try await body(session)
                            // Inside the block that rolls back: a held write that fails leaves
                            // the transaction aborted, not the pooled connection inside it.
                            try await session.sendHeld()
                        } catch {
                            session.discardHeld()
                            try? await session.run("ROLLBACK")
                            throw error
                        }
                        try await session.run("COMMIT")
                        return value
                    }
                } catch {
                    guard retriesLeft > 0, let storageError = error as? StorageError, storageError.kind == .retryable
                    else { throw error }
                    retriesLeft -= 1
                    ServerMetrics.shared.writeRetried()
                    // A short random pause, so that two transactions that deadlocked each other
                    // do not collide again at once.
                    try await Task.sleep(for: .milliseconds(Int.random(in: 1...20)))
                }
            }
        }
    }
}

/// One leased connection inside one transaction. Valid only during the `read`/`write` body
/// that received it.
final class PostgresSession: SQLSession {
    let dialect = SQLDialect.postgres
    private let connection: PQConnection
    private let placeholders: PostgresPlaceholderCache

    fileprivate init(connection: PQConnection, placeholders: PostgresPlaceholderCache, beginsLate: Bool = false) {
        self.connection = connection
        self.placeholders = placeholders
        self.beginsLate = beginsLate
    }

    // MARK: a write that begins late (`PostgresDatabase.writeBeginningLate`)

    private let beginsLate: Bool
    private enum LateTransaction { case notBegun, begun, ended }
    private var late = LateTransaction.notBegun

    /// The advisory locks this session holds at session level for its write
    /// (Writers/StreamPositions.swift): taken by statements that may run before BEGIN, they outlive
    /// each statement; the write's last statement takes them again to the end of its
    /// transaction and gives up the session's (`StreamPositions.holdToCommitCall`), so they
    /// are held until the commit is visible.
    private var sessionLocks = StreamPositions.Locks()

    /// Notes locks the write took at session level (their statement was sent).
    func holdLocks(_ locks: StreamPositions.Locks) { sessionLocks.formUnion(locks) }

    /// BEGIN, once, before the first statement that writes or reads what the transaction
    /// holds back. None may follow the statement that ended the write.
    private func beginIfLate() async throws {
        guard beginsLate else { return }
        switch late {
        case .begun: return
        case .ended: throw StorageError("a statement after the last one of a write")
        case .notBegun:
            late = .begun
            try await run("BEGIN")
        }
    }

    /// Makes sure the transaction has begun (a write that will be continued by others:
    /// Writers/ChannelBatch.swift).
    func beginTransaction() async throws { try await beginIfLate() }

    /// A savepoint of a batch's member (Writers/ChannelBatch.swift), sent with the member's
    /// first statement (`deferred`). Each member's has a name of its own, so that a rollback
    /// can never reach an earlier member's savepoint if its own failed.
    func savepoint() async throws {
        locksAtSavepoint = sessionLocks
        savepoints += 1
        memberSavepoint = "batch_member_\(savepoints)"
        try await run("SAVEPOINT \(memberSavepoint)")
    }

    /// The locks noted when the member's savepoint was taken.
    private var locksAtSavepoint = StreamPositions.Locks()
    private var savepoints = 0
    private var memberSavepoint = ""

    /// Undoes what a member did since its savepoint, what it held included; the transaction
    /// is usable again even if a statement failed. The member's lock notes go too: a lock
    /// whose statement failed was never taken, and the batch's last statement must not wait
    /// for it. (Locks it did take stay held at session level, as a rollback leaves them, until
    /// that statement gives up all of the session's.)
    func rollbackToSavepoint() async throws {
        discardHeld()
        if let lostTransaction { throw lostTransaction }
        sessionLocks = locksAtSavepoint
        let savepoint = "SAVEPOINT \(memberSavepoint)"
        // Nothing went out since the savepoint: nothing to undo.
        if deferred.last?.sql == savepoint {
            deferred.removeLast()
            return
        }
        try await run("ROLLBACK TO \(savepoint)")
    }

    /// Statements waiting to go out with the next statement in one round trip: a BEGIN, a
    /// batch member's savepoint, a lock taken before a read (`runBeforeNext`). None costs a
    /// round trip of its own, and a transaction that sends nothing else sends neither its
    /// BEGIN nor its end.
    private var deferred: [PQConnection.FlightStatement] = []

    /// Goes out with the next statement (Writers/WriterRules.swift `lockForWriters`). Its
    /// rows are not read; its failure shows at that statement.
    func runBeforeNext(_ sql: String, _ binds: [SQLValue]) async throws {
        if beginsLate, late == .ended { throw StorageError("a statement after the last one of a write") }
        deferred.append(try flightStatement(sql, binds))
    }

    private static func isDeferred(_ sql: String) -> Bool { sql.hasPrefix("BEGIN") || sql.hasPrefix("SAVEPOINT ") }

    /// Sends what is deferred, then `statements`, in one round trip; returns the results of
    /// `statements`.
    private func afterDeferred(_ statements: [PQConnection.FlightStatement]) async throws -> [PQResult] {
        let first = deferred
        deferred = []
        return Array(try await connection.runInOneFlight(first + statements).suffix(statements.count))
    }

    /// The transaction is over: committed, or lost to a COMMIT that failed.
    var hasEnded: Bool { late == .ended }

    /// A COMMIT sent with a last statement failed after that statement passed: the
    /// transaction ended rolled back. What would continue it gets this error.
    private var lostTransaction: (any Error)? = nil

    /// After the body: sends what is still held (with the locks kept to the commit) and
    /// COMMIT if the transaction began, in one round trip; gives the locks up if nothing was
    /// written.
    fileprivate func finishLateWrite() async throws {
        if let lostTransaction { throw lostTransaction }
        if !held.isEmpty || (!sessionLocks.isEmpty && late == .begun) {
            _ = try await writeTogether([], selecting: nil, last: true)
        }
        switch late {
        case .begun:
            try await run("COMMIT")
        case .notBegun where !sessionLocks.isEmpty:
            // Nothing was written: only the locks to give up.
            try await run(StreamPositions.releaseSQL)
            sessionLocks = StreamPositions.Locks()
        case .notBegun, .ended:
            break
        }
        late = .ended
    }

    /// After a failure: ROLLBACK if the transaction began, and the session's locks given up.
    /// If either fails the connection is closed, which ends both on the database's side, so
    /// that it never goes back to the pool holding a lock.
    fileprivate func abandonLateWrite() async {
        discardHeld()
        do {
            if late == .begun { try await run("ROLLBACK") }
            late = .ended
            if !sessionLocks.isEmpty { try await run(StreamPositions.releaseSQL) }
            sessionLocks = StreamPositions.Locks()
        } catch {
            connection.abandon()
        }
    }

    /// Writes waiting for the next statement (`executeHeld`), in the order they were made.
    private var held: [SQLWrite] = []

    func executeHeld(_ write: SQLWrite) async throws { held.append(write) }

    /// A transaction that fails drops what it held.
    func discardHeld() { held = [] }

    /// Sends what is held (before COMMIT and the statements `run` sends; `query` and `execute`
    /// send it with their own statement).
    func sendHeld() async throws {
        guard !held.isEmpty else { return }
        _ = try await writeTogether([], selecting: nil, last: false)
    }

    /// The held writes and `writes` in one round trip (with what is deferred). Consecutive
    /// writes of different tables share a statement, `WITH w0 AS (write), w1 AS (write
    /// RETURNING v), … SELECT (SELECT * FROM w1), …, selecting`: PostgreSQL runs every
    /// data-modifying WITH part exactly once, all in one snapshot, and the parts change
    /// different tables, so none misses another's change. A write of a table already in the
    /// statement starts the next one, which sees what those before it did; the statements go
    /// out together, in order, in one libpq pipeline, and once one fails PostgreSQL runs none
    /// after it. The last statement of a write that holds session locks keeps them to its
    /// commit (`StreamPositions.holdToCommitCall`). A write that began late ends with its
    /// `last` statement: without BEGIN if it has all its writes in that one statement, else
    /// with COMMIT in the same round trip (which does not run if a statement fails).
    func writeTogether(_ writes: [SQLWrite], selecting: SQLExpression?, last: Bool) async throws -> [SQLValue] {
        let parts = Self.tableGroups(held + writes)
        held = []
        let keepsLocks = last && !sessionLocks.isEmpty
        let groups = (keepsLocks || selecting != nil) && parts.isEmpty ? [[]] : parts
        guard !groups.isEmpty else { return [] }
        if beginsLate, late == .ended { throw StorageError("a statement after the last one of a write") }
        // A write that began late and has not begun: its one statement, outside any
        // transaction, commits as it ends.
        let commitsAlone = beginsLate && late == .notBegun && last && groups.count == 1
        if beginsLate, late == .notBegun, !commitsAlone { try await beginIfLate() }
        let commits = last && beginsLate && late == .begun
        let kept = keepsLocks ? StreamPositions.holdToCommitCall(sessionLocks) : nil
        let statements = groups.enumerated().map { index, part in
            let isLast = index == groups.count - 1
            return Self.statement(part, selecting: isLast ? selecting : nil, keeping: isLast ? kept : nil)
        }
        var flight = try statements.map { try flightStatement($0.sql, $0.binds) }
        if commits { flight.append(PQConnection.FlightStatement(slot: nil, sql: "COMMIT", values: [])) }
        let results: [PQResult]
        do {
            results = flight.count == 1 ? [try await result(flight[0])] : try await afterDeferred(flight)
        } catch {
            // Outside a transaction now: the statements passed and the COMMIT failed.
            if commits, connection.isOutsideTransaction {
                late = .ended
                lostTransaction = error
            }
            throw error
        }
        if kept != nil { sessionLocks = StreamPositions.Locks() }
        if commitsAlone || commits { late = .ended }
        var values: [SQLValue] = []
        for (statement, result) in zip(statements, results) where statement.returned > 0 {
            values += statement.values(of: try result.rows().first)
        }
        return values
    }

    /// Writes split into statements: consecutive writes of different tables share one.
    private static func tableGroups(_ writes: [SQLWrite]) -> [[SQLWrite]] {
        var pending = writes[...]
        var statements: [[SQLWrite]] = []
        while !pending.isEmpty {
            var tables = Set<String>()
            let count = pending.prefix { tables.insert($0.table).inserted }.count
            statements.append(Array(pending.prefix(count)))
            pending = pending.dropFirst(count)
        }
        return statements
    }

    /// One statement of `writeTogether` and what its row holds.
    private struct Combined {
        var sql: String
        var binds: [SQLValue]
        /// Columns before the values (the locks kept), and the values after them.
        var leading: Int
        var returned: Int

        func values(of row: SQLRow?) -> [SQLValue] { Array((row?.values ?? []).dropFirst(leading).prefix(returned)) }
    }

    /// A lone write that returns nothing, as it is; any other part as `combined`.
    private static func statement(_ part: [SQLWrite], selecting: SQLExpression?, keeping kept: SQLExpression?) -> Combined {
        if part.count == 1, selecting == nil, kept == nil, !part[0].returnsOne {
            return Combined(sql: part[0].sql, binds: part[0].binds, leading: 0, returned: 0)
        }
        let statement = combined(part, selecting: selecting, keeping: kept)
        learn(statement)
        return statement
    }

    /// `WITH w0 AS (write), w1 AS (write RETURNING v), … SELECT kept, (SELECT * FROM w1), …, selecting`.
    private static func combined(_ part: [SQLWrite], selecting: SQLExpression?, keeping kept: SQLExpression?) -> Combined {
        var sql = "WITH "
        var binds: [SQLValue] = []
        // The locks go first: PostgreSQL evaluates the columns in order, and a WITH part
        // when a column reads it or, if none does, after them all.
        var columns: [String] = kept.map { [$0.sql] } ?? []
        let leading = columns.count
        for (index, write) in part.enumerated() {
            sql += (index == 0 ? "" : ", ") + "w\(index) AS (\(write.sql))"
            binds += write.binds
            if write.returnsOne { columns.append("(SELECT * FROM w\(index))") }
        }
        if sql == "WITH " { sql = "" }
        // In the order of their placeholders in the text: the WITH parts, then the columns.
        if let kept { binds += kept.binds }
        if let selecting {
            columns.append(selecting.sql)
            binds += selecting.binds
        }
        sql += (sql.isEmpty ? "" : " ") + "SELECT " + (columns.isEmpty ? "1" : columns.joined(separator: ", "))
        return Combined(sql: sql, binds: binds, leading: leading, returned: columns.count - leading)
    }

    /// A send writes the same shape again and again: worth preparing. Large ones (a channel's
    /// whole member list, chunks of 500 rows) come in too many sizes.
    private static func learn(_ statement: Combined) {
        if statement.binds.count <= HotStatements.learnedValuesLimit { _ = HotStatements.learn(statement.sql) }
    }

    /// A write that has not begun sends `lock` (the statement that takes its locks and
    /// numbers), then what it holds and `writes` as `writeTogether` with `last` would, all in one
    /// round trip and one transaction (Writers/OneFlightSend.swift). `locks`: what `lock` takes
    /// at session level, kept to the commit by the last statement. `rewritten` gives each
    /// write statement's text and values as they go out. Returns the lock's rows and the
    /// write's values; nothing is kept if it throws.
    func writeInOneFlight(lock: SQLExpression, locks: StreamPositions.Locks, writes: [SQLWrite], selecting: SQLExpression?,
                          rewritten: (String, [SQLValue]) throws -> (String, [SQLValue])) async throws
        -> (lockRows: [SQLRow], values: [SQLValue]) {
        guard beginsLate, late == .notBegun, deferred.isEmpty else {
            throw StorageError("a write in one round trip after its first statement")
        }
        let groups = Self.tableGroups(held + writes)
        held = []
        holdLocks(locks)
        var statements: [Combined] = []
        for (index, part) in (groups.isEmpty ? [[]] : groups).enumerated() {
            let isLast = index == max(groups.count, 1) - 1
            var statement = Self.combined(part, selecting: isLast ? selecting : nil,
                                          keeping: isLast ? StreamPositions.holdToCommitCall(sessionLocks) : nil)
            (statement.sql, statement.binds) = try rewritten(statement.sql, statement.binds)
            Self.learn(statement)
            statements.append(statement)
        }
        let results = try await connection.runInOneFlight(
            [try flightStatement(lock.sql, lock.binds)] + statements.map { try flightStatement($0.sql, $0.binds) })
        late = .ended
        sessionLocks = StreamPositions.Locks()
        var values: [SQLValue] = []
        for (statement, result) in zip(statements, results.dropFirst()) { values += statement.values(of: try result.rows().first) }
        return (try results[0].rows(), values)
    }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        if beginsLate, !Self.isPlainRead(sql) || late == .ended || !held.isEmpty { try await beginIfLate() }
        return try await resultAfterHeld(try flightStatement(sql, binds)).rows()
    }

    /// `statement` after what is held (and deferred), in one round trip. Held writes are
    /// part of the transaction: it has begun (`beginIfLate`) before they are taken.
    private func resultAfterHeld(_ statement: PQConnection.FlightStatement) async throws -> PQResult {
        guard !held.isEmpty else { return try await result(statement) }
        let writes = try Self.tableGroups(held).map { part in
            let write = Self.statement(part, selecting: nil, keeping: nil)
            return try flightStatement(write.sql, write.binds)
        }
        held = []
        return try await afterDeferred(writes + [statement]).last!
    }

    /// A statement that starts with SELECT: in a write that began late, one that may run
    /// before BEGIN (the server's reads, and the locks). Any other (an upsert RETURNING its
    /// version, a WITH), and a SELECT that locks rows (`FOR UPDATE`, `FOR SHARE`: the lock
    /// must last to the commit), begins the transaction first.
    private static func isPlainRead(_ sql: String) -> Bool {
        let start = sql.utf8.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x09 }
        guard start.count > 6 else { return false }
        let word = start.prefix(6).map { $0 & 0xDF }
        guard word.elementsEqual("SELECT".utf8), [0x20, 0x0A, 0x09, 0x28].contains(start.dropFirst(6).first!) else { return false }
        return !sql.containsBytes(of: " FOR UPDATE") && !sql.containsBytes(of: " FOR SHARE")
            && !sql.containsBytes(of: " FOR NO KEY UPDATE") && !sql.containsBytes(of: " FOR KEY SHARE")
    }

    private func result(_ sql: String, _ binds: [SQLValue]) async throws -> PQResult {
        try await result(try flightStatement(sql, binds))
    }

    private func result(_ statement: PQConnection.FlightStatement) async throws -> PQResult {
        if !deferred.isEmpty { return try await afterDeferred([statement])[0] }
        if let slot = statement.slot { return try await connection.executePrepared(slot: slot, statement.values) }
        return try await connection.execute(statement.sql, statement.values)
    }

    /// A hot statement by its slot, any other with `$n` placeholders.
    private func flightStatement(_ sql: String, _ binds: [SQLValue]) throws -> PQConnection.FlightStatement {
        if let slot = HotStatements.slot(for: sql) { return PQConnection.FlightStatement(slot: slot, sql: sql, values: binds) }
        let rewritten = placeholders.rewritten(sql)
        guard rewritten.parameterCount == binds.count else {
            throw StorageError(
                "statement has \(rewritten.parameterCount) placeholders but \(binds.count) values: \(sql.prefix(200))")
        }
        return PQConnection.FlightStatement(slot: nil, sql: rewritten.sql, values: binds)
    }

    /// The count is what was inserted, updated or deleted (the command tag's); use `query`
    /// for the rows of a RETURNING clause.
    @discardableResult
    func execute(_ sql: String, _ binds: [SQLValue]) async throws -> Int {
        try await beginIfLate()
        return try await resultAfterHeld(try flightStatement(sql, binds)).affectedRows
    }

    func executeScript(_ sql: String) async throws {
        try await beginIfLate()
        for statement in SQLScanner.statements(in: sql) {
            try await run(statement)
        }
    }

    /// A statement without parameters whose rows, if any, are not wanted. A ROLLBACK drops
    /// what is held instead of sending it (a held write failing there would keep the
    /// ROLLBACK from being sent, and the connection would go back to the pool in its
    /// aborted transaction).
    fileprivate func run(_ sql: String) async throws {
        // BEGIN goes before what is held (a write that begins late holds its first writes).
        if sql.hasPrefix("ROLLBACK") { discardHeld() } else if !sql.hasPrefix("BEGIN") { try await sendHeld() }
        if Self.isDeferred(sql) {
            deferred.append(PQConnection.FlightStatement(slot: nil, sql: sql, values: []))
            return
        }
        if sql == "COMMIT" || sql == "ROLLBACK" {
            // A transaction whose BEGIN never went out has nothing to end; a savepoint nothing
            // followed, nothing to keep.
            let unopened = deferred.first?.sql.hasPrefix("BEGIN") == true
            deferred = []
            if unopened { return }
        }
        if deferred.isEmpty {
            _ = try await connection.run(sql)
        } else {
            _ = try await afterDeferred([.init(slot: nil, sql: sql, values: [])])
        }
    }
}

/// `?` → `$n` rewrites, cached per SQL text: the statements are a fixed set of literals, so
/// each is scanned once. The bound keeps SQL built at run time (IN lists) from growing it
/// without end.
final class PostgresPlaceholderCache: @unchecked Sendable {
    struct Rewritten: Sendable {
        let sql: String
        let parameterCount: Int
    }

    private static let capacity = 2_000
    private let lock = NSLock()
    private var rewrites: [String: Rewritten] = [:]

    func rewritten(_ sql: String) -> Rewritten {
        if let cached = lock.withLock({ rewrites[sql] }) { return cached }
        let (text, count) = SQLScanner.numberingPlaceholders(in: sql)
        let result = Rewritten(sql: text, parameterCount: count)
        lock.withLock {
            if rewrites.count >= Self.capacity { rewrites.removeAll(keepingCapacity: true) }
            rewrites[sql] = result
        }
        return result
    }
}

/// Finds what in a SQL text is code, as opposed to string literals, quoted identifiers,
/// comments and dollar-quoted bodies, where `?` and `;` mean nothing. Not understood, as our
/// SQL has neither: backslash escapes in E'...' strings, and `BEGIN ATOMIC ... END` bodies.
enum SQLScanner {
    /// Byte ranges of `sql`'s UTF-8, each either code or something to copy untouched.
    /// Every delimiter is ASCII, so the ranges never split a multi-byte character.
    static func segments(_ bytes: [UInt8]) -> [(range: Range<Int>, isCode: Bool)] {
        var segments: [(range: Range<Int>, isCode: Bool)] = []
        var codeStart = 0
        var i = 0
        let n = bytes.count

        func skipped(until end: Int) {
            if codeStart < i { segments.append((codeStart..<i, true)) }
            segments.append((i..<end, false))
            i = end
            codeStart = end
        }

        while i < n {
            let byte = bytes[i]
            let next: UInt8? = i + 1 < n ? bytes[i + 1] : nil
            switch byte {
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                // A doubled quote inside ends and reopens the literal: same result.
                var j = i + 1
                while j < n, bytes[j] != byte { j += 1 }
                skipped(until: min(j + 1, n))
            case UInt8(ascii: "-") where next == UInt8(ascii: "-"):
                var j = i + 2
                while j < n, bytes[j] != UInt8(ascii: "\n") { j += 1 }
                skipped(until: j)
            case UInt8(ascii: "/") where next == UInt8(ascii: "*"):
                // PostgreSQL nests block comments.
                var depth = 1
                var j = i + 2
                while j < n, depth > 0 {
                    if bytes[j] == UInt8(ascii: "/"), j + 1 < n, bytes[j + 1] == UInt8(ascii: "*") {
                        depth += 1; j += 2
                    } else if bytes[j] == UInt8(ascii: "*"), j + 1 < n, bytes[j + 1] == UInt8(ascii: "/") {
                        depth -= 1; j += 2
                    } else {
                        j += 1
                    }
                }
                skipped(until: j)
            case UInt8(ascii: "$"):
                guard let tagEnd = dollarTagEnd(bytes, from: i) else { i += 1; continue }
                let tag = bytes[i..<tagEnd]
                var j = tagEnd
                while j < n, !(bytes[j] == UInt8(ascii: "$") && bytes[j...].starts(with: tag)) { j += 1 }
                skipped(until: min(j + tag.count, n))
            default:
                i += 1
            }
        }
        if codeStart < n { segments.append((codeStart..<n, true)) }
        return segments
    }

    /// The end of a dollar-quote opening tag (`$$` or `$name$`) starting at `start`, or nil
    /// when the `$` starts something else (a `$1` parameter, part of an identifier).
    private static func dollarTagEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        // Identifiers may contain `$` (`a$b`): that is no quote.
        if start > 0, isIdentifierByte(bytes[start - 1]) { return nil }
        var j = start + 1
        while j < bytes.count {
            let byte = bytes[j]
            if byte == UInt8(ascii: "$") { return j + 1 }
            let isDigit = byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
            // A tag does not start with a digit: `$1` is a parameter.
            guard isIdentifierByte(byte), !(isDigit && j == start + 1) else { return nil }
            j += 1
        }
        return nil
    }

    /// ASCII letters, digits, `_`, and any byte of a non-ASCII character.
    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        byte >= 0x80 || byte == UInt8(ascii: "_")
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
    }

    /// `sql` with each `?` in code replaced by `$1`, `$2`, … and the number of them.
    static func numberingPlaceholders(in sql: String) -> (sql: String, count: Int) {
        guard sql.utf8.contains(UInt8(ascii: "?")) else { return (sql, 0) }
        return rewritingPlaceholders(in: sql) { "$\($0 + 1)" }
    }

    /// `sql` with the n-th `?` in code replaced by `replacements[n]` where that is not nil
    /// (an expression, which may hold a `?` of its own).
    static func replacingPlaceholders(in sql: String, with replacements: [String?]) -> String {
        rewritingPlaceholders(in: sql) { $0 < replacements.count ? replacements[$0] : nil }.sql
    }

    /// `sql` with the n-th `?` in code (from 0) replaced by `replacement(n)` unless that is
    /// nil, and the number of them.
    private static func rewritingPlaceholders(in sql: String, _ replacement: (Int) -> String?) -> (sql: String, count: Int) {
        let bytes = Array(sql.utf8)
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + 16)
        var count = 0
        for segment in segments(bytes) {
            guard segment.isCode else { output += bytes[segment.range]; continue }
            for byte in bytes[segment.range] {
                guard byte == UInt8(ascii: "?") else { output.append(byte); continue }
                if let text = replacement(count) { output += Array(text.utf8) } else { output.append(byte) }
                count += 1
            }
        }
        return (String(decoding: output, as: UTF8.self), count)
    }

    /// The statements of a script, split at `;` in code; those holding only whitespace and
    /// comments are left out (PostgreSQL answers an empty query with no command tag).
    static func statements(in script: String) -> [String] {
        let bytes = Array(script.utf8)
        var statements: [String] = []
        var start = 0
        var hasCode = false
        func finish(at end: Int) {
            if hasCode {
                let text = String(decoding: bytes[start..<end], as: UTF8.self)
                statements.append(text.trimmingCharacters(in: .whitespacesAndNewlines))
            }
            start = end + 1
            hasCode = false
        }
        for segment in segments(bytes) {
            guard segment.isCode else { continue }
            for index in segment.range {
                let byte = bytes[index]
                if byte == UInt8(ascii: ";") {
                    finish(at: index)
                } else if !(byte == 0x20 || (0x09...0x0D).contains(byte)) {
                    hasCode = true
                }
            }
        }
        finish(at: bytes.count)
        return statements
    }
}

/// Cells of a result row as SQLValue, from PostgreSQL's text form by column type.
enum PostgresValues {
    // Type OIDs (PostgreSQL's pg_type.dat).
    private static let bool: UInt32 = 16, bytea: UInt32 = 17, name: UInt32 = 19, int8: UInt32 = 20, int2: UInt32 = 21
    private static let int4: UInt32 = 23, text: UInt32 = 25, oid: UInt32 = 26, json: UInt32 = 114
    private static let float4: UInt32 = 700, float8: UInt32 = 701, bpchar: UInt32 = 1042, varchar: UInt32 = 1043
    private static let numeric: UInt32 = 1700, uuid: UInt32 = 2950, jsonb: UInt32 = 3802

    /// The value of a cell of type `type` given as text, or nil for a type not read.
    static func decode(text bytes: UnsafeRawBufferPointer, type: UInt32) -> SQLValue? {
        switch type {
        case int2, int4, int8, oid:
            return integer(bytes).map(SQLValue.int)
        case bool:
            return .int(bytes.first == UInt8(ascii: "t") ? 1 : 0)
        case text, varchar, name, bpchar, json, jsonb, uuid:
            return .text(String(decoding: bytes, as: UTF8.self))
        case bytea:
            return hexBytes(bytes).map(SQLValue.blob)
        case numeric:
            // SUM over bigint, and AVG, come back as numeric.
            let text = String(decoding: bytes, as: UTF8.self)
            if let whole = integralNumeric(text) { return .int(whole) }
            return .text(trimmedDecimal(text))
        case float4, float8:
            return Double(String(decoding: bytes, as: UTF8.self)).map { .text("\($0)") }
        default:
            return nil
        }
    }

    static func unreadable(column: String, type: UInt32) -> String {
        "column '\(column)' has PostgreSQL type oid \(type), which the storage layer does not read; cast it to bigint, text or bytea in the query"
    }

    /// A decimal integer's text within Int64, else nil.
    private static func integer(_ bytes: UnsafeRawBufferPointer) -> Int64? {
        guard !bytes.isEmpty else { return nil }
        let negative = bytes[0] == UInt8(ascii: "-")
        var value: Int64 = 0
        for byte in bytes.dropFirst(negative ? 1 : 0) {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10)
            let digit = Int64(byte - 0x30)
            let (next, overflowAdd) = negative
                ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            if overflowShift || overflowAdd { return nil }
            value = next
        }
        return value
    }

    /// bytea's hex output (`\x0a1b…`) as bytes.
    private static func hexBytes(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: return byte - 0x30
            case 0x61...0x66: return byte - 0x61 + 10
            case 0x41...0x46: return byte - 0x41 + 10
            default: return nil
            }
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count / 2 - 1)
        var index = 2
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
            output.append(high << 4 | low)
            index += 2
        }
        return output
    }

    /// A numeric's text that is a whole number within Int64 (`42`, `-7`, `12.000`), else nil.
    static func integralNumeric(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty else { return nil }
        if parts.count == 2, !parts[1].allSatisfy({ $0 == "0" }) { return nil }
        return Int64(whole)
    }

    /// A fractional numeric's text without trailing zeros (`2.5000` → `2.5`).
    private static func trimmedDecimal(_ text: String) -> String {
        guard text.contains("."), !text.contains("e"), !text.contains("E") else { return text }
        var trimmed = Substring(text)
        while trimmed.last == "0" { trimmed.removeLast() }
        if trimmed.last == "." { trimmed.removeLast() }
        return String(trimmed)
    }
}

/// PostgreSQL's failures as StorageError, keeping what callers branch on (the SQLSTATE) and
/// what a reader needs (the server's message), never connection secrets.
enum PostgresErrors {
    static func serverError(state: String, message: String, detail: String?, sql: String,
                            kind: SQLFailureKind) -> StorageError {
        var description = "PostgreSQL error \(state): \(message)"
        if let detail { description += " (\(detail))" }
        if state == "25P02" {
            // The usual cause when code written for SQLite continues after a failed statement.
            description += "; an earlier statement of this transaction failed, and PostgreSQL ignores everything after it"
        }
        description += " in: \(sql.prefix(300))"
        var error = StorageError(description, kind: kind)
        error.sqlState = state
        return error
    }

    /// An error before a connection was leased: it could not connect.
    static func leaseFailure(_ error: any Error) -> any Error {
        if error is CancellationError { return error }
        if var storageError = error as? StorageError {
            storageError.kind = .unavailable
            return storageError
        }
        return StorageError("PostgreSQL: no connection available (\(error))", kind: .unavailable)
    }

    static func kind(ofSQLState state: String) -> SQLFailureKind {
        switch state {
        case "23505": return .uniqueViolation
        case "40001", "40P01": return .retryable
        // The server shuts down, crashed, or does not accept connections yet; the connection is gone.
        case "57P01", "57P02", "57P03", "57P05": return .unavailable
        case _ where state.hasPrefix("08"): return .unavailable
        default: return .other
        }
    }
}
