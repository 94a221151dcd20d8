import Foundation
import Glibc
import Logging
import Synchronization

/// PostgreSQL: a send whose lock, numbers and write reach the database in one round trip
/// (docs/ARCHITECTURE.md, *A send in one round trip*).
///
/// The usual write is two round trips: the lock statement (the channel's lock, the numbers, the
/// records' versions), then the write the handler built from its answers. Here the handler runs
/// first on what the record cache holds, with stand-in numbers (`Sentinels`), and sends
/// nothing: its statements are kept. Then the lock statement, checking that everything the run
/// took from the cache is still so (`parley_lock_expecting`), and the write, with each stand-in
/// replaced in the database by the number taken (`parley_taken`, `parley_spliced`), go out
/// together and commit as one transaction. A check that fails rolls both back and the send
/// runs the usual way on the same connection. Once committed the handler runs again, with the
/// numbers taken and on the same records, over a session that answers from what the database
/// returned (`ReplayingSession`): what it writes must equal what was committed, and what it
/// builds (the events, the records kept, the answer) is the request's.
///
/// The run before the flight stops (and the send runs the usual way) at anything the flight
/// cannot carry: a record not in the cache, a statement before the write (a user loaded, an id
/// taken, a webhook queued), a write of more than one part.
final class OneFlightSend {
    let sentinels: Sentinels
    /// Event numbers of the lock statement (then one message id).
    let eventNumbers: Int
    /// Random first versions, the same in both runs (`RecordTables.firstVersion`).
    let versions = VersionTape()
    private(set) var replaying = false

    /// The channel the send names.
    let channel: String

    init(channel: String, eventNumbers: Int) {
        self.channel = channel
        self.eventNumbers = eventNumbers
        sentinels = Sentinels(count: eventNumbers + 1)
    }

    /// Channels whose flight was refused because another server had written them since this
    /// one cached them, each until when its sends take two round trips: while servers take
    /// turns writing one channel, a flight would fail nearly every time and cost a round trip
    /// and a handler's run more than the usual way.
    private static let contested = Mutex<[String: ContinuousClock.Instant]>([:])
    static let contestedFor = Duration.seconds(2)

    /// The channel's sends skip the flight for now (`contested`).
    static func isContested(_ channel: String) -> Bool {
        contested.withLock { entries in
            guard let until = entries[channel] else { return false }
            if until > .now { return true }
            entries[channel] = nil
            return false
        }
    }

    private func contest() {
        let until = ContinuousClock.now + Self.contestedFor
        Self.contested.withLock { entries in
            if entries.count >= 10_000 {
                let now = ContinuousClock.now
                entries = entries.filter { $0.value > now }
            }
            entries[channel] = until
        }
    }

    /// On unless `PARLEY_SEND_IN_ONE_FLIGHT=0` (docs/SERVER.md), and until a send that
    /// committed could not be built again (`failedAfterCommit`).
    static var enabled: Bool { configured && !turnedOff.load(ordering: .relaxed) }
    private static let configured = ProcessInfo.processInfo.environment["PARLEY_SEND_IN_ONE_FLIGHT"] != "0"
    private static let turnedOff = Atomic<Bool>(false)

    /// A send goes in one round trip only while this server has at most this many writers in
    /// flight, itself included: alone, a send's time is the network's, and one round trip less
    /// is most of it; beside others, the cores are soon what they wait for, and the second run
    /// of the handler costs them more than the round trip saves (docs/BENCHMARKS.md, *One round
    /// trip*).
    static let mostWritersInFlight = 1

    private static let logger = Logger(label: "parley-server")

    /// A send tried in one round trip runs the usual way, for `reason` (logged at debug level).
    static func fellBack(because reason: any Error) {
        ServerMetrics.shared.oneFlightFellBack()
        logger.debug("a send runs in two round trips: \(reason)")
    }

