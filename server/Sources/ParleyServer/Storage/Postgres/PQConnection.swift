// One connection to PostgreSQL through libpq, with a thread of its own. A transaction's task
// runs on that thread (`PostgresDatabase` sets it as the task's executor preference), so each
// statement is a blocking libpq call made where the task already is: no hand-off between
// threads per statement. Parameters travel as text (bytea as binary), results come back as
// text and are read by column type.
import CParleyPQ
import Glibc
import Synchronization

final class PQConnection: @unchecked Sendable {
    /// Runs the connection's statements and the task of whoever leased it.
    let thread: ThreadExecutor
    private let handle: OpaquePointer
    private let socket: Int32
    /// Slots of HotStatements.swift prepared on this connection. Touched only by the lessee.
    private var prepared = Set<Int>()
    /// Set once a statement failed because the connection did (or `abandon` cut it): the pool
    /// then closes it instead of lending it again.
    private let broken = Atomic<Bool>(false)

    /// Whole and outside any transaction: fit to lend again.
    var isReusable: Bool {
        !broken.load(ordering: .relaxed) && PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Idle, not inside a transaction block (read between statements, by the lessee).
    var isOutsideTransaction: Bool { PQtransactionStatus(handle) == PQTRANS_IDLE }

    private init(handle: OpaquePointer, thread: ThreadExecutor) {
        self.handle = handle
        self.thread = thread
        socket = PQsocket(handle)
    }

    /// Opens a connection on `thread`. `settings` are libpq's connection keywords.
    static func connect(_ settings: [(String, String)], on thread: ThreadExecutor) async throws -> PQConnection {
        try await withTaskExecutorPreference(thread) { try await connectHere(settings, thread: thread) }
    }

    private static func connectHere(_ settings: [(String, String)], thread: ThreadExecutor) async throws -> PQConnection {
        let keywords = settings.map { strdup($0.0) }
        let values = settings.map { strdup($0.1) }
        defer {
            keywords.forEach { free($0) }
            values.forEach { free($0) }
        }
        let keywordPointers = keywords.map { UnsafePointer($0) } + [nil]
        let valuePointers = values.map { UnsafePointer($0) } + [nil]
        guard let handle = PQconnectdbParams(keywordPointers, valuePointers, 0) else {
            throw StorageError("PostgreSQL: libpq could not allocate a connection", kind: .unavailable)
        }
        guard PQstatus(handle) == CONNECTION_OK else {
            let message = Self.text(PQerrorMessage(handle))
            PQfinish(handle)
            throw StorageError(message.isEmpty ? "cannot connect" : message, kind: .unavailable)
        }
        return PQConnection(handle: handle, thread: thread)
    }

    /// Ends the session. Only when nobody runs statements on it.
    func close() { PQfinish(handle) }

    /// Cuts the connection under a statement that may never complete (the database is known to
    /// be unreachable): the statement fails at once, and so does every later one. Any thread.
    func abandon() {
        broken.store(true, ordering: .relaxed)
        _ = Glibc.shutdown(socket, Int32(SHUT_RDWR))
    }

    /// True if PostgreSQL sent something, or closed the socket, while the connection sat idle:
    /// only a session it ends (idle timeout, shutdown) does that, so the connection is gone.
    func endedWhileIdle() -> Bool {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) != 0
    }

    // MARK: Statements (on `thread`, by the lessee)

    /// Runs `body` on the connection's thread: at once when the caller is there already.
    private func onThread<T: Sendable>(_ body: @Sendable () throws -> T) async throws -> T {
        if thread.isCurrent { return try body() }
        return try await withTaskExecutorPreference(thread) { try await Self.call(body) }
    }

    private static func call<T: Sendable>(_ body: @Sendable () throws -> T) async throws -> T { try body() }

    /// A statement without parameters, in the simple protocol (one message, one round trip).
    func run(_ sql: String) async throws -> PQResult {
        try await onThread { try self.checked(PQexec(self.handle, sql), sql: sql) }
    }

    /// A statement with `$n` parameters, parsed and planned for this execution.
    func execute(_ sql: String, _ values: [SQLValue]) async throws -> PQResult {
        try await onThread {
            try Self.withParameters(values, declaringTypes: true) { count, types, pointers, lengths, formats in
                try self.checked(PQexecParams(self.handle, sql, count, types, pointers, lengths, formats, 0), sql: sql)
            }
        }
    }

