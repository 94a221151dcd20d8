import CParleySystem
import CSQLite
import Glibc

/// The raw connection, shared by the database and its statements so that a statement
/// can tell that its database was closed (it then refuses to run instead of touching a
/// dead handle). Same threading rule as `SQLiteDatabase`.
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?
    /// Extended result code of the most recent failed call made through this connection.
    var lastFailureCode: Int32 = SQLITE_OK

    init(handle: OpaquePointer) {
        self.handle = handle
    }

    /// Records `code` as the latest failure and builds its error.
    func failure(_ operation: String, code: Int32, sql: String? = nil) -> ParleyError {
        lastFailureCode = code
        return SQLiteErrorText.error(operation, handle: handle, code: code, sql: sql)
    }

    /// `sqlite3_close_v2`: if a statement held outside the cache is still alive, the
    /// connection lingers as a zombie until that statement is finalized by its deinit.
    func close() {
        guard let handle else { return }
        sqlite3_close_v2(handle)
        self.handle = nil
    }
}

/// Error texts of the form "<operation>: <sqlite message> (code N[, extended M])[ in SQL: ...]".
enum SQLiteErrorText {
    static let sqlPrefixLength = 80

    static func make(_ operation: String, message: String, code: Int32, sql: String? = nil) -> String {
        let primary = code & 0xff
        var text = "\(operation): \(message) (code \(primary)"
        if code != primary { text += ", extended \(code)" }
        text += ")"
        if let sql { text += " in SQL: \(prefix(of: sql))" }
        return text
    }

    /// A ParleyError for `code`, with the connection's current error message.
    static func error(_ operation: String, handle: OpaquePointer?, code: Int32, sql: String? = nil) -> ParleyError {
        ParleyError(.cache, make(operation, message: message(handle: handle, code: code), code: code, sql: sql))
    }

    /// The file itself is damaged (as opposed to busy, full, I/O or misuse errors).
    static func isCorruption(_ code: Int32) -> Bool {
        let primary = code & 0xff
        return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB
    }

    static func message(handle: OpaquePointer?, code: Int32) -> String {
        if let handle, let text = sqlite3_errmsg(handle) { return String(cString: text) }
        if let text = sqlite3_errstr(code) { return String(cString: text) }
        return "unknown error"
    }

    /// The SQL's first characters on one line, so that an error names its statement.
    static func prefix(of sql: String) -> String {
        var result = ""
        var count = 0
        var lastWasSpace = true
        for character in sql {
            let isSpace = character.isWhitespace
            if isSpace && lastWasSpace { continue }
            if count == sqlPrefixLength { return result + "..." }
            result.append(isSpace ? " " : character)
            lastWasSpace = isSpace
            count += 1
        }
        return lastWasSpace && !result.isEmpty ? String(result.dropLast()) : result
    }
}

/// File-system steps around the database file: creation with mode 0600 and moving a bad
/// file (with its companions) aside.
enum SQLiteFiles {
    /// Companion files SQLite keeps next to the database. A stale `-wal` or `-journal`
    /// left beside a *fresh* database would be replayed into it, so they always travel
    /// with the main file.
    static let companionSuffixes = ["-wal", "-shm", "-journal"]

