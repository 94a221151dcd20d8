import CSQLite

/// A prepared statement. Obtain one from `SQLiteDatabase.statement(_:)` (cached) or
/// `prepare(_:)` (not cached). Same threading rule as its database.
///
/// Binding after the statement has been stepped starts a new execution (the statement
/// is reset first; other bindings are kept). Column readers return NULL-like defaults
/// (0, nil) when there is no current row or the column index is out of range, never
/// trap. After the database is closed every call throws `invalidState`.
public final class SQLiteStatement {
    public let sql: String
    private let connection: SQLiteConnection
    private var handle: OpaquePointer?
    /// `step()` returned a row that the column readers may read.
    private var hasRow = false
    /// Stepped since the last reset: binding now needs a reset first.
    private var isStarted = false
    /// Inside `rows(_:)`: the database hands out a separate statement for the same SQL
    /// instead of resetting this one under the running loop.
    private(set) var isIterating = false

    init(sql: String, connection: SQLiteConnection, handle: OpaquePointer) {
        self.sql = sql
        self.connection = connection
        self.handle = handle
    }

    deinit {
        if let handle { sqlite3_finalize(handle) }
    }

    func finalize() {
        guard let handle else { return }
        sqlite3_finalize(handle)
        self.handle = nil
        hasRow = false
        isStarted = false
    }

    private func liveHandle(_ operation: String) throws(ParleyError) -> OpaquePointer {
        guard let handle, connection.handle != nil else {
            throw ParleyError(.invalidState, "\(operation): the database of this statement is closed")
        }
        return handle
    }

    private func failure(_ operation: String, _ code: Int32) -> ParleyError {
        connection.failure(operation, code: code, sql: sql)
    }

    // MARK: Binding

    public var parameterCount: Int32 {
        guard let handle else { return 0 }
        return sqlite3_bind_parameter_count(handle)
    }

