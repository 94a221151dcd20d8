import CParleyCipher
import Glibc

// The outbox journal: a small append-only file beside a file cache, `<cache file>.outbox`,
// that holds every unsent message a second time, so that a cache file destroyed as a whole
// (header overwritten, truncated) still gives its unsent messages back.
//
// Format: JSON lines, one record each.
//   {"op":"add","req_id":..,"channel_url":..,"created_at":..,"kind":..,"message":{..},"request":{..}}
//       a message accepted for sending (its pending local message and outbox request)
//   {"op":"done","req_id":..}
//       its outbox row went (sent, canceled, removed)
// The live set is every `add` without a later `done`. A last line without its newline is a
// write torn by a crash and ignored; any other line that does not parse makes the journal
// unreadable (the live set is then unknown).
// Beside an encrypted cache each line is sealed with the cache's key (CacheSealing): "S"
// then the base64 of nonce, ciphertext and tag (XChaCha20-Poly1305); a plain line found
// there makes the journal rewritten sealed at open.
//
// Guarantee and window: records are appended with one plain write(2) on an O_APPEND
// descriptor after the SQLite commit that made the change (a change rolled back is never
// journaled). No fsync: like the cache itself (WAL, synchronous=NORMAL) the journal survives
// the process being killed, not necessarily a power loss. A crash between the commit and the
// append loses the journal's copy of that one change only; it matters only if the cache file
// is destroyed as well before the next open, since every open rewrites the journal from the
// cache when the two disagree. A `done` lost that way restores a sent message, which the
// server dedups by its req_id.
//
// Compaction: when nothing is live the file is truncated to 0; at open, and when it grows
// past `compactionBytes` with more than `compactionRatio` times as many records as live
// messages, it is rewritten with the live adds only (temporary file, fsync, rename).
final class OutboxJournal {
    /// One live message, as an `add` record holds it.
    struct Record: Sendable, Hashable {
        var reqID: String
        var channelURL: String
        var createdAt: Int64
        var kind: String
        /// The local message's JSON object text.
        var messageJSON: String
        /// The outbox request's JSON object text.
        var requestJSON: String
    }

    enum Operation {
        case add(Record)
        case done(reqID: String)
    }

    /// What reading a journal found.
    struct Contents {
        /// Live records in the order they were added.
        var live: [Record] = []
        var recordCount = 0
        var byteCount = 0
        /// Lines written in the clear (none may stay beside an encrypted cache).
        var plainLineCount = 0
        /// Why the live set is not known (missing file, a bad line, a read error); nil when
        /// the journal was read to its end.
        var failure: String?
    }

    static let compactionBytes = 256 << 10
    static let compactionRatio = 4

    let path: String
    /// The cache file whose registered key seals the lines; nil: plain lines.
    let sealedBy: String?
    /// The file is there and complete: appends go to it. Each append opens it, so that a
    /// client holds no descriptor for a file written once per send.
    private var isOpen = false
    /// The live req_ids (what the file says once the pending appends are written).
    private(set) var live: Set<String> = []
    private var recordCount = 0
    private var byteCount = 0

    static func path(forCache cachePath: String) -> String { cachePath + ".outbox" }

    /// Opens `path` for appending, rewriting it first with exactly `records` (what the cache
    /// holds), unless its contents `current` already say the same in a compact file.
    init(path: String, records: [Record], current: Contents, sealedBy: String? = nil) throws(ParleyError) {
        self.path = path
        self.sealedBy = sealedBy
        let sameSet = current.failure == nil && current.live.map(\.reqID) == records.map(\.reqID)
            && (sealedBy == nil || current.plainLineCount == 0)
        let compact = current.recordCount <= max(1, records.count) * Self.compactionRatio && current.byteCount <= Self.compactionBytes
        if sameSet && compact {
            try openForAppending()
            live = Set(records.map(\.reqID))
            recordCount = current.recordCount
            byteCount = current.byteCount
            if live.isEmpty && byteCount > 0 { truncate() }
        } else {
            try rewrite(records)
        }
    }

    deinit { close() }

    func close() {
        isOpen = false
    }

    /// Whether the file has grown enough that `rewrite` should run.
    var needsCompaction: Bool {
        byteCount > Self.compactionBytes && recordCount > max(1, live.count) * Self.compactionRatio
    }