    /// The second run of a committed send failed: what the request built is not what was
    /// committed. Its records are dropped from the cache, the hub reads its events from the
    /// log (its writer ends as failed), and no send goes in one round trip again in this process.
    func failedAfterCommit(_ error: any Error, cache: RecordCache) {
        Self.turnedOff.store(true, ordering: .relaxed)
        Self.logger.error(
            "a send committed in one round trip could not be built again; sends take two round trips from now on: \(error)")
        for url in pinnedChannels { cache.forgetChannel(url) }
        for id in users.keys { cache.forgetUser(id) }
    }

    // MARK: the records both runs use

    private var channels: [String: CachedChannel?] = [:]
    private var users: [String: CachedUser?] = [:]

    /// The cache's copy as the first run found it: the second reads the same, whatever the
    /// cache holds by then.
    func channel(_ url: String, _ cached: () -> CachedChannel?) -> CachedChannel? {
        if let pinned = channels[url] { return pinned }
        let found = cached()
        channels[url] = .some(found)
        return found
    }

    func user(_ id: String, _ cached: () -> CachedUser?) -> CachedUser? {
        if let pinned = users[id] { return pinned }
        let found = cached()
        users[id] = .some(found)
        return found
    }

    var pinnedChannels: [String] { Array(channels.keys) }

    // MARK: the first run

    /// The lock statement's arguments, its session-level locks, and the rows expected of it.
    private(set) var lockBinds: [SQLValue] = []
    private(set) var locks = StreamPositions.Locks()
    private var expected = ""
    /// The write, as the first run made it.
    fileprivate var writes: [SQLWrite]? = nil
    fileprivate var selecting: SQLExpression? = nil

    /// The rows the lock statement (`ChannelStore.lockChannels`) gives the first run: `known`,
    /// what the cache says of the records it reads, and stand-ins for the numbers.
    func lockRows(binds: [SQLValue], locks: StreamPositions.Locks, known: [SQLRow], messageIds: Int) -> [SQLRow] {
        lockBinds = binds
        self.locks = locks
        expected = Self.checkedText(known)
        var rows = known
        for k in 0..<eventNumbers { rows.append(SQLRow(values: [.text("e"), .null, .int(sentinels.number(k)), .null])) }
        if messageIds > 0 { rows.append(SQLRow(values: [.text("m"), .null, .int(sentinels.number(eventNumbers)), .null])) }
        // Read for real with the flight; the first run's is never used.
        rows.append(SQLRow(values: [.text("b"), .text("1"), .int(0), .int(0)]))
        return rows
    }

    /// The rows of kinds c, u, s and r as `parley_lock_expecting` compares them (migration 28):
    /// sorted by their fields (bytewise, the numbers as text), each as `kind|length:name|a|b`,
    /// joined by `;`. The name's length in bytes keeps names holding `|` or `;` from making
    /// two different sets of rows read the same.
    static func checkedText(_ rows: [SQLRow]) -> String {
        func cell(_ value: SQLValue) -> String {
            switch value {
            case .int(let n): "\(n)"
            case .text(let t): t
            case .null, .blob: ""
            }
        }
        let lines = rows.filter { ["c", "u", "s", "r"].contains(cell($0.values[0])) }.map { $0.values.map(cell) }
        return lines.sorted { a, b in
            for i in 0..<4 where a[i] != b[i] {
                return Array(a[i].utf8).lexicographicallyPrecedes(Array(b[i].utf8))
            }
            return false
        }.map { "\($0[0])|\($0[1].utf8.count):\($0[1])|\($0[2])|\($0[3])" }.joined(separator: ";")
    }

    // MARK: the flight

    /// The statement that takes the locks and numbers and checks the rows expected.
    static let lockExpectingSQL = "SELECT kind, name, a, b FROM parley_lock_expecting(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    /// What the database answered: the lock statement's rows, the write's values, the numbers
    /// taken (in the order of the stand-ins).
    private(set) var lockAnswer: [SQLRow] = []
    fileprivate var writeAnswer: [SQLValue] = []
    private(set) var taken: [Int64] = []