    /// Binds `value` to the 1-based parameter `index`. Text and blobs are copied by SQLite
    /// (SQLITE_TRANSIENT with an explicit length): a Swift string's UTF-8 buffer is only
    /// valid inside `withUTF8`, so handing SQLite that pointer for later would dangle, and
    /// one copy is the least any owned-buffer scheme would cost too. Embedded NULs survive.
    public func bind(_ index: Int32, _ value: SQLiteValue) throws(ParleyError) {
        let statement = try liveHandle("bind")
        if isStarted { reset() }
        let code: Int32
        switch value {
        case .null:
            code = sqlite3_bind_null(statement, index)
        case .integer(let number):
            code = sqlite3_bind_int64(statement, index, number)
        case .real(let number):
            code = sqlite3_bind_double(statement, index, number)
        case .text(var text):
            code = text.withUTF8 { bytes -> Int32 in
                guard let base = bytes.baseAddress, bytes.count > 0 else {
                    // A nil pointer would bind NULL; an empty string must stay text.
                    return sqlite3_bind_text64(statement, index, "", 0, parley_sqlite_transient(), UInt8(SQLITE_UTF8))
                }
                return sqlite3_bind_text64(
                    statement, index, UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self),
                    UInt64(bytes.count), parley_sqlite_transient(), UInt8(SQLITE_UTF8))
            }
        case .blob(let bytes):
            code = bytes.withUnsafeBytes { raw -> Int32 in
                guard let base = raw.baseAddress, raw.count > 0 else {
                    // A nil pointer would bind NULL; an empty blob must stay a blob.
                    return sqlite3_bind_zeroblob(statement, index, 0)
                }
                return sqlite3_bind_blob64(statement, index, base, UInt64(raw.count), parley_sqlite_transient())
            }
        }
        guard code == SQLITE_OK else { throw failure("bind parameter \(index)", code) }
    }

    /// Binds a named parameter. `name` may include its prefix (":id", "@id", "$id") or
    /// omit it ("id").
    public func bind(name: String, _ value: SQLiteValue) throws(ParleyError) {
        let statement = try liveHandle("bind")
        var index = sqlite3_bind_parameter_index(statement, name)
        if index == 0, let first = name.first, !":@$?".contains(first) {
            for prefix in [":", "@", "$"] {
                index = sqlite3_bind_parameter_index(statement, prefix + name)
                if index != 0 { break }
            }
        }
        guard index > 0 else {
            throw ParleyError(.invalidArgument, "bind: no parameter named \(name) in SQL: \(SQLiteErrorText.prefix(of: sql))")
        }
        try bind(index, value)
    }

    /// Binds all parameters at once, 1...N. The count must match the SQL's: a missing value
    /// would otherwise silently become NULL.
    public func bind(_ values: [SQLiteValue]) throws(ParleyError) {
        let statement = try liveHandle("bind")
        let expected = sqlite3_bind_parameter_count(statement)
        guard values.count == Int(expected) else {
            throw ParleyError(
                .invalidArgument,
                "bind: the SQL takes \(expected) parameters but \(values.count) values were given; SQL: \(SQLiteErrorText.prefix(of: sql))")
        }
        if isStarted { reset() }
        for (offset, value) in values.enumerated() {
            try bind(Int32(offset + 1), value)
        }
    }

    /// Sets every parameter back to NULL.
    public func clearBindings() {
        guard let handle else { return }
        sqlite3_clear_bindings(handle)
    }

    // MARK: Execution

    /// Advances to the next row: true when a row is available, false when done. On error
    /// the statement is reset (so it can be reused) and the error thrown.
    @discardableResult
    public func step() throws(ParleyError) -> Bool {
        let statement = try liveHandle("step")
        isStarted = true
        let code = sqlite3_step(statement)
        if code == SQLITE_ROW {
            hasRow = true
            return true
        }
        hasRow = false
        if code == SQLITE_DONE { return false }
        let error = failure("step", code)
        reset()
        throw error
    }

    /// Rewinds to before the first row, keeping bindings. Releases the statement's read
    /// snapshot, so a statement abandoned mid-iteration should be reset.
    public func reset() {
        hasRow = false
        isStarted = false
        guard let handle else { return }
        sqlite3_reset(handle)
    }

    func resetForReuse() {
        reset()
        clearBindings()
    }

    /// Runs a statement that returns no rows of interest (rows are stepped over), using
    /// the current bindings; returns the number of rows changed. Leaves it reset.
    @discardableResult
    public func run() throws(ParleyError) -> Int {
        defer { reset() }
        while try step() {}
        return connection.handle.map { Int(sqlite3_changes64($0)) } ?? 0
    }

    /// Binds `values` (all parameters) and runs; returns the number of rows changed.
    @discardableResult
    public func run(_ values: [SQLiteValue]) throws(ParleyError) -> Int {
        try bind(values)
        return try run()
    }

    /// Calls `body` for each row with the current bindings, then resets. `body` reads the
    /// row through the statement it is given; it must not step or reset it.
    public func rows(_ body: (SQLiteStatement) throws(ParleyError) -> Void) throws(ParleyError) {
        if isStarted { reset() }
        isIterating = true
        defer {
            isIterating = false
            reset()
        }
        while try step() {
            try body(self)
        }
    }

    /// Binds `values` (all parameters) and calls `body` for each row.
    public func rows(_ values: [SQLiteValue], _ body: (SQLiteStatement) throws(ParleyError) -> Void) throws(ParleyError) {
        try bind(values)
        try rows(body)
    }

    // MARK: Columns (0-based)

    public var columnCount: Int32 {
        guard let handle else { return 0 }
        return sqlite3_column_count(handle)
    }

    public func columnName(_ column: Int32) -> String? {
        guard let handle, column >= 0, column < sqlite3_column_count(handle),
              let name = sqlite3_column_name(handle, column) else { return nil }
        return String(cString: name)
    }

    /// The statement handle when `column` of a current row can be read.
    private func readable(_ column: Int32) -> OpaquePointer? {
        guard hasRow, let handle, connection.handle != nil,
              column >= 0, column < sqlite3_column_count(handle) else { return nil }
        return handle
    }

    public func isNull(_ column: Int32) -> Bool {
        guard let statement = readable(column) else { return true }
        return sqlite3_column_type(statement, column) == SQLITE_NULL
    }

    /// The column as an integer (SQLite's conversion rules; NULL is 0).
    public func int64(_ column: Int32) -> Int64 {
        guard let statement = readable(column) else { return 0 }
        return sqlite3_column_int64(statement, column)
    }

    public func int(_ column: Int32) -> Int {
        Int(int64(column))
    }

    public func bool(_ column: Int32) -> Bool {
        int64(column) != 0
    }

    public func double(_ column: Int32) -> Double {
        guard let statement = readable(column) else { return 0 }
        return sqlite3_column_double(statement, column)
    }

    /// The column as text, nil when NULL. Reads exactly `column_bytes` bytes, so embedded
    /// NULs are kept; invalid UTF-8 is repaired with U+FFFD.
    public func string(_ column: Int32) -> String? {
        withTextBytes(column) { bytes in String(decoding: bytes, as: UTF8.self) }
    }

    /// Lends the column's UTF-8 bytes without copying them into a String (for passing
    /// stored JSON text straight through). Nil when NULL. The buffer is valid only inside
    /// `body`.
    public func withTextBytes<Result, Failure: Error>(
        _ column: Int32, _ body: (UnsafeBufferPointer<UInt8>) throws(Failure) -> Result
    ) throws(Failure) -> Result? {
        guard let statement = readable(column), sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        // column_text before column_bytes: the byte count must describe the text form.
        guard let text = sqlite3_column_text(statement, column) else {
            return try body(UnsafeBufferPointer(start: nil, count: 0)) // only on out-of-memory
        }
        let count = Int(sqlite3_column_bytes(statement, column))
        return try body(UnsafeBufferPointer(start: text, count: count))
    }

    /// Lends the column's bytes as a blob without copying them. Nil when NULL; an empty
    /// buffer for an empty blob. The buffer is valid only inside `body`.
    public func withBlobBytes<Result, Failure: Error>(
        _ column: Int32, _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result? {
        guard let statement = readable(column), sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        // column_blob before column_bytes, as for text.
        let bytes = sqlite3_column_blob(statement, column)
        let count = bytes == nil ? 0 : Int(sqlite3_column_bytes(statement, column))
        return try body(UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// The column as bytes, nil when NULL.
    public func blob(_ column: Int32) -> [UInt8]? {
        guard let statement = readable(column), sqlite3_column_type(statement, column) != SQLITE_NULL else { return nil }
        guard let bytes = sqlite3_column_blob(statement, column) else { return [] }
        let count = Int(sqlite3_column_bytes(statement, column))
        return [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// The column with its stored type.
    public func value(_ column: Int32) -> SQLiteValue {
        guard let statement = readable(column) else { return .null }
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement, column))
        case SQLITE_TEXT: return string(column).map { .text($0) } ?? .null
        case SQLITE_BLOB: return blob(column).map { .blob($0) } ?? .null
        default: return .null
        }
    }
}

@available(*, unavailable, message: "SQLite handles belong to one serial executor")
extension SQLiteStatement: Sendable {}
