// The PostgreSQL backend of SQLDatabase, on PostgresNIO's connection pool (PostgresClient).
// Statements arrive with SQLite-style `?` placeholders and are rewritten to `$1..$n` once
// per SQL text; values travel in binary form and come back as SQLValue by column type.
import Foundation
import Logging
import PostgresNIO
import Synchronization

final class PostgresDatabase: SQLDatabase {
    let dialect = SQLDialect.postgres

    /// The pool. Exposed so that prepared statements (PostgresPreparedStatement) can run on it
    /// directly once hot paths use them.
    let client: PostgresClient
    /// A small pool of its own for the reads that follow the other servers' commits
    /// (`readStatementByStatement`): its sessions plan every statement generically
    /// (`peerReadStartupParameters`).
    let peerReadsClient: PostgresClient
    private let logger: Logger
    private let placeholders = PostgresPlaceholderCache()
    /// The task running both pools when this object started them itself (see `init`).
    private let clientTask: Task<Void, Never>?

    /// False while this server's own connection to PostgreSQL (PeerFollower.swift) is lost
    /// and not yet back: requests then fail at once with `.unavailable` instead of queueing
    /// for a connection the pool cannot make.
    private let reachable = Mutex(true)

    func setReachable(_ value: Bool) {
        reachable.withLock { $0 = value }
    }

    /// A write transaction is run again this many times after a deadlock or a serialization
    /// failure; its body must therefore have no effect outside the database.
    static let writeRetries = 5

    /// How long a session may sit between statements, in a transaction or holding a write's
    /// locks, before PostgreSQL ends it (docs/DEPLOYMENT.md): the longest a hung server holds
    /// back the others (StreamPositions.swift). Longer than any pause of a healthy write,
    /// including the test hook's hold (at most 5 s, ServerConfig.testHooks).
    static let idleSessionSeconds = 6