    /// A hot statement (HotStatements.swift), prepared on this connection the first time it
    /// runs here, in the same round trip. Its parameters' types are PostgreSQL's inference
    /// from the text.
    func executePrepared(slot: Int, _ values: [SQLValue]) async throws -> PQResult {
        if !prepared.contains(slot) {
            return try await runInOneFlight([FlightStatement(slot: slot, sql: HotStatements.postgresText(slot), values: values)])[0]
        }
        return try await onThread {
            let name = "parley_hot_\(slot)"
            return try Self.withParameters(values, declaringTypes: false) { count, _, pointers, lengths, formats in
                try self.checked(PQexecPrepared(self.handle, name, count, pointers, lengths, formats, 0),
                                 sql: HotStatements.postgresText(slot))
            }
        }
    }

    /// One statement of `runInOneFlight`: a hot statement's slot, or a text with `$n` parameters.
    struct FlightStatement {
        var slot: Int?
        var sql: String
        var values: [SQLValue]
    }

    /// Statements sent together and answered together: one round trip. Outside a transaction
    /// block they run in one implicit transaction, which commits at the Sync that ends them
    /// when all succeeded; inside one they are statements of it. Once one fails, PostgreSQL
    /// skips the rest and rolls back the implicit transaction (an open block is left aborted).
    /// A hot statement not yet prepared on this connection is prepared in the same round trip,
    /// right before it runs. Returns each statement's result; throws the first failure once
    /// every result was read (the connection is then idle again).
    func runInOneFlight(_ statements: [FlightStatement]) async throws -> [PQResult] {
        try await onThread {
            enum Answer { case preparation(Int, String), statement(String) }
            var answers: [Answer] = []
            guard PQenterPipelineMode(self.handle) == 1 else { throw self.connectionError() }
            for statement in statements {
                if let slot = statement.slot, !self.prepared.contains(slot),
                   !answers.contains(where: { if case .preparation(slot, _) = $0 { true } else { false } }) {
                    let sql = HotStatements.postgresText(slot)
                    guard PQsendPrepare(self.handle, "parley_hot_\(slot)", sql, Int32(statement.values.count), nil) == 1
                    else { throw self.connectionError() }
                    answers.append(.preparation(slot, sql))
                }
                let sent = if let slot = statement.slot {
                    try Self.withParameters(statement.values, declaringTypes: false) { count, _, pointers, lengths, formats in
                        PQsendQueryPrepared(self.handle, "parley_hot_\(slot)", count, pointers, lengths, formats, 0)
                    }
                } else {
                    try Self.withParameters(statement.values, declaringTypes: true) { count, types, pointers, lengths, formats in
                        PQsendQueryParams(self.handle, statement.sql, count, types, pointers, lengths, formats, 0)
                    }
                }
                guard sent == 1 else { throw self.connectionError() }
                answers.append(.statement(statement.sql))
            }
            guard PQpipelineSync(self.handle) == 1 else { throw self.connectionError() }
            var results: [PQResult] = []
            var failure: (any Error)? = nil
            for answer in answers {
                let sql = switch answer { case .preparation(_, let sql), .statement(let sql): sql }
                var kept: PQResult? = nil
                while let result = PQgetResult(self.handle) {
                    if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
                        PQclear(result)
                        continue
                    }
                    do {
                        let checked = try self.checked(result, sql: sql)
                        if kept == nil { kept = checked }
                    } catch {
                        if failure == nil { failure = error }
                    }
                }
                if PQstatus(self.handle) != CONNECTION_OK { throw self.connectionError() }
                switch answer {
                case .preparation(let slot, _):
                    if kept != nil { self.prepared.insert(slot) }
                case .statement:
                    if let kept { results.append(kept) }
                }
            }
            guard let sync = PQgetResult(self.handle) else { throw self.connectionError() }
            let status = PQresultStatus(sync)
            PQclear(sync)
            guard status == PGRES_PIPELINE_SYNC, PQexitPipelineMode(self.handle) == 1 else { throw self.connectionError() }
            if let failure { throw failure }
            guard results.count == statements.count else {
                throw StorageError("PostgreSQL answered \(results.count) of \(statements.count) statements sent together")
            }
            return results
        }
    }

    /// Waits up to `milliseconds` for notifications (after LISTEN) and returns those that came,
    /// as (channel, payload). Blocks the connection's thread: for a connection that only listens.
    func notifications(waitingUpTo milliseconds: Int32) async throws -> [(channel: String, payload: String)] {
        try await onThread {
            var found: [(channel: String, payload: String)] = []
            func collect() throws {
                guard PQconsumeInput(self.handle) == 1 else { throw self.connectionError() }
                while let notice = PQnotifies(self.handle) {
                    found.append((Self.text(notice.pointee.relname), Self.text(notice.pointee.extra)))
                    PQfreemem(notice)
                }
            }
            try collect()
            if found.isEmpty {
                var descriptor = pollfd(fd: self.socket, events: Int16(POLLIN), revents: 0)
                if poll(&descriptor, 1, milliseconds) != 0 { try collect() }
            }
            return found
        }
    }

    /// The values as libpq's parameter arrays, alive during `body`. Integers and text go as
    /// text; bytes in binary. With `declaringTypes` each gets the type PostgreSQL should read
    /// it as (bigint, text, bytea; NULL none), as the SQLite-style statements expect.
    private static func withParameters<R>(
        _ values: [SQLValue], declaringTypes: Bool,
        _ body: (Int32, UnsafePointer<Oid>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
                 UnsafePointer<Int32>?) throws -> R
    ) throws -> R {
        if values.isEmpty { return try body(0, nil, nil, nil, nil) }
        var storage: [UInt8] = []
        var offsets: [Int] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        var types: [Oid] = []
        offsets.reserveCapacity(values.count)
        for value in values {
            offsets.append(storage.count)
            switch value {
            case .null:
                offsets[offsets.count - 1] = -1
                lengths.append(0); formats.append(0); types.append(0)
            case .int(let number):
                storage += "\(number)".utf8
                storage.append(0)
                lengths.append(0); formats.append(0); types.append(20)
            case .text(let text):
                storage += text.utf8
                storage.append(0)
                lengths.append(0); formats.append(0); types.append(25)
            case .blob(let bytes):
                storage += bytes
                lengths.append(Int32(bytes.count)); formats.append(1); types.append(17)
            }
        }
        if storage.isEmpty { storage.append(0) }
        return try storage.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
            let pointers: [UnsafePointer<CChar>?] = offsets.map { $0 < 0 ? nil : base + $0 }
            return try body(Int32(values.count), declaringTypes ? types : nil, pointers, lengths, formats)
        }
    }

    /// The result, or the error it reports. A failure without a SQLSTATE is the connection's.
    private func checked(_ result: OpaquePointer?, sql: String) throws -> PQResult {
        guard let result else { throw connectionError() }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PQResult(result)
        default:
            defer { PQclear(result) }
            func field(_ code: Int32) -> String? {
                let value: UnsafeMutablePointer<CChar>? = PQresultErrorField(result, code)
                return value.map { Self.text($0) }
            }
            guard let state = field(parley_pq_diag_sqlstate) else { throw connectionError() }
            let message = field(parley_pq_diag_message) ?? "no message"
            let detail = field(parley_pq_diag_detail)
            let kind = PostgresErrors.kind(ofSQLState: state)
            if kind == .unavailable { broken.store(true, ordering: .relaxed) }
            throw PostgresErrors.serverError(state: state, message: message, detail: detail, sql: sql, kind: kind)
        }
    }

    private func connectionError() -> StorageError {
        broken.store(true, ordering: .relaxed)
        let message = Self.text(PQerrorMessage(handle))
        return StorageError("PostgreSQL: the connection failed (\(message.isEmpty ? "closed" : message))",
                            kind: .unavailable)
    }

    fileprivate static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        var text = String(cString: pointer)
        while text.last == "\n" { text.removeLast() }
        return text
    }
}

