import Glibc
import Testing
@testable import ParleyCore

/// A directory under /tmp made with mkdtemp, removed (with its files) when the test ends.
private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    var template = Array("/tmp/parley-sqlite-test-XXXXXX".utf8CString)
    let made: String? = template.withUnsafeMutableBufferPointer { buffer in
        guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
        return String(cString: base)
    }
    guard let path = made else { throw ParleyError(.io, "mkdtemp failed: errno \(errno)") }
    defer { removeFlatDirectory(path) }
    try body(path)
}

/// The test directories hold only files, so one level of unlink + rmdir is enough.
private func removeFlatDirectory(_ path: String) {
    if let directory = opendir(path) {
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { unlink(path + "/" + name) }
        }
        closedir(directory)
    }
    rmdir(path)
}

private func readFile(_ path: String) -> [UInt8]? {
    let descriptor = open(path, O_RDONLY)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var result: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count <= 0 { break }
        result.append(contentsOf: buffer[0..<count])
    }
    return result
}

private func writeFile(_ path: String, _ bytes: [UInt8], at offset: Int? = nil) {
    let flags = offset == nil ? (O_WRONLY | O_CREAT | O_TRUNC) : O_WRONLY
    let descriptor = open(path, flags, mode_t(0o644))
    guard descriptor >= 0 else { Issue.record("cannot open \(path) for writing"); return }
    defer { close(descriptor) }
    let written = bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t(offset ?? 0)) }
    #expect(written == bytes.count)
}

private func fileMode(_ path: String) -> mode_t? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    return info.st_mode & 0o777
}

private func fileExists(_ path: String) -> Bool {
    var info = stat()
    return stat(path, &info) == 0
}

/// The header's user_version (offset 60, big-endian), read without SQLite.
private func headerUserVersion(_ bytes: [UInt8]) -> Int32? {
    guard bytes.count >= 64 else { return nil }
    return Int32(bitPattern: bytes[60..<64].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
}

/// Deterministic junk that cannot be mistaken for an SQLite header or b-tree page.
private func junk(count: Int, seed: UInt32) -> [UInt8] {
    var state = seed | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 17
        state ^= state << 5
        return UInt8(truncatingIfNeeded: state)
    }
}

private let migrationOne = SQLiteMigration(
    version: 1,
    sql: "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL);")
private let migrationTwo = SQLiteMigration(
    version: 2,
    sql: """
        ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX notes_by_pinned ON notes (pinned, id);
        """)
private let schema = [migrationOne, migrationTwo]

private func count(_ database: SQLiteDatabase, _ sql: String) throws -> Int64 {
    let statement = try database.statement(sql)
    #expect(try statement.step())
    return statement.int64(0)
}

/// A closed database file at version 2 holding `rows` notes with ~200-byte bodies.
private func makeDatabase(at path: String, rows: Int) throws {
    let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
    try database.transaction { () throws(ParleyError) in
        let insert = try database.statement("INSERT INTO notes (body) VALUES (?)")
        for index in 0..<rows {
            try insert.run([.text("note \(index) " + String(repeating: "x", count: 200))])
        }
    }
    database.close()
    // On the last close SQLite checkpoints and empties the WAL: everything is in the file.
    #expect((readFile(path + "-wal") ?? []).isEmpty)
}

@Suite struct SQLiteTests {
    // MARK: Opening and configuration

    @Test func freshFileIsConfiguredAndMigrated() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(database.recovery == nil)
            #expect(database.userVersion == 2)
            #expect(database.journalMode == "wal")
            #expect(try count(database, "PRAGMA foreign_keys") == 1)
            #expect(try count(database, "PRAGMA synchronous") == 1) // NORMAL
            #expect(try count(database, "SELECT count(*) FROM sqlite_schema WHERE name = 'notes_by_pinned'") == 1)
            try database.statement("INSERT INTO notes (body, pinned) VALUES (?, ?)").run(["hello", true])
            #expect(database.changes == 1)
            #expect(database.lastInsertRowID == 1)
            database.close()