    /// - Parameters:
    ///   - startsClient: whether this object runs its two pools itself, in a task that
    ///     `close()` cancels. Pass false to run them elsewhere: both `client` and
    ///     `peerReadsClient` as services of a Hummingbird ServiceGroup (each is a
    ///     swift-service-lifecycle Service), or by awaiting `run()`. Until `client` runs every
    ///     transaction waits; until `peerReadsClient` runs, the other servers' events do.
    init(url: PostgresURL, logger: Logger = Logger(label: "parley-server.postgres"),
         maximumConnections: Int = 20, startsClient: Bool = true) {
        var configuration = PostgresClient.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password,
            database: url.database, tls: Self.tls(for: url.tlsMode))
        configuration.options.maximumConnections = maximumConnections
        // The server's application_name shows in pg_stat_activity: helps find our sessions.
        // A server that hangs (or is frozen, or cut off) while its connection holds a write's
        // locks would hold them, and with them its channels' writers and every server's
        // delivery of later numbers, for as long as it hangs: PostgreSQL ends such a session
        // once it has been idle this long, inside a transaction or not (a write takes its
        // locks before it begins one, StreamPositions.swift).
        // Connections idle in the pool run a keep-alive statement well within that time.
        configuration.options.additionalStartupParameters = Self.poolStartupParameters
        configuration.options.keepAliveBehavior = .init(frequency: .seconds(Self.idleSessionSeconds / 3))
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        configuration.options.maximumConnections = Self.peerReadConnections
        configuration.options.minimumConnections = 0
        configuration.options.additionalStartupParameters = Self.peerReadStartupParameters
        let peerReadsClient = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.peerReadsClient = peerReadsClient
        self.logger = logger
        clientTask = startsClient ? Task { await Self.run(client, peerReadsClient) } : nil
    }

    private static func run(_ pools: PostgresClient...) async {
        await withDiscardingTaskGroup { group in
            for pool in pools { group.addTask { await pool.run() } }
        }
    }

    /// The pooled sessions' settings (`init`): the check in `open` sends them too, so that a
    /// PostgreSQL that refuses one (`idle_session_timeout` needs 14) says so at startup.
    private static let poolStartupParameters = [
        ("application_name", "parley-server"),
        ("idle_in_transaction_session_timeout", "\(idleSessionSeconds)s"),
        ("idle_session_timeout", "\(idleSessionSeconds)s"),
    ]

    /// The sessions of `peerReadsClient`. Their one statement per message of another server
    /// (the events with the channels they changed, prepared: HotStatements.swift) costs about
    /// 0.4 ms to run with its generic plan, but PostgreSQL, once the event log holds thousands
    /// of rows, estimates that plan dearer than one planned for the values and plans it again
    /// at every execution: 1.5–4 ms of planning each time (docs/BENCHMARKS.md "Planned once").
    /// Every statement with parameters on these sessions gets a generic plan: the read of
    /// several ranges, the channels loaded after it and the catch-up's counter, each a lookup
    /// by key. The main pool's statements keep the default, planned for their values.
    static let peerReadStartupParameters = poolStartupParameters + [("plan_cache_mode", "force_generic_plan")]

    /// Connections of `peerReadsClient`: a read per batch of other servers' events, one at a
    /// time on the hub, and the catch-ups (every second, after the listening connection
    /// returns, and before a stream resumes from an id this server has not delivered), one
    /// short statement each.
    static let peerReadConnections = 2

    /// Checks with one direct connection that the server accepts us, then creates the
    /// database object: a wrong address, password or database name shows at startup, with
    /// the server's reason. (Through the pool the same mistakes surface only after its
    /// retries give up, about a minute later, as "circuit breaker tripped".)
    static func open(url: PostgresURL, logger: Logger = Logger(label: "parley-server.postgres"),
                     maximumConnections: Int = 20, startsClient: Bool = true) async throws -> PostgresDatabase {
        do {
            let connection = try await connect(url, id: 0, logger: logger, startupParameters: peerReadStartupParameters)
            try? await connection.close()
        } catch {
            throw StorageError("cannot connect to PostgreSQL database \(url): \(PostgresErrors.mapped(error))")
        }
        return PostgresDatabase(url: url, logger: logger, maximumConnections: maximumConnections,
                                startsClient: startsClient)
    }

    /// A connection of its own, outside the pool (one that listens for notifications).
    static func connect(_ url: PostgresURL, id: Int, logger: Logger,
                        startupParameters: [(String, String)] = []) async throws -> PostgresConnection {
        var configuration = PostgresConnection.Configuration(
            host: url.host, port: url.port, username: url.user, password: url.password,
            database: url.database, tls: try connectionTLS(for: url.tlsMode))
        configuration.options.additionalStartupParameters = startupParameters
        return try await PostgresConnection.connect(configuration: configuration, id: id, logger: logger)
    }

    /// Runs the connection pool until the calling task is cancelled. Only for a database made
    /// with `startsClient: false`; PostgresClient allows one `run()` in its lifetime.
    func run() async {
        await Self.run(client, peerReadsClient)
    }

    /// Stops the pool if this object started it; later transactions fail. A pool run
    /// elsewhere stops when its own task is cancelled.
    func close() async {
        clientTask?.cancel()
        await clientTask?.value
    }

    private static func tlsConfiguration(for mode: PostgresTLSMode) -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        // As libpq does for prefer/require: encrypt, but accept any certificate.
        if mode != .verifyFull { configuration.certificateVerification = .none }
        return configuration
    }

    private static func tls(for mode: PostgresTLSMode) -> PostgresClient.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(tlsConfiguration(for: mode))
        case .require, .verifyFull: return .require(tlsConfiguration(for: mode))
        }
    }

    /// The same for a single connection, which takes a ready SSL context.
    private static func connectionTLS(for mode: PostgresTLSMode) throws -> PostgresConnection.Configuration.TLS {
        switch mode {
        case .disable: return .disable
        case .prefer: return .prefer(try NIOSSLContext(configuration: tlsConfiguration(for: mode)))
        case .require, .verifyFull: return .require(try NIOSSLContext(configuration: tlsConfiguration(for: mode)))
        }
    }

    // MARK: Transactions

    /// Gives up a transaction still running once the database is known to be unreachable, or
    /// once its own connection closed (PostgreSQL ended the session, e.g. after
    /// `idle_in_transaction_session_timeout`) (`StatementGuard`): otherwise a statement that
    /// never completes would keep the request, and a writer this server's write lock, for
    /// good. (Measured: a COMMIT sent as the server's FATAL arrived never completed.)
    private func watch(_ session: PostgresSession, _ connection: PostgresConnection) -> Task<Void, Never> {
        let statements = session.statements
        // Polled rather than a callback on the connection's close future: connections live
        // long in the pool, and a callback per transaction would pile up on each of them.
        return Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(500))
                guard let self, !Task.isCancelled else { return }
                if connection.isClosed {
                    statements.abandon(StorageError(
                        "the database connection closed; the transaction was given up (if it was committing, its outcome is unknown)",
                        kind: .unavailable))
                    return
                }
                if !self.reachable.withLock({ $0 }) {
                    statements.abandon(StorageError(
                        "PostgreSQL cannot be reached; the transaction was given up (if it was committing, its outcome is unknown)",
                        kind: .unavailable))
                    try? await connection.close()
                    return
                }
            }
        }
    }

    /// Throws `.unavailable` while the database is known to be unreachable.
    private func checkReachable() throws {
        if !reachable.withLock({ $0 }) {
            throw StorageError("PostgreSQL cannot be reached; retry shortly", kind: .unavailable)
        }
    }

    func read<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await read(inOneSnapshot: true, body)
    }

    /// Without a transaction: each statement commits on its own (the body only reads).
    func readStatementByStatement<T>(_ body: (any SQLSession) async throws -> T) async throws -> T {
        try await read(inOneSnapshot: false, body)
    }

    private func read<T>(inOneSnapshot: Bool, _ body: (any SQLSession) async throws -> T) async throws -> T {
        try await ServerMetrics.shared.transaction(.read) {
            try checkReachable()
            var leased = false
            do {
                return try await (inOneSnapshot ? client : peerReadsClient).withConnection { connection in
                    leased = true
                    let session = PostgresSession(connection: connection, placeholders: placeholders, logger: logger)
                    let watchdog = watch(session, connection)
                    defer { watchdog.cancel() }
                    guard inOneSnapshot else { return try await body(session) }
                    try await session.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    do {
                        let value = try await body(session)
                        try await session.run("COMMIT")
                        return value
                    } catch {
                        // The body's error is the one worth reporting; a failed ROLLBACK means
                        // the connection is broken, and the pool drops broken connections.
                        session.discardHeld()
                        try? await session.run("ROLLBACK")
                        throw error
                    }
                }
            } catch {
                throw leased ? PostgresErrors.mapped(error) : PostgresErrors.leaseFailure(error)
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
            try checkReachable()
            var retriesLeft = Self.writeRetries
            while true {
                var leased = false
                do {
                    // What client.withTransaction does (BEGIN, READ COMMITTED; COMMIT or ROLLBACK),
                    // in steps so that a failure to get a connection is told apart.
                    return try await client.withConnection { connection in
                        leased = true
                        let session = PostgresSession(connection: connection, placeholders: placeholders, logger: logger,
                                                      beginsLate: beginningLate)
                        let watchdog = watch(session, connection)
                        defer { watchdog.cancel() }
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
                    let mapped = leased ? PostgresErrors.mapped(error) : PostgresErrors.leaseFailure(error)
                    guard retriesLeft > 0, let storageError = mapped as? StorageError, storageError.kind == .retryable
                    else { throw mapped }
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
    private let connection: PostgresConnection
    private let placeholders: PostgresPlaceholderCache
    private let logger: Logger
    /// Ends a statement that never completes (see `PostgresDatabase.watch`).
    let statements = StatementGuard()

    fileprivate init(connection: PostgresConnection, placeholders: PostgresPlaceholderCache, logger: Logger,
                     beginsLate: Bool = false) {
        self.connection = connection
        self.placeholders = placeholders
        self.logger = logger
        self.beginsLate = beginsLate
    }

    // MARK: a write that begins late (`PostgresDatabase.writeBeginningLate`)

    private let beginsLate: Bool
    private enum LateTransaction { case notBegun, begun, ended }
    private var late = LateTransaction.notBegun

    /// The advisory locks this session holds at session level for its write
    /// (StreamPositions.swift): taken by statements that may run before BEGIN, they outlive
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
    /// Requests/ChannelBatch.swift).
    func beginTransaction() async throws { try await beginIfLate() }

    /// A savepoint of a batch's member (Requests/ChannelBatch.swift); each member's shadows the
    /// one before it.
    func savepoint() async throws { try await run("SAVEPOINT batch_member") }

    /// Undoes what a member did since its savepoint, what it held included; the transaction
    /// is usable again even if a statement failed.
    func rollbackToSavepoint() async throws {
        discardHeld()
        try await run("ROLLBACK TO SAVEPOINT batch_member")
    }

    /// After the body: sends what is still held (with the locks kept to the commit), then
    /// COMMIT if the transaction began; gives the locks up if nothing was written.
    fileprivate func finishLateWrite() async throws {
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
            try? await connection.close()
        }
    }

    /// Writes waiting for the next statement (`executeHeld`), in the order they were made.
    private var held: [SQLWrite] = []

    func executeHeld(_ write: SQLWrite) async throws {
        if held.contains(where: { $0.table == write.table }) { try await sendHeld() }
        held.append(write)
    }

    /// A transaction that fails drops what it held.
    func discardHeld() { held = [] }

    /// Sends what is held (before a statement that may read it, and before COMMIT).
    func sendHeld() async throws {
        guard !held.isEmpty else { return }
        _ = try await writeTogether([], selecting: nil, last: false)
    }

    /// One statement: `WITH w0 AS (write), w1 AS (write RETURNING v), … SELECT (SELECT * FROM
    /// w1), …, selecting`. PostgreSQL runs every data-modifying WITH part exactly once, all in
    /// one snapshot: the parts change different tables, so none misses another's change.
    /// Writes of a table already in the statement go into the next one. The last statement
    /// of a write that holds session locks keeps them to its commit
    /// (`StreamPositions.holdToCommitCall`); a write that began late and has all its writes in
    /// that one statement commits with it, without BEGIN.
    func writeTogether(_ writes: [SQLWrite], selecting: SQLExpression?, last: Bool) async throws -> [SQLValue] {
        var pending = held + writes
        held = []
        var statements: [[SQLWrite]] = []
        while !pending.isEmpty {
            var tables = Set<String>()
            let count = pending.prefix { tables.insert($0.table).inserted }.count
            statements.append(Array(pending.prefix(count)))
            pending.removeFirst(count)
        }
        let keepsLocks = last && !sessionLocks.isEmpty
        if keepsLocks || selecting != nil, statements.isEmpty { statements.append([]) }
        if beginsLate, late == .ended, !statements.isEmpty { throw StorageError("a statement after the last one of a write") }
        if beginsLate, late == .notBegun, !(last && statements.count == 1) { try await beginIfLate() }
        var values: [SQLValue] = []
        for (index, part) in statements.enumerated() {
            let isLast = index == statements.count - 1
            let selected = isLast ? selecting : nil
            let kept = isLast && keepsLocks ? StreamPositions.holdToCommitCall(sessionLocks) : nil
            if part.count == 1, selected == nil, kept == nil, !part[0].returnsOne {
                try await execute(part[0].sql, part[0].binds)
                continue
            }
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
            if let selected {
                columns.append(selected.sql)
                binds += selected.binds
            }
            let returned = columns.count - leading
            sql += (sql.isEmpty ? "" : " ") + "SELECT " + (columns.isEmpty ? "1" : columns.joined(separator: ", "))
            // A send writes the same shape again and again: worth preparing. Large ones (a
            // channel's whole member list, chunks of 500 rows) come in too many sizes.
            if binds.count <= HotStatements.learnedValuesLimit { _ = HotStatements.learn(sql) }
            // A write that began late and has not begun: its one statement, outside any
            // transaction, commits as it ends.
            let endsWrite = beginsLate && late == .notBegun
            let row = try await send(sql, binds).first
            values += (row?.values ?? []).dropFirst(leading).prefix(returned)
            if kept != nil { sessionLocks = StreamPositions.Locks() }
            if endsWrite { late = .ended }
        }
        return values
    }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await sendHeld()
        if beginsLate, !Self.isPlainRead(sql) || late == .ended { try await beginIfLate() }
        return try await send(sql, binds)
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
        return !sql.contains(" FOR UPDATE") && !sql.contains(" FOR SHARE") && !sql.contains(" FOR NO KEY UPDATE")
            && !sql.contains(" FOR KEY SHARE")
    }

    /// One statement as it is, prepared if it is hot.
    private func send(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        if let slot = HotStatements.slot(for: sql) { return try await runPrepared(HotStatements.types[slot], binds) }
        let postgresQuery = try makeQuery(sql, binds)
        do {
            let result = try await statements.run { connection.query(postgresQuery, logger: logger) }
            return try result.rows.map(PostgresValues.decode)
        } catch {
            throw PostgresErrors.mapped(error)
        }
    }

    /// Prepared statements (HotStatements.swift) report no command tag through PostgresNIO:
    /// for those the count is 0. No caller reads the count of one of them.
    @discardableResult
    func execute(_ sql: String, _ binds: [SQLValue]) async throws -> Int {
        try await sendHeld()
        try await beginIfLate()
        if let slot = HotStatements.slot(for: sql) {
            _ = try await runPrepared(HotStatements.types[slot], binds)
            return 0
        }
        let postgresQuery = try makeQuery(sql, binds)
        do {
            // Only this (EventLoopFuture) form of `query` hands back the command tag, whose
            // row count is what was inserted, updated or deleted. It collects any rows a
            // RETURNING clause produced; use `query` for those.
            let result = try await statements.run { connection.query(postgresQuery, logger: logger) }
            return result.metadata.rows ?? 0
        } catch {
            throw PostgresErrors.mapped(error)
        }
    }

    func executeScript(_ sql: String) async throws {
        try await beginIfLate()
        for statement in SQLScanner.statements(in: sql) {
            try await run(statement)
        }
    }

    /// Runs a prepared statement (prepared once per connection by PostgresNIO), for hot paths
    /// that outgrow the `?` interface.
    private func execute<Statement: PostgresPreparedStatement>(prepared statement: Statement) async throws -> [Statement.Row]
    where Statement.Row: Sendable {
        try await sendHeld()
        let (connection, logger) = (self.connection, self.logger)
        do {
            return try await statements.runInTask {
                var rows: [Statement.Row] = []
                for try await row in try await connection.execute(statement, logger: logger) {
                    rows.append(row)
                }
                return rows
            }
        } catch {
            throw PostgresErrors.mapped(error)
        }
    }

    /// A statement without parameters whose rows, if any, are not wanted. A ROLLBACK drops
    /// what is held instead of sending it (a held write failing there would keep the
    /// ROLLBACK from being sent, and the connection would go back to the pool in its
    /// aborted transaction).
    fileprivate func run(_ sql: String) async throws {
        // BEGIN goes before what is held (a write that begins late holds its first writes).
        if sql.hasPrefix("ROLLBACK") { discardHeld() } else if sql != "BEGIN" { try await sendHeld() }
        do {
            _ = try await statements.run { connection.query(PostgresQuery(unsafeSQL: sql), logger: logger) }
        } catch {
            throw PostgresErrors.mapped(error)
        }
    }

    private func runPrepared<Slot: HotSlot>(_ slot: Slot.Type, _ binds: [SQLValue]) async throws -> [SQLRow] {
        try await execute(prepared: HotStatement<Slot>(bindings: Self.bindings(binds)))
    }

    private func makeQuery(_ sql: String, _ binds: [SQLValue]) throws -> PostgresQuery {
        let rewritten = placeholders.rewritten(sql)
        guard rewritten.parameterCount == binds.count else {
            throw StorageError(
                "statement has \(rewritten.parameterCount) placeholders but \(binds.count) values: \(sql.prefix(200))")
        }
        return PostgresQuery(unsafeSQL: rewritten.sql, binds: Self.bindings(binds))
    }

    private static func bindings(_ binds: [SQLValue]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .null: bindings.appendNull()
            case .int(let number): bindings.append(number)
            case .text(let text): bindings.append(text)
            case .blob(let bytes): bindings.append(ByteBuffer(bytes: bytes))
            }
        }
        return bindings
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
        let bytes = Array(sql.utf8)
        guard bytes.contains(UInt8(ascii: "?")) else { return (sql, 0) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + 16)
        var count = 0
        for segment in segments(bytes) {
            guard segment.isCode else { output += bytes[segment.range]; continue }
            for byte in bytes[segment.range] {
                if byte == UInt8(ascii: "?") {
                    count += 1
                    output += Array("$\(count)".utf8)
                } else {
                    output.append(byte)
                }
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

/// Cells of a result row as SQLValue. PostgresNIO asks for every column in binary format.
enum PostgresValues {
    static func decode(_ row: PostgresRow) throws -> SQLRow {
        var values: [SQLValue] = []
        values.reserveCapacity(row.count)
        for cell in row {
            values.append(try decode(cell))
        }
        return SQLRow(values: values)
    }

    static func decode(_ cell: PostgresCell) throws -> SQLValue {
        guard let bytes = cell.bytes else { return .null }
        do {
            switch cell.dataType {
            case .int2, .int4, .int8:
                return .int(try cell.decode(Int64.self))
            case .oid:
                // PostgresNIO has no decoder for it: four bytes, unsigned.
                var copy = bytes
                if let oid = copy.readInteger(as: UInt32.self), copy.readableBytes == 0 { return .int(Int64(oid)) }
            case .bool:
                return .int(try cell.decode(Bool.self) ? 1 : 0)
            case .text, .varchar, .name, .bpchar, .json, .jsonb, .uuid:
                return .text(try cell.decode(String.self))
            case .bytea:
                return .blob(Array(bytes.readableBytesView))
            case .numeric:
                // SUM over bigint, and AVG, come back as numeric.
                if let integer = integralNumeric(bytes) { return .int(integer) }
                return .text("\(try cell.decode(Decimal.self))")
            case .float4, .float8:
                return .text("\(try cell.decode(Double.self))")
            default:
                break
            }
        } catch let error as PostgresDecodingError {
            throw StorageError(
                "cannot read column '\(cell.columnName)' of PostgreSQL type \(cell.dataType): \(error.code)")
        }
        throw StorageError(
            "column '\(cell.columnName)' has PostgreSQL type \(cell.dataType), which the storage layer does not read; cast it to bigint, text or bytea in the query")
    }

    /// A binary numeric that is a whole number within Int64, else nil. The format: digit
    /// count, weight (the power of 10000 of the first digit), sign, display scale, then the
    /// base-10000 digits.
    static func integralNumeric(_ buffer: ByteBuffer) -> Int64? {
        var buffer = buffer
        guard let digitCount = buffer.readInteger(as: Int16.self),
              let weight = buffer.readInteger(as: Int16.self),
              let sign = buffer.readInteger(as: UInt16.self),
              buffer.readInteger(as: Int16.self) != nil,
              digitCount >= 0, buffer.readableBytes == Int(digitCount) * 2
        else { return nil }
        let negative: Bool
        switch sign {
        case 0x0000: negative = false
        case 0x4000: negative = true
        default: return nil // NaN or infinity
        }
        var digits: [Int64] = []
        for _ in 0..<digitCount {
            guard let digit = buffer.readInteger(as: Int16.self) else { return nil }
            digits.append(Int64(digit))
        }
        if digits.isEmpty { return 0 }
        // Digits past the units position would be a fraction: PostgreSQL strips zero ones.
        guard Int(weight) >= digits.count - 1 else { return nil }
        var value: Int64 = 0
        for position in 0...Int(weight) {
            let digit = position < digits.count ? digits[position] : 0
            let (shifted, overflowShift) = value.multipliedReportingOverflow(by: 10_000)
            let (next, overflowAdd) = negative
                ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            if overflowShift || overflowAdd { return nil }
            value = next
        }
        return value
    }
}

/// PostgresNIO's errors as StorageError, keeping what callers branch on (the SQLSTATE) and
/// what a reader needs (the server's message), never connection secrets.
enum PostgresErrors {
    static func mapped(_ error: any Error) -> any Error {
        switch error {
        case let error as PostgresTransactionError:
            // The body's own error goes back unchanged (it is already mapped, or the
            // caller's); a failure to begin or commit is the database's.
            if let closureError = error.closureError { return mapped(closureError) }
            if let commitError = error.commitError { return mapped(commitError) }
            if let beginError = error.beginError { return mapped(beginError) }
            return StorageError("PostgreSQL transaction failed")
        case let error as PSQLError:
            return storageError(error)
        case let error as PostgresDecodingError:
            return StorageError("cannot read column '\(error.columnName)' of PostgreSQL type \(error.postgresType): \(error.code)")
        default:
            return error
        }
    }

    /// An error before a connection was leased: the pool is closed, or it could not connect
    /// (PostgresNIO then reports its pool's own error type, not PSQLError).
    static func leaseFailure(_ error: any Error) -> any Error {
        if error is CancellationError { return error }
        if var storageError = mapped(error) as? StorageError {
            storageError.kind = .unavailable
            return storageError
        }
        return StorageError("PostgreSQL: no connection available (\(error))", kind: .unavailable)
    }

    private static func storageError(_ error: PSQLError) -> StorageError {
        guard error.code == .server, let info = error.serverInfo else {
            var description = "PostgreSQL: \(error.code)"
            if let underlying = error.underlying { description += " (\(underlying))" }
            let lost: Set<PSQLError.Code> = [.connectionError, .serverClosedConnection, .uncleanShutdown, .poolClosed,
                                             .clientClosedConnection]
            return StorageError(description, kind: lost.contains(error.code) ? .unavailable : .other)
        }
        let state = info[.sqlState] ?? "?????"
        var description = "PostgreSQL error \(state): \(info[.message] ?? "no message")"
        if let detail = info[.detail] { description += " (\(detail))" }
        if state == "25P02" {
            // The usual cause when code written for SQLite continues after a failed statement.
            description += "; an earlier statement of this transaction failed, and PostgreSQL ignores everything after it"
        }
        if let sql = error.query?.sql { description += " in: \(sql.prefix(300))" }
        return StorageError(description, kind: kind(ofSQLState: state))
    }

    static func kind(ofSQLState state: String) -> SQLFailureKind {
        switch state {
        case "23505": return .uniqueViolation
        case "40001", "40P01": return .retryable
        // The server shuts down, crashed, or does not accept connections yet; the connection is gone.
        case "57P01", "57P02", "57P03": return .unavailable
        case _ where state.hasPrefix("08"): return .unavailable
        default: return .other
        }
    }
}

/// Runs a transaction's statements so that each can be given up from outside: with PostgresNIO
/// 1.33.2 a statement in flight as PostgreSQL shuts down was seen never to complete, even
/// once its connection was closed (the database restart test of tests/test_nodes.py). The
/// caller waits for the first of the statement's result and `abandon`; after `abandon` every
/// later statement fails at once. A statement started as an EventLoopFuture costs nothing
/// more than awaiting it; the prepared statements, which PostgresNIO offers only as async
/// calls, each run in a task of their own (about 10 µs here, docs/BENCHMARKS.md).
final class StatementGuard: Sendable {
    /// Where the tasks of prepared statements run, for a caller that set it: the event hub
    /// sets its own thread, so that its reads of other servers' events are sent and their rows
    /// taken on the thread that waits for them, instead of a thread of the shared pool (two
    /// hand-offs between threads fewer per read, docs/BENCHMARKS.md). Nil: the shared pool.
    @TaskLocal static var executor: (any TaskExecutor)? = nil

    private let state = Mutex<(abandoned: (any Error)?, current: (@Sendable (any Error) -> Void)?)>((nil, nil))

    /// Starts the statement with `start` unless the transaction was abandoned.
    func run<R: Sendable>(_ start: () -> EventLoopFuture<R>) async throws -> R {
        let outcome = try begin(R.self)
        defer { end() }
        start().whenComplete { outcome.finish($0.mapError { $0 }) }
        return try await outcome.wait().get()
    }

    func runInTask<R: Sendable>(_ statement: @escaping @Sendable () async throws -> R) async throws -> R {
        let outcome = try begin(R.self)
        defer { end() }
        Task(executorPreference: Self.executor) {
            do { outcome.finish(.success(try await statement())) } catch { outcome.finish(.failure(error)) }
        }
        return try await outcome.wait().get()
    }

    private func begin<R: Sendable>(_: R.Type) throws -> Outcome<R> {
        let outcome = Outcome<R>()
        let failure: (any Error)? = state.withLock { state in
            if let abandoned = state.abandoned { return abandoned }
            state.current = { outcome.finish(.failure($0)) }
            return nil
        }
        if let failure { throw failure }
        return outcome
    }

    private func end() { state.withLock { $0.current = nil } }

    /// Fails the statement running, and every later one, with `error`.
    func abandon(_ error: any Error) {
        let current = state.withLock { state in
            if state.abandoned == nil { state.abandoned = error }
            return state.current
        }
        current?(error)
    }
}

/// The first result handed to it, awaited once.
final class Outcome<R: Sendable>: Sendable {
    private let state = Mutex<(result: Result<R, any Error>?, waiter: CheckedContinuation<Result<R, any Error>, Never>?)>(
        (nil, nil))

    func finish(_ result: Result<R, any Error>) {
        let waiter: CheckedContinuation<Result<R, any Error>, Never>? = state.withLock { state in
            if state.result != nil { return nil }
            state.result = result
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: result)
    }

    func wait() async -> Result<R, any Error> {
        await withCheckedContinuation { (continuation: CheckedContinuation<Result<R, any Error>, Never>) in
            let ready: Result<R, any Error>? = state.withLock { state in
                if let result = state.result { return result }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