/// A statement's result; freed when dropped.
final class PQResult: @unchecked Sendable {
    private let result: OpaquePointer
    init(_ result: OpaquePointer) { self.result = result }
    deinit { PQclear(result) }

    /// Rows inserted, updated, deleted or selected, from the command tag (0 when it has none).
    var affectedRows: Int { Int(String(cString: PQcmdTuples(result))) ?? 0 }

    /// Every row, each cell as SQLValue by its column's type.
    func rows() throws -> [SQLRow] {
        let rowCount = PQntuples(result), columnCount = PQnfields(result)
        guard rowCount > 0 else { return [] }
        let types = (0..<columnCount).map { PQftype(result, $0) }
        var rows: [SQLRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(columnCount))
            for column in 0..<columnCount {
                if PQgetisnull(result, row, column) == 1 {
                    values.append(.null)
                    continue
                }
                let bytes = UnsafeRawBufferPointer(start: PQgetvalue(result, row, column),
                                                   count: Int(PQgetlength(result, row, column)))
                guard let value = PostgresValues.decode(text: bytes, type: types[Int(column)]) else {
                    let namePointer: UnsafeMutablePointer<CChar>? = PQfname(result, column)
                    let name = namePointer.map { String(cString: $0) } ?? "?"
                    throw StorageError(PostgresValues.unreadable(column: name, type: types[Int(column)]))
                }
                values.append(value)
            }
            rows.append(SQLRow(values: values))
        }
        return rows
    }
}