    /// Sends the lock statement and the write together. False: a record the first run used had
    /// changed, nothing was kept, and the send runs the usual way on the same session.
    func send(on session: any SQLSession) async throws -> Bool {
        guard let writes else { throw NotInOneFlight("the send made no write") }
        let lock = SQLExpression(sql: Self.lockExpectingSQL, binds: [.text(expected), .text(sentinels.baseText)] + lockBinds)
        let answer: (lockRows: [SQLRow], values: [SQLValue])
        do {
            answer = try await session.writeInOneFlight(lock: lock, locks: locks, writes: writes, selecting: selecting,
                                                        rewritten: sentinels.standInsReplaced)
        } catch let error as StorageError where error.sqlState == Self.changedState {
            contest()
            Self.fellBack(because: error)
            return false
        } catch let error as StorageError where error.sqlState == Self.sentBeforeState {
            Self.fellBack(because: error)
            return false
        } catch let error as StorageError where error.kind != .unavailable && error.kind != .retryable {
            // Rolled back whole: the usual attempt runs it again, and reports what it meets.
            Self.fellBack(because: error)
            return false
        }
        var events: [Int64] = []
        var message: [Int64] = []
        for row in answer.lockRows {
            switch row.text(0) {
            case "e": events.append(row.int(2))
            case "m": message.append(row.int(2))
            default: break
            }
        }
        taken = events.sorted() + message
        guard taken.count == sentinels.count || taken.count == eventNumbers else {
            throw StorageError("the lock statement of a send in one round trip took \(taken.count) numbers")
        }
        lockAnswer = answer.lockRows
        writeAnswer = answer.values
        replaying = true
        versions.rewind()
        return true
    }

    /// `value` of the first run as the second makes it: every stand-in replaced by its number.
    fileprivate func replaced(_ value: SQLValue) -> SQLValue {
        switch value {
        case .int(let n): if let k = sentinels.index(of: n), k < taken.count { return .int(taken[k]) }
        case .text(let t): if sentinels.appears(in: t) { return .text(sentinels.replacing(t, with: taken)) }
        case .null, .blob: break
        }
        return value
    }

    /// The SQLSTATE `parley_lock_expecting` raises when the send's `req_id` names an earlier send.
    static let sentBeforeState = "PLW03"

    /// The SQLSTATE `parley_lock_expecting` raises when a record differs from the expected.
    static let changedState = "PLW02"

    // MARK: SQL (migration 27)