    /// Creates the file with mode 0600 if it is missing and forces 0600 on it (and on
    /// existing `-wal`/`-shm`) whatever the umask or an older mode was. SQLite gives the
    /// `-wal`/`-shm` it creates later the main file's mode.
    static func prepare(path: String) throws(ParleyError) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode_t(0o600))
        guard descriptor >= 0 else {
            throw ParleyError(.cache, "open database file \(path): \(errnoText())")
        }
        // Failure to chmod is tolerated: it only happens for a file owned by someone
        // else that we may nevertheless write, and refusing to open it would help nobody.
        _ = fchmod(descriptor, 0o600)
        _ = Glibc.close(descriptor)
        for suffix in ["-wal", "-shm"] where exists(path + suffix) {
            _ = chmod(path + suffix, 0o600)
        }
    }

    /// Creates `path` holding `bytes` (mode 0600) if it does not exist, all at once: written
    /// under another name, then linked to `path`, so another opener sees no file or the
    /// whole one. False when `path` existed or the file could not be made (the caller then
    /// creates the database as usual).
    static func createHolding(_ bytes: [UInt8], at path: String) -> Bool {
        let temporary = path + ".creating-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(0o600))
        guard descriptor >= 0 else { return false }
        defer { unlink(temporary) }
        _ = fchmod(descriptor, 0o600)
        let complete = writeAll(descriptor, bytes)
        guard Glibc.close(descriptor) == 0, complete else { return false }
        return link(temporary, path) == 0
    }

    /// Writes all of `bytes` at the descriptor's offset (again after a signal); false on an error.
    static func writeAll(_ descriptor: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    /// The first KiB of a small file, nil when it does not exist.
    static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = read(descriptor, &buffer, buffer.count)
        return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
    }

    /// Whether the file exists and was written less than `seconds` ago.
    static func modifiedWithin(_ path: String, seconds: Int) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        let age = Int(time(nil)) - Int(info.st_mtim.tv_sec)
        return age >= 0 && age < seconds
    }

    /// Puts the calling thread at the lowest CPU priority (nice 19) for the rest of its life.
    static func lowerThisThreadsPriority() {
        _ = parley_thread_lower_priority(19)
    }

    /// Writes a small file (best effort: the caller reports the failure it describes anyway),
    /// `synced` to the disk before it returns.
    static func writeSmallFile(_ path: String, _ text: String, synced: Bool = true) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        _ = writeAll(descriptor, Array(text.utf8.prefix(1024)))
        if synced { fsync(descriptor) }
    }

    /// Renames `path` to "<path>.<label>-<unix ms>" (plus "-N" if taken) and its companions
    /// to "<that>-wal" etc., so the moved file still opens with its WAL. Returns the new path.
    static func moveAside(path: String, label: String) throws(ParleyError) -> String {
        let base = "\(path).\(label)-\(unixMilliseconds())"
        var target = base
        var attempt = 1
        while exists(target) || companionSuffixes.contains(where: { exists(target + $0) }) {
            target = "\(base)-\(attempt)"
            attempt += 1
        }
        guard rename(path, target) == 0 else {
            throw ParleyError(.cache, "move aside \(path) to \(target): \(errnoText())")
        }
        for suffix in companionSuffixes where exists(path + suffix) {
            if rename(path + suffix, target + suffix) != 0 && unlink(path + suffix) != 0 {
                throw ParleyError(.cache, "move aside \(path + suffix): \(errnoText())")
            }
        }
        return target
    }

    /// fsync of a file by its path.
    static func syncFile(_ path: String) throws(ParleyError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ParleyError(.cache, "open \(path) to sync it: \(errnoText())") }
        defer { _ = close(descriptor) }
        guard fsync(descriptor) == 0 else { throw ParleyError(.cache, "fsync \(path): \(errnoText())") }
    }

    /// fsync of the directory holding `path`, so that a rename in it is durable (best effort).
    static func syncDirectory(of path: String) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let descriptor = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        _ = close(descriptor)
    }

    /// Whether the file exists and is not empty.
    static func hasContent(_ path: String) -> Bool {
        (size(path) ?? 0) > 0
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    /// The size of the file, nil when it does not exist.
    static func size(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    /// The file's length and a 64-bit value over every byte of it: any changed byte changes
    /// it. Four `StoredTextCheck` mixers take the words of each 32 bytes in turn (four chains
    /// of multiplies run side by side, about four times as fast as one), a fifth mixes their
    /// values and the last bytes. Nil when the file cannot be read whole, or its length
    /// changed while it was read.
    static func fingerprint(_ path: String) -> FilePrint? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        let stamp = FilePrint.Stamp(info)
        let length = Int(info.st_size)
        var lanes = (StoredTextCheck.Mixer(length: length), StoredTextCheck.Mixer(length: length + 1),
                     StoredTextCheck.Mixer(length: length + 2), StoredTextCheck.Mixer(length: length + 3))
        let chunk = 1 << 18
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 32)
        defer { buffer.deallocate() }
        var offset = 0
        var rest = UnsafeRawBufferPointer(start: nil, count: 0)
        while offset < length || length == 0 {
            let wanted = min(chunk, length - offset)
            var filled = 0
            while filled < wanted {
                let count = pread(descriptor, buffer + filled, wanted - filled, off_t(offset + filled))
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return nil }
                filled += count
            }
            offset += wanted
            let blocks = wanted / 32
            for block in 0..<blocks {
                let base = buffer + block * 32
                lanes.0.add(word: base.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
                lanes.1.add(word: base.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                lanes.2.add(word: base.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
                lanes.3.add(word: base.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            }
            if offset == length {
                rest = UnsafeRawBufferPointer(start: buffer + blocks * 32, count: wanted - blocks * 32)
                break
            }
        }
        var total = StoredTextCheck.Mixer(length: length)
        for lane in [lanes.0, lanes.1, lanes.2, lanes.3] { total.add(word: lane.finalized) }
        let words = rest.count / 8
        if let base = rest.baseAddress { total.add(words: base, count: words) }
        return FilePrint(length: Int64(length), value: total.finished(tail: UnsafeRawBufferPointer(rebasing: rest[(words * 8)...])),
                         stamp: stamp)
    }

    /// What `fingerprint` read, and the file's stamp before it read it.
    struct FilePrint: Equatable {
        var length: Int64
        var value: UInt64
        var stamp: Stamp

        /// Size, inode, and the times of the last change of contents and of the inode.
        struct Stamp: Equatable {
            var size: Int64, inode: UInt64, modified: Int64, changed: Int64

            init(_ info: stat) {
                size = Int64(info.st_size)
                inode = UInt64(info.st_ino)
                modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
                changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
            }

            /// The file's stamp now, nil when it does not exist.
            init?(path: String) {
                var info = stat()
                guard stat(path, &info) == 0 else { return nil }
                self.init(info)
            }
        }
    }

    static func unixMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    static func errnoText() -> String {
        let code = errno
        if let text = strerror(code) { return "\(String(cString: text)) (errno \(code))" }
        return "errno \(code)"
    }
}