            // Reopening applies nothing and keeps the row.
            let reopened = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(reopened.recovery == nil)
            #expect(reopened.userVersion == 2)
            #expect(try count(reopened, "SELECT count(*) FROM notes WHERE pinned = 1") == 1)
        }
    }

    @Test func aNewFileIsACopyOfTheFreshSchemaAndAnEmptyOneGetsTheSameSchema() throws {
        try withTemporaryDirectory { directory in
            func schemaRows(_ database: SQLiteDatabase) throws -> [String] {
                var rows: [String] = []
                try database.statement("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name").rows { row in
                    rows.append([row.string(0), row.string(1), row.string(2), row.string(3)].map { $0 ?? "NULL" }.joined(separator: " | "))
                }
                return rows
            }
            let copiedPath = directory + "/copied.db"
            let copied = try SQLiteDatabase(location: .file(path: copiedPath), migrations: schema)
            defer { copied.close() }
            // Copied, not built: no transaction wrote the schema into the WAL.
            #expect((readFile(copiedPath + "-wal") ?? []).isEmpty)
            // An empty file already there is built by the statements, to the same schema.
            writeFile(directory + "/built.db", [])
            let built = try SQLiteDatabase(location: .file(path: directory + "/built.db"), migrations: schema)
            defer { built.close() }
            #expect((readFile(directory + "/built.db-wal") ?? []).count > 0)
            #expect(try schemaRows(copied) == schemaRows(built))
            #expect(copied.userVersion == 2 && copied.journalMode == "wal")
            let check = try copied.statement("PRAGMA integrity_check")
            #expect(try check.step())
            #expect(check.string(0) == "ok")
            try copied.statement("INSERT INTO notes (body, pinned) VALUES (?, ?)").run(["works", true])
            #expect(try count(copied, "SELECT count(*) FROM notes WHERE pinned = 1") == 1)
        }
    }

    @Test func aClosedFileKeepsAnEmptyWALAndItsSharedMemoryFileForTheNextOpen() throws {
        try withTemporaryDirectory { directory in
            func inode(_ path: String) -> ino_t? {
                var info = stat()
                return stat(path, &info) == 0 ? info.st_ino : nil
            }
            let path = directory + "/cache.db"
            let first = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            try first.statement("INSERT INTO notes (body) VALUES (?)").run(["kept"])
            #expect((readFile(path + "-wal") ?? []).count > 0)
            first.close()
            // Checkpointed into the file and emptied, not removed.
            #expect(readFile(path + "-wal") == [])
            let (wal, shm) = (inode(path + "-wal"), inode(path + "-shm"))
            #expect(wal != nil && shm != nil)
            let second = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            try second.statement("INSERT INTO notes (body) VALUES (?)").run(["again"])
            #expect(try count(second, "SELECT count(*) FROM notes") == 2)
            // The same files: opening and writing created none.
            #expect(inode(path + "-wal") == wal && inode(path + "-shm") == shm)
            second.close()
            let reader = try SQLiteDatabase(readingExisting: path)
            #expect(try count(reader, "SELECT count(*) FROM notes") == 2)
            reader.close()
        }
    }

    @Test func aFileAsTheLastCleanCloseLeftItIsNotWalkedAgainUntilAByteChangesOrADayPasses() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let marker = path + SQLiteDatabase.closedMarkerSuffix
            let first = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(first.walkedAtOpen)
            try first.statement("INSERT INTO notes (body) VALUES (?)").run(["kept"])
            first.close()
            #expect(readFile(marker) != nil)

            // As the close left it: not walked, and what it holds reads back.
            let second = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(!second.walkedAtOpen && second.recovery == nil)
            #expect(try count(second, "SELECT count(*) FROM notes") == 1)
            try second.statement("INSERT INTO notes (body) VALUES (?)").run(["again"])
            second.close()
            let third = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(!third.walkedAtOpen)
            third.close()

            // One byte changed after the close, anywhere (here the header's unused "reserved for
            // expansion" bytes, which SQLite ignores): walked again, and healthy.
            var bytes = readFile(path) ?? []
            bytes[80] ^= 1
            writeFile(path, bytes)
            let fourth = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(fourth.walkedAtOpen && fourth.recovery == nil)
            fourth.close()
            let fifth = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(!fifth.walkedAtOpen)
            fifth.close()

            // The walk the marker names is more than a day old: walked again.
            let text = String(decoding: readFile(marker) ?? [], as: UTF8.self)
            let stale = SQLiteFiles.unixMilliseconds() - Int64(SQLiteDatabase.fullCheckIntervalSeconds + 60) * 1000
            let aged = text.split(separator: " ").map { $0.hasPrefix("walked=") ? "walked=\(stale)\n" : String($0) }
            writeFile(marker, Array(aged.joined(separator: " ").utf8))
            let sixth = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(sixth.walkedAtOpen)
            sixth.close()

            // A WAL left with bytes in it (a connection that did not close): walked.
            let seventh = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(!seventh.walkedAtOpen)
            seventh.close()
            writeFile(path + "-wal", [UInt8](repeating: 7, count: 64))
            let eighth = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(eighth.walkedAtOpen)
            #expect(try count(eighth, "SELECT count(*) FROM notes") == 2)
            eighth.close()
        }
    }

    @Test func aFileDamagedAfterItsCleanCloseIsWalkedAndMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let first = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            for index in 0..<200 {
                try first.statement("INSERT INTO notes (body) VALUES (?)").run([.text("note \(index) " + String(repeating: "x", count: 100))])
            }
            first.close()
            // The notes table's b-tree pages past the first become garbage.
            var bytes = readFile(path) ?? []
            let pageSize = 4096
            #expect(bytes.count >= 4 * pageSize)
            for offset in (bytes.count - 2 * pageSize)..<bytes.count { bytes[offset] = 0xDE }
            writeFile(path, bytes)
            let second = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(second.walkedAtOpen)
            guard case .movedAside? = second.recovery else {
                Issue.record("the damaged file was not moved aside: \(String(describing: second.recovery))")
                return
            }
            // The fresh file starts without the old file's note.
            #expect(readFile(path + SQLiteDatabase.closedMarkerSuffix) == nil)
            second.close()
        }
    }

    @Test func aFileIsCreatedHoldingBytesOnlyWhenItDoesNotExist() throws {
        try withTemporaryDirectory { directory in
            let taken = directory + "/taken.db"
            writeFile(taken, [1, 2, 3])
            #expect(!SQLiteFiles.createHolding([9, 9], at: taken))
            #expect(readFile(taken) == [1, 2, 3])
            let made = directory + "/made.db"
            let previous = umask(0)
            defer { umask(previous) }
            #expect(SQLiteFiles.createHolding([4, 5], at: made))
            #expect(readFile(made) == [4, 5])
            #expect(fileMode(made) == 0o600)
            var names: [String] = []
            if let handle = opendir(directory) {
                while let entry = readdir(handle) {
                    names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
                }
                closedir(handle)
            }
            // The name it was written under is gone.
            #expect(names.sorted() == [".", "..", "made.db", "taken.db"])
        }
    }

    @Test func filesAreMode0600EvenWithUmaskZero() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let previous = umask(0)
            defer { umask(previous) }
            let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            try database.statement("INSERT INTO notes (body) VALUES (?)").run(["kept open so -wal/-shm exist"])
            #expect(fileMode(path) == 0o600)
            #expect(fileExists(path + "-wal"))
            #expect(fileMode(path + "-wal") == 0o600)
            #expect(fileMode(path + "-shm") == 0o600)
            database.close()

            // An existing file with a looser mode is tightened.
            let loose = directory + "/loose.db"
            writeFile(loose, [])
            chmod(loose, 0o644)
            #expect(fileMode(loose) == 0o644)
            _ = try SQLiteDatabase(location: .file(path: loose), migrations: schema)
            #expect(fileMode(loose) == 0o600)
        }
    }

    @Test func inMemoryDatabaseWorks() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        #expect(database.userVersion == 2)
        #expect(database.recovery == nil)
        try database.statement("INSERT INTO notes (body) VALUES (?)").run(["in memory"])
        let select = try database.statement("SELECT body FROM notes")
        #expect(try select.step())
        #expect(select.string(0) == "in memory")
        // A second in-memory database is a different database.
        let other = try SQLiteDatabase(location: .memory, migrations: schema)
        #expect(try count(other, "SELECT count(*) FROM notes") == 0)
    }

    @Test func unopenablePathsAreErrors() throws {
        try withTemporaryDirectory { directory in
            let isDirectory = #expect(throws: ParleyError.self) {
                _ = try SQLiteDatabase(location: .file(path: directory), migrations: schema)
            }
            #expect(isDirectory?.code == .cache)
            #expect(isDirectory?.message.contains(directory) == true)
            let missingParent = #expect(throws: ParleyError.self) {
                _ = try SQLiteDatabase(location: .file(path: directory + "/missing/cache.db"), migrations: schema)
            }
            #expect(missingParent?.code == .cache)
            let empty = #expect(throws: ParleyError.self) {
                _ = try SQLiteDatabase(location: .file(path: ""), migrations: schema)
            }
            #expect(empty?.code == .invalidArgument)
            // The directory itself was not moved aside or touched.
            #expect(fileExists(directory))
        }
    }

    // MARK: Recovery

    /// Opens `path`, expects it moved aside as corrupt with its bytes intact at the
    /// reported path, and a fresh, usable database in its place.
    private func expectCorruptRecovery(path: String, originalBytes: [UInt8]) throws {
        let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
        guard case .movedAside(.corrupt(let detail), let movedTo) = database.recovery else {
            Issue.record("expected a corrupt recovery, got \(String(describing: database.recovery))")
            return
        }
        #expect(!detail.isEmpty)
        #expect(movedTo.hasPrefix(path + ".corrupt-"))
        let movedBytesKept = readFile(movedTo) == originalBytes
        #expect(movedBytesKept)
        #expect(database.userVersion == 2)
        #expect(fileMode(path) == 0o600)
        try database.statement("INSERT INTO notes (body) VALUES (?)").run(["fresh"])
        #expect(try count(database, "SELECT count(*) FROM notes") == 1)
        #expect(database.recovery?.description.contains(movedTo) == true)
    }

    @Test func garbageFileIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let garbage = junk(count: 10_000, seed: 7)
            writeFile(path, garbage)
            try expectCorruptRecovery(path: path, originalBytes: garbage)
        }
    }

    @Test func shortGarbageFileIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let garbage = Array("not a database".utf8)
            writeFile(path, garbage)
            try expectCorruptRecovery(path: path, originalBytes: garbage)
        }
    }

    @Test func garbageHeaderIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            try makeDatabase(at: path, rows: 50)
            writeFile(path, junk(count: 100, seed: 3), at: 0)
            let damaged = try #require(readFile(path))
            try expectCorruptRecovery(path: path, originalBytes: damaged)
        }
    }

    @Test func truncatedDatabaseIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            try makeDatabase(at: path, rows: 500)
            let whole = try #require(readFile(path))
            #expect(whole.count > 20 * 4096)
            #expect(truncate(path, off_t(whole.count / 2)) == 0)
            try expectCorruptRecovery(path: path, originalBytes: Array(whole[0..<whole.count / 2]))
        }
    }

    @Test func overwrittenPagesAreMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            try makeDatabase(at: path, rows: 500)
            let whole = try #require(readFile(path))
            // Keep page 1 (header and schema) valid; wreck pages 3-6 of the table.
            writeFile(path, junk(count: 4 * 4096, seed: 11), at: 2 * 4096)
            let damaged = try #require(readFile(path))
            #expect(damaged.count == whole.count)
            let firstPageKept = damaged[0..<4096] == whole[0..<4096]
            #expect(firstPageKept)
            try expectCorruptRecovery(path: path, originalBytes: damaged)
        }
    }

    @Test func walAndShmTravelWithTheMovedFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let walBytes = junk(count: 5000, seed: 5)
            writeFile(path, junk(count: 8192, seed: 9))
            writeFile(path + "-wal", walBytes)
            writeFile(path + "-journal", [1, 2, 3]) // not a valid hot journal: SQLite drops it
            let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            let movedTo = try #require(database.recovery?.movedTo)
            let walKept = readFile(movedTo + "-wal") == walBytes
            #expect(walKept)
            #expect(!fileExists(path + "-journal"))
            // The fresh database's WAL is its own, not the old one.
            let walReplaced = readFile(path + "-wal") != walBytes
            #expect(walReplaced)
            #expect(try count(database, "SELECT count(*) FROM notes") == 0)
        }
    }

    @Test func newerVersionIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            try makeDatabase(at: path, rows: 3)
            let newer = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            try newer.execute("PRAGMA user_version = 99")
            newer.close()
            let before = try #require(readFile(path))
            #expect(headerUserVersion(before) == 99)

            let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(database.recovery == .movedAside(
                reason: .newerVersion(found: 99, newest: 2), movedTo: database.recovery?.movedTo ?? ""))
            let movedTo = try #require(database.recovery?.movedTo)
            #expect(movedTo.hasPrefix(path + ".newer-"))
            let movedBytesKept = readFile(movedTo) == before
            #expect(movedBytesKept)
            #expect(database.userVersion == 2)
            #expect(try count(database, "SELECT count(*) FROM notes") == 0)
        }
    }

    @Test func foreignDatabaseIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let foreign = try SQLiteDatabase(location: .file(path: path), migrations: [])
            try foreign.execute("CREATE TABLE notes (something_else BLOB)")
            foreign.close()
            let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            guard case .movedAside(.corrupt(let detail), _) = database.recovery else {
                Issue.record("expected the foreign file to be moved aside")
                return
            }
            #expect(detail.contains("user_version is 0"))
            #expect(database.userVersion == 2)
        }
    }

    @Test func corruptionFirstSeenByAMigrationIsMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let indexed = SQLiteMigration(version: 1, sql: """
                CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL, tag TEXT);
                CREATE INDEX notes_by_body ON notes (body);
                """)
            let old = try SQLiteDatabase(location: .file(path: path), migrations: [indexed])
            for index in 0..<100 {
                try old.statement("INSERT INTO notes (body, tag) VALUES (?, ?)").run([.text("b\(index)"), .text("t\(index % 7)")])
            }
            // Make the index describe another column: every page stays well-formed (so
            // quick_check passes) but the index no longer matches its table.
            try old.execute("""
                PRAGMA writable_schema = ON;
                UPDATE sqlite_schema SET sql = 'CREATE INDEX notes_by_body ON notes (tag)' WHERE name = 'notes_by_body';
                """)
            old.close()

            let deleting = SQLiteMigration(version: 2, sql: "DELETE FROM notes WHERE id < 50")
            let database = try SQLiteDatabase(location: .file(path: path), migrations: [indexed, deleting])
            guard case .movedAside(.corrupt(let detail), let movedTo) = database.recovery else {
                Issue.record("expected a corrupt recovery, got \(String(describing: database.recovery))")
                return
            }
            #expect(detail.contains("migration to version 2"))
            #expect(detail.contains("(code 11"))
            #expect(fileExists(movedTo))
            #expect(headerUserVersion(readFile(movedTo) ?? []) == 1)
            #expect(database.userVersion == 2)
            #expect(try count(database, "SELECT count(*) FROM notes") == 0)
        }
    }

    @Test func lockedFileIsAnErrorAndIsNotMovedAside() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let holder = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            // Exclusive locking mode keeps even readers out once the holder has written.
            _ = try count(holder, "PRAGMA locking_mode = EXCLUSIVE")
            try holder.statement("INSERT INTO notes (body) VALUES (?)").run(["held"])
            let busy = #expect(throws: ParleyError.self) {
                _ = try SQLiteDatabase(location: .file(path: path), migrations: schema, busyTimeoutMilliseconds: 50)
            }
            #expect(busy?.code == .cache)
            #expect(busy?.message.contains("(code 5") == true)
            var names: [String] = []
            if let handle = opendir(directory) {
                while let entry = readdir(handle) {
                    names.append(withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) })
                }
                closedir(handle)
            }
            #expect(!names.contains { $0.contains(".corrupt-") || $0.contains(".newer-") })
            #expect(try count(holder, "SELECT count(*) FROM notes") == 1)
        }
    }

    @Test func olderVersionIsMigratedKeepingData() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let old = try SQLiteDatabase(location: .file(path: path), migrations: [migrationOne])
            #expect(old.userVersion == 1)
            try old.statement("INSERT INTO notes (body) VALUES (?)").run(["from version 1"])
            old.close()

            let database = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(database.recovery == nil)
            #expect(database.userVersion == 2)
            let select = try database.statement("SELECT body, pinned FROM notes")
            #expect(try select.step())
            #expect(select.string(0) == "from version 1")
            #expect(select.int64(1) == 0)
            #expect(try !select.step())
        }
    }

    @Test func failingMigrationRollsBackToThePreviousVersion() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let broken = SQLiteMigration(
                version: 2,
                sql: "CREATE TABLE half_done (x); INSERT INTO no_such_table VALUES (1);")
            let error = #expect(throws: ParleyError.self) {
                _ = try SQLiteDatabase(location: .file(path: path), migrations: [migrationOne, broken])
            }
            #expect(error?.code == .cache)
            #expect(error?.message.contains("migration to version 2") == true)
            #expect(error?.message.contains("no_such_table") == true)

            let database = try SQLiteDatabase(location: .file(path: path), migrations: [migrationOne])
            #expect(database.recovery == nil)
            #expect(database.userVersion == 1)
            #expect(try count(database, "SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'") == 0)
            database.close()

            let fixed = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            #expect(fixed.userVersion == 2)
        }
    }

    @Test func closureMigrationsRunInTheirTransaction() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let seed = SQLiteMigration(version: 2) { database throws(ParleyError) in
                try database.statement("INSERT INTO notes (body) VALUES (?)").run(["seeded"])
            }
            let failing = SQLiteMigration(version: 3) { database throws(ParleyError) in
                try database.statement("INSERT INTO notes (body) VALUES (?)").run(["must vanish"])
                throw ParleyError(.internalError, "data rewrite failed")
            }
            let error = #expect(throws: ParleyError.self) {
                _ = try SQLiteDatabase(location: .file(path: path), migrations: [migrationOne, seed, failing])
            }
            #expect(error?.code == .internalError)
            #expect(error?.message.contains("data rewrite failed") == true)

            let database = try SQLiteDatabase(location: .file(path: path), migrations: [migrationOne, seed])
            #expect(database.userVersion == 2)
            #expect(try count(database, "SELECT count(*) FROM notes WHERE body = 'seeded'") == 1)
            #expect(try count(database, "SELECT count(*) FROM notes WHERE body = 'must vanish'") == 0)
        }
    }

    @Test func migrationsMustBeNumberedInOrder() {
        let skipped = #expect(throws: ParleyError.self) {
            _ = try SQLiteDatabase(location: .memory, migrations: [migrationOne, SQLiteMigration(version: 3, sql: "")])
        }
        #expect(skipped?.code == .invalidArgument)
        let unordered = #expect(throws: ParleyError.self) {
            _ = try SQLiteDatabase(location: .memory, migrations: [migrationTwo, migrationOne])
        }
        #expect(unordered?.code == .invalidArgument)
    }

    // MARK: Transactions

    @Test func transactionCommitsOrRollsBack() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let identifier = try database.transaction { () throws(ParleyError) -> Int64 in
            try database.statement("INSERT INTO notes (body) VALUES (?)").run(["committed"])
            return database.lastInsertRowID
        }
        #expect(identifier == 1)
        #expect(!database.isInTransaction)

        let error = #expect(throws: ParleyError.self) {
            try database.transaction { () throws(ParleyError) in
                try database.statement("INSERT INTO notes (body) VALUES (?)").run(["rolled back"])
                #expect(database.isInTransaction)
                throw ParleyError(.cancelled, "stop")
            }
        }
        #expect(error?.code == .cancelled)
        #expect(!database.isInTransaction)
        #expect(try count(database, "SELECT count(*) FROM notes") == 1)
    }

    @Test func nestedTransactionsUseSavepoints() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let insert = "INSERT INTO notes (body) VALUES (?)"
        try database.transaction { () throws(ParleyError) in
            try database.statement(insert).run(["outer"])
            let inner = #expect(throws: ParleyError.self) {
                try database.transaction { () throws(ParleyError) in
                    try database.statement(insert).run(["inner, undone"])
                    try database.transaction { () throws(ParleyError) in
                        try database.statement(insert).run(["innermost, undone with its parent"])
                    }
                    throw ParleyError(.cancelled, "undo inner")
                }
            }
            #expect(inner?.code == .cancelled)
            #expect(database.isInTransaction)
            try database.transaction { () throws(ParleyError) in
                try database.statement(insert).run(["second inner, kept"])
            }
        }
        var bodies: [String] = []
        try database.statement("SELECT body FROM notes ORDER BY id").rows { row throws(ParleyError) in
            bodies.append(row.string(0) ?? "?")
        }
        #expect(bodies == ["outer", "second inner, kept"])

        // An inner failure that escapes the outer body rolls everything back.
        _ = #expect(throws: ParleyError.self) {
            try database.transaction { () throws(ParleyError) in
                try database.statement(insert).run(["gone"])
                try database.transaction { () throws(ParleyError) in
                    try database.execute("INSERT INTO no_such_table VALUES (1)")
                }
            }
        }
        #expect(try count(database, "SELECT count(*) FROM notes") == 2)
    }

    // MARK: Statements

    @Test func statementCacheReturnsResetStatements() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        for index in 1...5 {
            try database.statement("INSERT INTO notes (body) VALUES (?)").run([.text("note \(index)")])
        }
        let sql = "SELECT id FROM notes WHERE id >= ? ORDER BY id"
        let first = try database.statement(sql)
        try first.bind([2])
        #expect(try first.step())
        #expect(first.int64(0) == 2)
        #expect(try first.step())
        #expect(first.int64(0) == 3)
        // Abandoned mid-iteration; asking again gives the same, reset, unbound statement.
        let again = try database.statement(sql)
        #expect(again === first)
        #expect(try !again.step()) // the cleared parameter is NULL: id >= NULL matches nothing
        try again.bind(1, 4)
        var ids: [Int64] = []
        while try again.step() { ids.append(again.int64(0)) }
        #expect(ids == [4, 5])
        // Rebinding after the run restarts it.
        try again.bind(1, 5)
        #expect(try again.step())
        #expect(again.int64(0) == 5)
        // A write is not blocked by the abandoned read above once the statement is reused.
        _ = try database.statement(sql)
        try database.transaction { () throws(ParleyError) in
            try database.statement("DELETE FROM notes WHERE id = ?").run([1])
        }
        #expect(database.changes == 1)
    }

    @Test func sameQueryInsideItsOwnRowsLoopGetsASeparateStatement() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        for index in 1...3 {
            try database.statement("INSERT INTO notes (body) VALUES (?)").run([.text("n\(index)")])
        }
        let sql = "SELECT id FROM notes WHERE id > ? ORDER BY id"
        var pairs: [[Int64]] = []
        try database.statement(sql).rows([0]) { outer throws(ParleyError) in
            let outerID = outer.int64(0)
            try database.statement(sql).rows([.integer(outerID)]) { inner throws(ParleyError) in
                pairs.append([outerID, inner.int64(0)])
            }
        }
        #expect(pairs == [[1, 2], [1, 3], [2, 3]])
    }

    @Test func manyStatementsStayUsable() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let held = try database.statement("SELECT count(*) FROM notes")
        for index in 0..<600 {
            let statement = try database.statement("SELECT \(index) + ?")
            try statement.bind([1])
            #expect(try statement.step())
            #expect(statement.int64(0) == Int64(index + 1))
        }
        #expect(database.cachedStatementCount <= SQLiteDatabase.statementCacheLimit)
        // A statement dropped from the cache while held keeps working.
        #expect(try held.step())
        #expect(held.int64(0) == 0)
    }

    @Test func valuesRoundTrip() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: [
            SQLiteMigration(version: 1, sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v)"),
        ])
        let withNUL = "a\u{0}b\u{0}"
        let values: [SQLiteValue] = [
            .null, .integer(Int64.min), .integer(Int64.max), .real(-0.25), .text(""), .text(withNUL),
            .text("ünïcödé 💬 {\"k\":[1,2]}"), .blob([]), .blob([0, 255, 0, 7]), .integer(1), 3.5e300,
        ]
        let insert = try database.statement("INSERT INTO t (id, v) VALUES (?, ?)")
        for (index, value) in values.enumerated() {
            try insert.run([.integer(Int64(index)), value])
        }
        var readBack: [SQLiteValue] = []
        try database.statement("SELECT v FROM t ORDER BY id").rows { row throws(ParleyError) in
            readBack.append(row.value(0))
        }
        #expect(readBack == values)
        #expect(SQLiteValue(true) == .integer(1))

        let select = try database.statement("SELECT v, typeof(v), length(CAST(v AS BLOB)) FROM t WHERE id = ?")
        try select.bind([5])
        #expect(try select.step())
        #expect(select.string(0) == withNUL)
        #expect(select.string(0)?.utf8.count == 4)
        #expect(select.int64(2) == 4)
        #expect(select.withTextBytes(0) { Array($0) } == [97, 0, 98, 0])
        try select.bind([4])
        #expect(try select.step())
        #expect(select.string(0) == "")
        #expect(!select.isNull(0))
        #expect(select.string(1) == "text")
        try select.bind([7])
        #expect(try select.step())
        #expect(select.blob(0) == [])
        #expect(select.string(1) == "blob")
        try select.bind([0])
        #expect(try select.step())
        #expect(select.isNull(0))
        #expect(select.string(0) == nil)
        #expect(select.blob(0) == nil)
        // Out-of-range columns and reads without a row give defaults, not traps.
        #expect(select.int64(42) == 0)
        #expect(select.isNull(-1))
        #expect(try !select.step())
        #expect(select.string(0) == nil)
        #expect(select.columnName(1) == "typeof(v)")
        #expect(select.columnCount == 3)
    }

    @Test func namedParametersBind() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let insert = try database.statement("INSERT INTO notes (body, pinned) VALUES (:body, @pinned)")
        try insert.bind(name: "body", "named")
        try insert.bind(name: "@pinned", 1)
        try insert.run()
        #expect(try count(database, "SELECT count(*) FROM notes WHERE body = 'named' AND pinned = 1") == 1)
        let missing = #expect(throws: ParleyError.self) { try insert.bind(name: "nope", 1) }
        #expect(missing?.code == .invalidArgument)
    }

    @Test func bindCountMustMatch() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let insert = try database.statement("INSERT INTO notes (body, pinned) VALUES (?, ?)")
        let tooFew = #expect(throws: ParleyError.self) { try insert.run(["only one"]) }
        #expect(tooFew?.code == .invalidArgument)
        #expect(tooFew?.message.contains("2 parameters") == true)
        let outOfRange = #expect(throws: ParleyError.self) { try insert.bind(3, 1) }
        #expect(outOfRange?.code == .cache)
        #expect(outOfRange?.message.contains("(code 25") == true) // SQLITE_RANGE
        #expect(try count(database, "SELECT count(*) FROM notes") == 0)
    }

    @Test func errorsNameTheOperationCodeAndSQL() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let prepare = #expect(throws: ParleyError.self) {
            _ = try database.statement("SELEKT body FROM notes WHERE " + String(repeating: "x", count: 200))
        }
        #expect(prepare?.code == .cache)
        #expect(prepare?.message.hasPrefix("prepare: ") == true)
        #expect(prepare?.message.contains("(code 1)") == true)
        #expect(prepare?.message.contains("SELEKT body FROM notes") == true)
        #expect(prepare?.message.hasSuffix("...") == true)
        #expect((prepare?.message.count ?? 0) < 200)

        let execute = #expect(throws: ParleyError.self) { try database.execute("DROP TABLE no_such_table") }
        #expect(execute?.message.contains("no such table: no_such_table") == true)

        try database.statement("INSERT INTO notes (id, body) VALUES (?, ?)").run([1, "a"])
        let constraint = #expect(throws: ParleyError.self) {
            try database.statement("INSERT INTO notes (id, body) VALUES (?, ?)").run([1, "b"])
        }
        #expect(constraint?.message.contains("(code 19, extended 1555)") == true) // PRIMARYKEY
        // The statement that failed is usable again.
        try database.statement("INSERT INTO notes (id, body) VALUES (?, ?)").run([2, "c"])

        let two = #expect(throws: ParleyError.self) { _ = try database.statement("SELECT 1; SELECT 2") }
        #expect(two?.code == .invalidArgument)
        _ = try database.statement("SELECT 1; -- a trailing comment is fine")
        let none = #expect(throws: ParleyError.self) { _ = try database.statement("  -- nothing  ") }
        #expect(none?.code == .invalidArgument)
    }

    @Test func rowsBodyErrorPropagatesAndResets() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        try database.statement("INSERT INTO notes (body) VALUES (?), (?)").run(["a", "b"])
        let select = try database.statement("SELECT body FROM notes ORDER BY id")
        var seen: [String] = []
        _ = #expect(throws: ParleyError.self) {
            try select.rows { row throws(ParleyError) in
                seen.append(row.string(0) ?? "")
                throw ParleyError(.cancelled, "stop after one")
            }
        }
        #expect(seen == ["a"])
        #expect(try select.step())
        #expect(select.string(0) == "a")
    }

    // MARK: Failure conditions

    @Test func diskFullIsAnErrorAndTheDatabaseStaysUsable() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let pages = try count(database, "PRAGMA page_count")
        _ = try count(database, "PRAGMA max_page_count = \(pages + 3)")
        let big = String(repeating: "y", count: 100_000)
        let full = #expect(throws: ParleyError.self) {
            try database.transaction { () throws(ParleyError) in
                try database.statement("INSERT INTO notes (body) VALUES (?)").run([.text(big)])
            }
        }
        #expect(full?.code == .cache)
        #expect(full?.message.contains("(code 13") == true) // SQLITE_FULL
        #expect(database.lastFailureCode == 13)
        #expect(!database.lastFailureIsCorruption)
        #expect(!database.isInTransaction)
        try database.statement("INSERT INTO notes (body) VALUES (?)").run(["small"])
        #expect(try count(database, "SELECT count(*) FROM notes") == 1)
    }

    @Test func busyIsReportedAfterTheTimeout() throws {
        try withTemporaryDirectory { directory in
            let path = directory + "/cache.db"
            let holder = try SQLiteDatabase(location: .file(path: path), migrations: schema)
            let other = try SQLiteDatabase(location: .file(path: path), migrations: schema, busyTimeoutMilliseconds: 50)
            try holder.execute("BEGIN IMMEDIATE")
            var started = timespec()
            clock_gettime(CLOCK_MONOTONIC, &started)
            let busy = #expect(throws: ParleyError.self) {
                try other.transaction { () throws(ParleyError) in
                    try other.statement("INSERT INTO notes (body) VALUES (?)").run(["blocked"])
                }
            }
            var ended = timespec()
            clock_gettime(CLOCK_MONOTONIC, &ended)
            let elapsedMilliseconds = (ended.tv_sec - started.tv_sec) * 1000 + (ended.tv_nsec - started.tv_nsec) / 1_000_000
            #expect(busy?.message.contains("(code 5") == true) // SQLITE_BUSY
            #expect(elapsedMilliseconds >= 40)
            // Readers are not blocked by the writer in WAL mode.
            #expect(try count(other, "SELECT count(*) FROM notes") == 0)
            try holder.execute("COMMIT")
            try other.statement("INSERT INTO notes (body) VALUES (?)").run(["now fine"])
            #expect(try count(holder, "SELECT count(*) FROM notes") == 1)
        }
    }

    @Test func closeIsIdempotentAndLaterUseIsAnError() throws {
        let database = try SQLiteDatabase(location: .memory, migrations: schema)
        let cached = try database.statement("SELECT count(*) FROM notes")
        let uncached = try database.prepare("SELECT 1")
        database.close()
        database.close()
        #expect(database.isClosed)
        #expect(database.userVersion == 0)
        let step = #expect(throws: ParleyError.self) { try cached.step() }
        #expect(step?.code == .invalidState)
        #expect(throws: ParleyError.self) { try uncached.step() }
        #expect(throws: ParleyError.self) { try database.execute("SELECT 1") }
        #expect(throws: ParleyError.self) { _ = try database.statement("SELECT 1") }
        #expect(throws: ParleyError.self) { try database.transaction { () throws(ParleyError) in } }
    }
}