    static let definitions = [
        // The lock statement of a send in one round trip: `parley_lock_channels` (with its own
        // bound), whose rows of kinds c, u, s and r must read exactly `expected` (each as
        // `kind|name|a|b`, sorted, joined by `;`; `definitionsWithLengths` replaces it), else it
        // raises PLW02 (PLW03 when the difference is an earlier send of the `req_id`) and the
        // flight's transaction rolls back. Keeps the numbers taken, event numbers in order then the
        // message id, and `base`, the stand-ins' common digits, for the write that follows in
        // the same transaction.
        """
        CREATE OR REPLACE FUNCTION parley_lock_expecting(expected TEXT, base TEXT, busy_key BIGINT, me TEXT, urls TEXT,
            numbers BIGINT, message_ids BIGINT, user_ids TEXT, session_key TEXT, send_channel TEXT, send_sender TEXT,
            send_req_id TEXT)
        RETURNS TABLE (kind TEXT, name TEXT, a BIGINT, b BIGINT)
        LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
        DECLARE
            found_rows JSON;
            seen TEXT;
        BEGIN
            SELECT coalesce(json_agg(json_build_array(l.kind, l.name, l.a, l.b)), '[]') INTO found_rows
                FROM parley_lock_channels(busy_key, me, urls, numbers, message_ids, user_ids, session_key, send_channel,
                                          send_sender, send_req_id, true) l;
            SELECT coalesce(string_agg(concat_ws('|', r->>0, coalesce(r->>1, ''), coalesce(r->>2, ''), coalesce(r->>3, '')),
                    ';' ORDER BY (r->>0) COLLATE "C", coalesce(r->>1, '') COLLATE "C", coalesce(r->>2, '') COLLATE "C",
                    coalesce(r->>3, '') COLLATE "C"), '') INTO seen
                FROM json_array_elements(found_rows) r WHERE r->>0 IN ('c', 'u', 's', 'r');
            IF EXISTS (SELECT 1 FROM json_array_elements(found_rows) r
                       WHERE r->>0 = 'r' AND (r->>2 IS NOT NULL OR r->>3 IS NOT NULL)) THEN
                RAISE EXCEPTION 'parley: the send''s request id was used before' USING ERRCODE = '\(sentBeforeState)';
            END IF;
            IF seen <> expected THEN
                RAISE EXCEPTION 'parley: a record of the send changed since the server cached it'
                    USING ERRCODE = '\(changedState)';
            END IF;
            PERFORM set_config('parley.taken', (SELECT coalesce(json_agg(x.n ORDER BY x.k, x.n), '[]')::text
                FROM (SELECT CASE WHEN r->>0 = 'e' THEN 0 ELSE 1 END AS k, (r->>2)::bigint AS n
                      FROM json_array_elements(found_rows) r WHERE r->>0 IN ('e', 'm')) x), true);
            PERFORM set_config('parley.base', base, true);
            RETURN QUERY SELECT r->>0, r->>1, (r->>2)::bigint, (r->>3)::bigint FROM json_array_elements(found_rows) r;
        END $$
        """,
        // The number the lock statement took for stand-in `k`.
        """
        CREATE OR REPLACE FUNCTION parley_taken(k INT) RETURNS BIGINT
        LANGUAGE sql STABLE AS $$ SELECT (current_setting('parley.taken')::json->>k)::bigint $$
        """,
        // `t` with each stand-in written out replaced by its number.
        """
        CREATE OR REPLACE FUNCTION parley_spliced(t TEXT) RETURNS TEXT
        LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
        DECLARE
            base TEXT := current_setting('parley.base');
            numbers JSON := current_setting('parley.taken')::json;
            i INT;
        BEGIN
            IF t IS NULL OR position(base IN t) = 0 THEN RETURN t; END IF;
            FOR i IN 0 .. json_array_length(numbers) - 1 LOOP
                t := replace(t, base || lpad((i * 100)::text, 3, '0'), numbers->>i);
            END LOOP;
            RETURN t;
        END $$
        """,
    ]

    /// Migration 28: `parley_lock_expecting` without a detour through JSON (the rows are
    /// checked as they are read, about 0.1 ms of PostgreSQL's CPU less per send), each name
    /// written with its length (`checkedText`). A server of migration 27 sends rows written
    /// without lengths: its flights are refused and its sends run the usual way.
    static let definitionsWithLengths = [
        """
        CREATE OR REPLACE FUNCTION parley_lock_expecting(expected TEXT, base TEXT, busy_key BIGINT, me TEXT, urls TEXT,
            numbers BIGINT, message_ids BIGINT, user_ids TEXT, session_key TEXT, send_channel TEXT, send_sender TEXT,
            send_req_id TEXT)
        RETURNS TABLE (kind TEXT, name TEXT, a BIGINT, b BIGINT)
        LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
        DECLARE
            found RECORD;
            kinds TEXT[] := '{}';
            names TEXT[] := '{}';
            firsts TEXT[] := '{}';
            seconds TEXT[] := '{}';
            event_numbers BIGINT[] := '{}';
            message_numbers BIGINT[] := '{}';
            sent_before BOOLEAN := false;
            seen TEXT;
            ignored TEXT;
        BEGIN
            FOR found IN SELECT l.kind, l.name, l.a, l.b FROM parley_lock_channels(busy_key, me, urls, numbers,
                    message_ids, user_ids, session_key, send_channel, send_sender, send_req_id, true) l LOOP
                IF found.kind IN ('c', 'u', 's', 'r') THEN
                    kinds := kinds || found.kind;
                    names := names || coalesce(found.name, '');
                    firsts := firsts || coalesce(found.a::text, '');
                    seconds := seconds || coalesce(found.b::text, '');
                    IF found.kind = 'r' AND (found.a IS NOT NULL OR found.b IS NOT NULL) THEN
                        sent_before := true;
                    END IF;
                ELSIF found.kind = 'e' THEN
                    event_numbers := event_numbers || found.a;
                ELSIF found.kind = 'm' THEN
                    message_numbers := message_numbers || found.a;
                END IF;
                kind := found.kind; name := found.name; a := found.a; b := found.b;
                RETURN NEXT;
            END LOOP;
            IF sent_before THEN
                RAISE EXCEPTION 'parley: the send''s request id was used before' USING ERRCODE = '\(sentBeforeState)';
            END IF;
            SELECT coalesce(string_agg(concat_ws('|', r.k, octet_length(r.n) || ':' || r.n, r.x, r.y), ';'
                       ORDER BY r.k COLLATE "C", r.n COLLATE "C", r.x COLLATE "C", r.y COLLATE "C"), ''),
                   (SELECT coalesce(array_agg(e.n ORDER BY e.n), '{}') FROM unnest(event_numbers) AS e(n))
                INTO seen, event_numbers
                FROM unnest(kinds, names, firsts, seconds) AS r(k, n, x, y);
            IF seen <> expected THEN
                RAISE EXCEPTION 'parley: a record of the send changed since the server cached it'
                    USING ERRCODE = '\(changedState)';
            END IF;
            ignored := set_config('parley.taken', array_to_json(event_numbers || message_numbers)::text, true);
            ignored := set_config('parley.base', base, true);
        END $$
        """,
    ]
}

