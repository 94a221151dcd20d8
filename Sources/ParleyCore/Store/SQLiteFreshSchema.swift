/// The schema a list of migrations leaves, as the statements that create it: a new database
/// gets them in one transaction instead of every migration in turn. The migrations' steps
/// (columns added one `ALTER TABLE` at a time, each making SQLite parse the whole schema
/// again; an index dropped and made anew; a transaction each) were most of what creating a
/// cache cost, and a process that starts thousands of clients creates thousands.
///
/// The statements are read, once per process and list, from an in-memory database that ran
/// the migrations one by one: the `sql` of every object of `sqlite_schema` in the order of
/// creation, without SQLite's own objects and the tables a virtual table makes for itself
/// (`PRAGMA table_list` calls them "shadow"), which its `CREATE VIRTUAL TABLE` makes again.
/// So the new database's schema is the replayed one, text for text (ChatCacheTests checks
/// it). Nil, and the migrations run, when a migration is code, or the capture fails (an
/// SQLite older than 3.37 has no `table_list`).
///
/// A new plain file skips even those statements: it starts as a copy of a database that ran
/// them (`fileImage`), so creating a cache costs a file write, not parsing and running the
/// schema in a transaction whose commit creates the WAL and syncs it.
enum FreshSchema {
    private static let captured = Locked<[String: [String]]>([:])

    static func statements(for migrations: [SQLiteMigration]) -> [String]? {
        guard !migrations.isEmpty, migrations.allSatisfy({ $0.apply == nil }) else { return nil }
        let key = key(migrations)
        if let known = captured.withLock({ $0[key] }) { return known }
        guard let statements = try? capture(migrations) else { return nil }
        captured.withLock { $0[key] = statements }
        return statements
    }

    private static func capture(_ migrations: [SQLiteMigration]) throws(ParleyError) -> [String] {
        let database = try SQLiteDatabase(location: .memory, migrations: migrations, replayingMigrations: true)
        defer { database.close() }
        var shadowTables: Set<String> = []
        try database.statement("SELECT name, type FROM pragma_table_list WHERE schema = 'main'").rows { row in
            if row.string(1) == "shadow", let name = row.string(0) { shadowTables.insert(name) }
        }
        var statements: [String] = []
        try database.statement("SELECT name, sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY rowid").rows { row in
            guard let name = row.string(0), let sql = row.string(1), !name.hasPrefix("sqlite_"), !shadowTables.contains(name) else {
                return
            }
            statements.append(sql)
        }
        return statements
    }

    private static let images = Locked<[String: [UInt8]]>([:])

    /// The bytes of a database file that holds the fresh schema at the migrations' version,
    /// marked for WAL (header bytes 18 and 19 set to 2, as `PRAGMA journal_mode=WAL` sets
    /// them): a new cache file is a copy of it (`SQLiteFiles.createHolding`). Made once per
    /// process and list, in memory, from `statements`.
    static func fileImage(for migrations: [SQLiteMigration]) -> [UInt8]? {
        let key = key(migrations)
        if let known = images.withLock({ $0[key] }) { return known }
        guard statements(for: migrations) != nil else { return nil }
        guard let database = try? SQLiteDatabase(location: .memory, migrations: migrations) else { return nil }
        defer { database.close() }
        guard var image = database.serializedImage(), image.count >= 100, database.userVersion == migrations.last?.version else {
            return nil
        }
        image[18] = 2
        image[19] = 2
        images.withLock { $0[key] = image }
        return image
    }

    private static func key(_ migrations: [SQLiteMigration]) -> String {
        migrations.map { "\($0.version)\u{1}\($0.sql)" }.joined(separator: "\u{1}")
    }
}