    /// Appends `operations` in one write. A `done` for a req_id that is not live is skipped.
    /// When nothing is live afterwards the file is emptied. On a write failure the file is
    /// removed (a journal that may miss a record must not claim to know the unsent set) and
    /// the error thrown: the caller rewrites it from the cache later.
    func append(_ operations: [Operation]) throws(ParleyError) {
        var bytes: [UInt8] = []
        var count = 0
        for operation in operations {
            switch operation {
            case .add(let record):
                try appendLine(Self.addLine(record), to: &bytes)
                live.insert(record.reqID)
            case .done(let reqID):
                guard live.remove(reqID) != nil else { continue }
                var line = Array("{\"op\":\"done\",\"req_id\":".utf8)
                line.append(contentsOf: JSONValue.string(reqID).canonicalText.utf8)
                line.append(contentsOf: "}".utf8)
                try appendLine(line, to: &bytes)
            }
            count += 1
        }
        if live.isEmpty && isOpen {
            // Nothing to recover: an empty file says so as well as any history.
            truncate()
            return
        }
        guard !bytes.isEmpty else { return }
        guard isOpen, appendToFile(bytes) else {
            let reason = isOpen ? SQLiteFiles.errnoText() : "not open"
            close()
            unlink(path)
            throw ParleyError(.cache, "outbox journal \(path): write failed: \(reason)")
        }
        recordCount += count
        byteCount += bytes.count
    }