/// The first run of a send in one round trip met something the flight cannot carry: the send
/// runs the usual way.
struct NotInOneFlight: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Stand-ins for the numbers a send takes, in the first run of a send in one round trip: 19
/// digits, above every number a sequence hands out, in the order of the numbers they stand for
/// (so that comparisons with stored numbers come out as they will), and unlike any text a
/// client could plan: `base` is random. Stand-in `k` is `base` followed by `k` and two zeros,
/// so a stand-in plus or minus a little is no other stand-in.
struct Sentinels {
    let base: Int64
    let count: Int
    let baseText: String
    /// `baseText`'s bytes (16).
    private let baseBytes: [UInt8]

    init(count: Int) {
        precondition(count <= 10)
        self.count = count
        base = Int64.random(in: 9_000_000_000_000_000_000 ... 9_199_999_999_999_999_999) / 1_000
        baseText = "\(base)"
        baseBytes = Array(baseText.utf8)
    }

    func number(_ k: Int) -> Int64 { base * 1_000 + Int64(k) * 100 }

    func index(of value: Int64) -> Int? {
        let offset = value - base * 1_000
        guard offset >= 0, offset < 1_000, offset % 100 == 0, Int(offset / 100) < count else { return nil }
        return Int(offset / 100)
    }

    /// A value near the stand-ins that is none of them: a number computed from one.
    func isNear(_ value: Int64) -> Bool {
        value >= base * 1_000 - 1_000_000 && value < base * 1_000 + 1_000_000 && index(of: value) == nil
    }

    /// True if `text` holds `baseText` (a byte search: every text a send writes is checked).
    func appears(in text: String) -> Bool {
        var text = text
        return text.withUTF8 { firstBase(in: $0, from: 0) != nil }
    }

    /// Where `baseText` first appears in `bytes` at or after `from`.
    private func firstBase(in bytes: UnsafeBufferPointer<UInt8>, from: Int) -> Int? {
        baseBytes.withUnsafeBufferPointer { firstOffset(of: $0, in: bytes, from: from) }
    }

    /// The stand-in written at `offset` of `bytes` (where `baseText` appears): its index, if
    /// it is a whole one (no digit before or after it).
    private func standIn(in bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> Int? {
        func isDigit(_ i: Int) -> Bool { i >= 0 && i < bytes.count && bytes[i] >= 0x30 && bytes[i] <= 0x39 }
        let end = offset + baseBytes.count
        guard !isDigit(offset - 1), end + 3 <= bytes.count, isDigit(end), Int(bytes[end] - 0x30) < count,
              bytes[end + 1] == 0x30, bytes[end + 2] == 0x30, !isDigit(end + 3) else { return nil }
        return Int(bytes[end] - 0x30)
    }

    /// `text` with each stand-in replaced by `numbers[k]`.
    func replacing(_ text: String, with numbers: [Int64]) -> String {
        var text = text
        return text.withUTF8 { bytes -> String in
            guard var found = firstBase(in: bytes, from: 0) else { return String(decoding: bytes, as: UTF8.self) }
            var output: [UInt8] = []
            output.reserveCapacity(bytes.count)
            var copied = 0
            while true {
                if let k = standIn(in: bytes, at: found), k < numbers.count {
                    output += bytes[copied..<found]
                    output += "\(numbers[k])".utf8
                    copied = found + baseBytes.count + 3
                }
                guard let next = firstBase(in: bytes, from: found + baseBytes.count) else { break }
                found = next
            }
            output += bytes[copied...]
            return String(decoding: output, as: UTF8.self)
        }
    }

    /// True if every place `baseText` appears in `text` is a whole stand-in.
    func standsAlone(in text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            var from = 0
            while let found = firstBase(in: bytes, from: from) {
                guard standIn(in: bytes, at: found) != nil else { return false }
                from = found + baseBytes.count + 3
            }
            return true
        }
    }

    /// A write statement as it goes out in the flight: a value that is a stand-in becomes
    /// `parley_taken(k)`, a text holding stand-ins goes through `parley_spliced`. Throws
    /// `NotInOneFlight` where a stand-in would reach the database any other way.
    func standInsReplaced(_ sql: String, _ binds: [SQLValue]) throws -> (String, [SQLValue]) {
        guard !appears(in: sql) else { throw NotInOneFlight("a stand-in number in a statement's text") }
        var replacements: [String?] = []
        var kept: [SQLValue] = []
        var changed = false
        for bind in binds {
            switch bind {
            case .int(let n):
                if let k = index(of: n) {
                    replacements.append("parley_taken(\(k))")
                    changed = true
                    continue
                }
                if isNear(n) { throw NotInOneFlight("a number computed from a stand-in") }
                replacements.append(nil)
            case .text(let t):
                if appears(in: t) {
                    guard standsAlone(in: t) else { throw NotInOneFlight("a stand-in inside a longer number") }
                    replacements.append("parley_spliced(?)")
                    changed = true
                } else {
                    replacements.append(nil)
                }
            case .blob(let bytes):
                if appears(in: String(decoding: bytes, as: UTF8.self)) {
                    throw NotInOneFlight("a stand-in in bytes")
                }
                replacements.append(nil)
            case .null:
                replacements.append(nil)
            }
            kept.append(bind)
        }
        guard changed else { return (sql, binds) }
        return (SQLScanner.replacingPlaceholders(in: sql, with: replacements), kept)
    }
}

/// Random values a request draws for what it writes, drawn again the same in the second run of
/// a send in one round trip (`RecordTables.firstVersion`).
final class VersionTape: @unchecked Sendable {
    @TaskLocal static var current: VersionTape? = nil
    private var values: [Int64] = []
    private var position = 0

    func next(_ draw: () -> Int64) -> Int64 {
        if position == values.count { values.append(draw()) }
        position += 1
        return values[position - 1]
    }

    func rewind() { position = 0 }
}

/// The session of the first run: statements are kept, none is sent. Any statement but the
/// write (held writes, then the last `writeTogether`) stops the run (`NotInOneFlight`).
final class CapturingSession: SQLSession {
    let dialect: SQLDialect
    private let flight: OneFlightSend
    private var held: [SQLWrite] = []