    /// Replaces the file with exactly `records` (temporary file, fsync, rename) and reopens it.
    func rewrite(_ records: [Record]) throws(ParleyError) {
        close()
        live = Set(records.map(\.reqID))
        recordCount = records.count
        byteCount = 0
        var bytes: [UInt8] = []
        for record in records { try appendLine(Self.addLine(record), to: &bytes) }
        byteCount = bytes.count
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(0o600))
        guard fd >= 0 else { throw ParleyError(.cache, "outbox journal \(temporary): open: \(SQLiteFiles.errnoText())") }
        _ = fchmod(fd, 0o600)
        let written = SQLiteFiles.writeAll(fd, bytes) && fsync(fd) == 0
        let reason = SQLiteFiles.errnoText()
        _ = Glibc.close(fd)
        guard written, rename(temporary, path) == 0 else {
            let why = written ? SQLiteFiles.errnoText() : reason
            unlink(temporary)
            unlink(path)
            throw ParleyError(.cache, "outbox journal \(path): rewrite failed: \(why)")
        }
        try openForAppending()
    }

    /// Creates the file if needed (mode 0600) and checks that it can be written.
    private func openForAppending() throws(ParleyError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, mode_t(0o600))
        guard fd >= 0 else { throw ParleyError(.cache, "outbox journal \(path): open: \(SQLiteFiles.errnoText())") }
        _ = fchmod(fd, 0o600)
        _ = Glibc.close(fd)
        isOpen = true
    }

    private func appendToFile(_ bytes: [UInt8]) -> Bool {
        let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { return false }
        let written = SQLiteFiles.writeAll(fd, bytes)
        let reason = errno
        _ = Glibc.close(fd)
        errno = reason
        return written
    }

    private func truncate() {
        guard byteCount > 0 || recordCount > 0 else { return }
        if Glibc.truncate(path, 0) == 0 {
            recordCount = 0
            byteCount = 0
        }
    }

    /// Appends `line` (a record without its newline) to `bytes`, sealed when the cache is.
    private func appendLine(_ line: [UInt8], to bytes: inout [UInt8]) throws(ParleyError) {
        guard let sealedBy else {
            bytes.append(contentsOf: line)
            bytes.append(UInt8(ascii: "\n"))
            return
        }
        var text = [CChar](repeating: 0, count: parley_cipher_sealed_text_size(line.count))
        guard parley_cipher_seal_text(sealedBy, line, line.count, &text) == 0 else {
            throw ParleyError(.cacheKey, "outbox journal \(path): the cache's key is not registered")
        }
        bytes.append(UInt8(ascii: "S"))
        bytes.append(contentsOf: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) })
        bytes.append(UInt8(ascii: "\n"))
    }

    private static func addLine(_ record: Record) -> [UInt8] {
        // Built as text: the message and request are stored JSON object texts already.
        var bytes = Array("{\"op\":\"add\",\"req_id\":".utf8)
        bytes.append(contentsOf: JSONValue.string(record.reqID).canonicalText.utf8)
        bytes.append(contentsOf: ",\"channel_url\":".utf8)
        bytes.append(contentsOf: JSONValue.string(record.channelURL).canonicalText.utf8)
        bytes.append(contentsOf: ",\"created_at\":\(record.createdAt),\"kind\":".utf8)
        bytes.append(contentsOf: JSONValue.string(record.kind).canonicalText.utf8)
        bytes.append(contentsOf: ",\"message\":".utf8)
        bytes.append(contentsOf: record.messageJSON.utf8)
        bytes.append(contentsOf: ",\"request\":".utf8)
        bytes.append(contentsOf: record.requestJSON.utf8)
        bytes.append(contentsOf: "}".utf8)
        return bytes
    }

    // MARK: Reading

    /// Reads the journal at `path` (its lines sealed by the key of the cache file `sealedBy`,
    /// or plain): its live records, or why they are not known.
    static func read(path: String, sealedBy: String? = nil) -> Contents {
        var contents = Contents()
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            contents.failure = errno == ENOENT ? "no outbox journal" : "outbox journal: \(SQLiteFiles.errnoText())"
            return contents
        }
        defer { _ = Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                contents.failure = "outbox journal: read: \(SQLiteFiles.errnoText())"
                return contents
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return parse(bytes, sealedBy: sealedBy)
    }

    static func parse(_ bytes: [UInt8], sealedBy: String? = nil) -> Contents {
        var contents = Contents()
        contents.byteCount = bytes.count
        var order: [String] = []
        var records: [String: Record] = [:]
        var start = 0
        var lineNumber = 0
        while start < bytes.count {
            lineNumber += 1
            guard let end = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) else {
                // The last write was torn by a crash: that change was never journaled whole.
                break
            }
            var line = Array(bytes[start..<end])
            start = end + 1
            if line.first == UInt8(ascii: "S") {
                guard let sealedBy, let opened = openLine(line.dropFirst(), sealedBy: sealedBy) else {
                    contents.failure = "outbox journal: line \(lineNumber) does not open (damaged, or sealed with another key)"
                    return contents
                }
                line = opened
            } else {
                contents.plainLineCount += 1
            }
            guard let operation = operation(line) else {
                contents.failure = "outbox journal: line \(lineNumber) is not a record"
                return contents
            }
            contents.recordCount += 1
            switch operation {
            case .add(let record):
                if records.updateValue(record, forKey: record.reqID) == nil { order.append(record.reqID) }
            case .done(let reqID):
                records[reqID] = nil
            }
        }
        contents.live = order.compactMap { records[$0] }
        return contents
    }

    private static func openLine(_ text: ArraySlice<UInt8>, sealedBy: String) -> [UInt8]? {
        var plain = [UInt8](repeating: 0, count: text.count)
        var length = 0
        let opened = text.withUnsafeBufferPointer { characters in
            characters.withMemoryRebound(to: CChar.self) { parley_cipher_open_text(sealedBy, $0.baseAddress, $0.count, &plain, &length) }
        }
        return opened == 0 ? Array(plain.prefix(length)) : nil
    }

    private static func operation(_ line: [UInt8]) -> Operation? {
        guard case .object(let fields)? = try? JSONValue.parse(line), let op = fields["op"]?.stringValue,
            let reqID = fields["req_id"]?.stringValue, !reqID.isEmpty
        else { return nil }
        switch op {
        case "done":
            return .done(reqID: reqID)
        case "add":
            guard let channelURL = fields["channel_url"]?.stringValue, !channelURL.isEmpty,
                let createdAt = fields["created_at"]?.int64Value, let kind = fields["kind"]?.stringValue,
                let message = fields["message"], case .object = message,
                let request = fields["request"], case .object = request
            else { return nil }
            return .add(Record(
                reqID: reqID, channelURL: channelURL, createdAt: createdAt, kind: kind,
                messageJSON: message.canonicalText, requestJSON: request.canonicalText))
        default:
            return nil
        }
    }
}