    init(_ flight: OneFlightSend, dialect: SQLDialect) {
        self.flight = flight
        self.dialect = dialect
    }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] { throw NotInOneFlight("a statement: \(sql.prefix(80))") }
    func execute(_ sql: String, _ binds: [SQLValue]) async throws -> Int { throw NotInOneFlight("a statement: \(sql.prefix(80))") }
    func executeScript(_ sql: String) async throws { throw NotInOneFlight("a script") }
    func executeHeld(_ write: SQLWrite) async throws { held.append(write) }

    func writeTogether(_ writes: [SQLWrite], selecting: SQLExpression?, last: Bool) async throws -> [SQLValue] {
        guard last, flight.writes == nil else { throw NotInOneFlight("a write in several statements") }
        let all = held + writes
        flight.writes = all
        flight.selecting = selecting
        held = []
        // Stand-in versions: the first run's outcome is never kept.
        return all.filter(\.returnsOne).map { _ in .int(1) } + (selecting == nil ? [] : [.null])
    }
}

/// The session of the second run, after the commit: it answers the lock statement and the
/// write from what the database returned, once each, and only if they are the statements that
/// went out (the first run's, with the numbers taken). Anything else is an error: what the
/// request built would not be what was committed.
final class ReplayingSession: SQLSession {
    let dialect: SQLDialect
    private let flight: OneFlightSend
    private var held: [SQLWrite] = []
    private var answeredLock = false
    private var answeredWrite = false

    init(_ flight: OneFlightSend, dialect: SQLDialect) {
        self.flight = flight
        self.dialect = dialect
    }

    /// Both statements were asked for.
    func checkDone() throws {
        guard answeredLock, answeredWrite, held.isEmpty else {
            throw StorageError("the second run of a send in one round trip left out a statement that was committed")
        }
    }

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        guard sql == ChannelStore.lockChannelsSQL, !answeredLock, binds == flight.lockBinds else {
            throw StorageError("the second run of a send in one round trip made a statement the first did not: \(sql.prefix(120))")
        }
        answeredLock = true
        return flight.lockAnswer
    }

    func execute(_ sql: String, _ binds: [SQLValue]) async throws -> Int {
        throw StorageError("the second run of a send in one round trip made a statement the first did not: \(sql.prefix(120))")
    }

    func executeScript(_ sql: String) async throws { throw StorageError("a script in the second run of a send in one round trip") }
    func executeHeld(_ write: SQLWrite) async throws { held.append(write) }

    func writeTogether(_ writes: [SQLWrite], selecting: SQLExpression?, last: Bool) async throws -> [SQLValue] {
        let mine = held + writes
        held = []
        guard last, !answeredWrite, let committed = flight.writes, committed.count == mine.count else {
            throw StorageError("the second run of a send in one round trip wrote other statements than were committed")
        }
        for (first, second) in zip(committed, mine) {
            guard first.sql == second.sql, first.table == second.table, first.returnsOne == second.returnsOne,
                  first.rowWidth == second.rowWidth, Self.sameValues(first.binds.map(flight.replaced), second.binds, rowWidth: first.rowWidth) else {
                throw StorageError("the second run of a send in one round trip wrote otherwise than was committed: \(second.sql.prefix(120))")
            }
        }
        guard flight.selecting?.sql == selecting?.sql, (flight.selecting?.binds ?? []).map(flight.replaced) == selecting?.binds ?? [] else {
            throw StorageError("the second run of a send in one round trip selected otherwise than was committed")
        }
        answeredWrite = true
        return flight.writeAnswer
    }

    /// Equal values; with `rowWidth`, equal rows in any order (each run builds them from a
    /// dictionary of its own, whose order is its own).
    private static func sameValues(_ a: [SQLValue], _ b: [SQLValue], rowWidth: Int?) -> Bool {
        guard let width = rowWidth, width > 0, a.count == b.count, a.count % width == 0 else { return a == b }
        if a == b { return true }
        var counts: [ArraySlice<SQLValue>: Int] = [:]
        for start in stride(from: 0, to: a.count, by: width) { counts[a[start..<(start + width)], default: 0] += 1 }
        for start in stride(from: 0, to: b.count, by: width) {
            let row = b[start..<(start + width)]
            guard let count = counts[row], count > 0 else { return false }
            counts[row] = count - 1
        }
        return true
    }
}
