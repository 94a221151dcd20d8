import CSQLite
import Glibc

// Full-text search over the cached server messages: the FTS5 index of schema version 8
// (ChatCache+Schema.swift), queried with the filters and orders of a search view
// (Collections/MessageSearch.swift). Pending and failed messages are not searched.

/// The order of search results.
public enum MessageSearchOrder: String, Sendable, CaseIterable {
    /// Newest first, by `message_id`: the server numbers messages in the order it accepts
    /// them and never gives a later one an earlier `created_at` (docs/PROTOCOL.md §4.4), so
    /// this is the time order. The index walks it directly: a page costs the same whether a
    /// word is rare or in every message.
    case time
    /// Most relevant first (`SearchRank`), ties newest first, within a
    /// `RelevanceWindow`: the newest matches, so that a page costs in proportion to the
    /// window, not to every match of a common word.
    case relevance
}

/// The matches a relevance search ranks: a range of message ids, which is the time order.
public struct RelevanceWindow: Sendable, Equatable {
    /// The oldest message id the window holds; nil: it reaches down to the oldest match.
    public var lowestMessageID: Int64?
    /// The window holds only messages older than this one; nil: the newest window, which
    /// every new match joins.
    public var belowMessageID: Int64?

    public init(lowestMessageID: Int64? = nil, belowMessageID: Int64? = nil) {
        self.lowestMessageID = lowestMessageID
        self.belowMessageID = belowMessageID
    }
}

/// How many matches a relevance window holds now, and whether older ones lie below it.
public struct RelevanceWindowEdge: Sendable, Equatable {
    public var rankedMatches: Int
    public var olderMatchesExist: Bool

    public init(rankedMatches: Int = 0, olderMatchesExist: Bool = false) {
        self.rankedMatches = rankedMatches
        self.olderMatchesExist = olderMatchesExist
    }
}

/// Which messages a search considers, and how its snippets mark the matched words: the same
/// for the cache's search, the server's (Net/Endpoints.swift) and a search view's parameters.
public struct MessageSearchFilter: Sendable, Equatable {
    /// Empty: every channel.
    public var channelURLs: [String] = []
    public var customTypes: [String] = []
    public var senderIDs: [String] = []
    /// Inclusive bounds on `created_at` (ms).
    public var createdFrom: Int64?
    public var createdTo: Int64?
    /// Marks around the matched words in snippets.
    public var highlightStart = "<b>"
    public var highlightEnd = "</b>"

    public init() {}
}

/// What a search of the cache looks for. `match` is an FTS5 query expression (see
/// `MessageSearchText.matchExpression` for turning user text into one).
public struct CacheSearchQuery: Sendable, Equatable {
    public var match: String
    public var filter = MessageSearchFilter()
    public var order: MessageSearchOrder = .time

    public init(match: String) { self.match = match }
}

/// One cached message a search found.
public struct CacheSearchHit: Sendable, Equatable {
    public var messageID: Int64
    public var channelURL: String
    public var key: MessageKey
    /// The message's stored text.
    public var json: String
    /// The best-matching column's text around the matches, with them between the markers.
    public var snippet: String
    /// Bigger is more relevant (`SearchRank`); 0 in time order, which does
    /// not rank.
    public var score: Double
}

extension ChatCache {
    /// Where a page of a search starts.
    public enum SearchWindow: Sendable, Equatable {
        /// Time order: up to `limit` hits older than message `id` (nil: from the newest).
        case olderThan(messageID: Int64?, limit: Int)
        /// Time order: every hit at or newer than message `id` (a view's loaded window).
        case atOrNewerThan(messageID: Int64)
        /// Either order: the first `limit` hits (relevance order: of every match).
        case first(limit: Int)
        /// Relevance order: the first `limit` hits of the window.
        case ranked(RelevanceWindow, limit: Int)
        /// Either order: those of these messages that match (their current snippets).
        case among([Int64])
    }

    /// The conditions of a search statement: the expression (?1; with `highlights`, ?2 and ?3
    /// are the highlight marks) and the filters, with the values they bind (SQLite refuses a
    /// value for a parameter beyond the last one a statement names).
    private struct SearchConditions {
        var conditions = ["message_search MATCH ?1"]
        var values: [SQLiteValue]

        init(_ query: CacheSearchQuery, highlights: Bool = false) {
            values = [.text(query.match)]
            if highlights { values += [.text(query.filter.highlightStart), .text(query.filter.highlightEnd)] }
            func list(_ items: [String]) -> SQLiteValue { .text(JSONValue.array(items.map(JSONValue.string)).canonicalText) }
            let filter = query.filter
            if !filter.channelURLs.isEmpty { add("m.channel_url IN (SELECT value FROM json_each(", list(filter.channelURLs), "))") }
            if !filter.customTypes.isEmpty { add("m.custom_type IN (SELECT value FROM json_each(", list(filter.customTypes), "))") }
            if !filter.senderIDs.isEmpty { add("m.sender_id IN (SELECT value FROM json_each(", list(filter.senderIDs), "))") }
            if let from = filter.createdFrom { add("m.created_at >= ", .integer(from)) }
            if let to = filter.createdTo { add("m.created_at <= ", .integer(to)) }
        }

        /// Appends `before` ?N `after` with `value` bound as ?N.
        mutating func add(_ before: String, _ value: SQLiteValue, _ after: String = "") {
            values.append(value)
            conditions.append("\(before)?\(values.count)\(after)")
        }

        mutating func bind(_ value: SQLiteValue) -> String {
            values.append(value)
            return "?\(values.count)"
        }

        mutating func restrict(to window: RelevanceWindow) {
            if let lowest = window.lowestMessageID { add("message_search.rowid >= ", .integer(lowest)) }
            if let below = window.belowMessageID { add("message_search.rowid < ", .integer(below)) }
        }

        var filtersMessages: Bool { conditions.contains { $0.hasPrefix("m.") } }
        var whereClause: String { conditions.joined(separator: " AND ") }
        /// The join to `messages` when a filter reads it.
        var messagesJoin: String { filtersMessages ? "JOIN messages AS m ON m.message_id = message_search.rowid" : "" }
    }

    /// The cached messages matching `query` in `window`, in the query's order. An FTS5
    /// syntax error in `match` is `.invalidArgument` with SQLite's words.
    public func searchMessages(_ query: CacheSearchQuery, _ window: SearchWindow) throws(ParleyError) -> [CacheSearchHit] {
        var parts = SearchConditions(query, highlights: true)
        var limit: Int?
        switch window {
        case .olderThan(let id, let count):
            if let id { parts.add("message_search.rowid < ", .integer(id)) }
            limit = count
        case .atOrNewerThan(let id):
            parts.add("message_search.rowid >= ", .integer(id))
        case .first(let count):
            limit = count
        case .ranked(let relevanceWindow, let count):
            parts.restrict(to: relevanceWindow)
            limit = count
        case .among(let ids):
            if ids.isEmpty { return [] }
            parts.add("message_search.rowid IN (SELECT value FROM json_each(", .text(JSONValue.array(ids.map(JSONValue.int)).canonicalText), "))")
        }
        if let limit, limit <= 0 { return [] }
        try updateSearchIndex()
        return try readingExpression { () throws(ParleyError) -> [CacheSearchHit] in
            if query.order == .time {
                // The rowid is the message id: ordering by it lets FTS5 walk its lists newest
                // first and stop at the limit. No score: ranking reads every match's positions.
                var sql = """
                    SELECT m.message_id, m.channel_url, m.created_at, m.json,
                           snippet(message_search, -1, ?2, ?3, '…', 16), 0
                    FROM message_search JOIN messages AS m ON m.message_id = message_search.rowid
                    WHERE \(parts.whereClause) ORDER BY message_search.rowid DESC
                    """
                if let limit { sql += " LIMIT \(parts.bind(.integer(Int64(limit))))" }
                return try hits(sql, parts.values)
            }
            // Relevance scores every match in the window (a rowid range FTS5 applies in its
            // scan): first the ids and scores alone (the sort then holds two numbers a match,
            // not its message), then the messages and snippets of the page.
            var sql = """
                SELECT message_search.rowid, \(SearchRank.functionName)(message_search) AS score FROM message_search
                \(parts.messagesJoin)
                WHERE \(parts.whereClause) ORDER BY score DESC, message_search.rowid DESC
                """
            if let limit { sql += " LIMIT \(parts.bind(.integer(Int64(limit))))" }
            var ranked: [RankedMatch] = []
            try database.statement(sql).rows(parts.values) { row in ranked.append(RankedMatch(id: row.int64(0), score: row.double(1))) }
            return try rankedHits(ranked, query)
        }
    }

    /// A match's id and score.
    private struct RankedMatch {
        var id: Int64
        var score: Double

        /// Most relevant first, ties newest first.
        func ranksBefore(_ other: RankedMatch) -> Bool { score != other.score ? score > other.score : id > other.id }
    }

    /// The messages of `ranked`, in its order, with these snippets.
    private func storedHits(_ ranked: [RankedMatch], _ snippets: [Int64: String]) throws(ParleyError) -> [CacheSearchHit] {
        guard !ranked.isEmpty else { return [] }
        var byID: [Int64: CacheSearchHit] = [:]
        let ids = JSONValue.array(ranked.map { JSONValue.int($0.id) }).canonicalText
        try database.statement("SELECT message_id, channel_url, created_at, json FROM messages WHERE message_id IN (SELECT value FROM json_each(?1))")
            .rows([.text(ids)]) { row in
                let id = row.int64(0)
                byID[id] = CacheSearchHit(
                    messageID: id, channelURL: row.string(1) ?? "", key: MessageKey(createdAt: row.int64(2), messageID: id),
                    json: row.string(3) ?? "null", snippet: snippets[id] ?? "", score: 0)
            }
        return ranked.compactMap { entry in
            guard var hit = byID[entry.id] else { return nil }
            hit.score = entry.score
            return hit
        }
    }

    /// The messages and snippets of `ranked`, in its order.
    private func rankedHits(_ ranked: [RankedMatch], _ query: CacheSearchQuery) throws(ParleyError) -> [CacheSearchHit] {
        guard !ranked.isEmpty else { return [] }
        // One pass over the matches between the page's lowest and highest id: a lookup per id
        // would start the query over for each (a prefix term merges its words every time),
        // hence `+`, which keeps the id list away from FTS5.
        let ids = JSONValue.array(ranked.map { JSONValue.int($0.id) }).canonicalText
        let details = """
            SELECT m.message_id, m.channel_url, m.created_at, m.json, snippet(message_search, -1, ?2, ?3, '…', 16), 0
            FROM message_search JOIN messages AS m ON m.message_id = message_search.rowid
            WHERE message_search MATCH ?1 AND message_search.rowid BETWEEN ?5 AND ?6
                AND +message_search.rowid IN (SELECT value FROM json_each(?4))
            """
        let lowest = ranked.map(\.id).min() ?? 0, highest = ranked.map(\.id).max() ?? 0
        let found = try hits(details, [
            .text(query.match), .text(query.filter.highlightStart), .text(query.filter.highlightEnd), .text(ids), .integer(lowest),
            .integer(highest),
        ])
        let byID = Dictionary(found.map { ($0.messageID, $0) }, uniquingKeysWith: { first, _ in first })
        return ranked.compactMap { entry in
            guard var hit = byID[entry.id] else { return nil }
            hit.score = entry.score
            return hit
        }
    }

    /// Forms the relevance window of `query` below `belowMessageID` (nil: the newest), its
    /// `size` newest matches (fewer: it reaches down to the oldest), and ranks it: its first
    /// `limit` hits. One walk of the index, newest first, scores the window, makes the snippets
    /// of the matches that enter the best `limit` as they come (`SearchRank`), finds the oldest
    /// match and, one match further, whether an older one exists: a second walk to find the
    /// oldest first would cost as much again, and more than the scoring where a query's words
    /// are common and its matches rare; a statement of its own for the older one, about as much
    /// as a match's share of the walk a hundred times over (FTS5 sets up every term's lists anew).
    public func formRelevanceWindow(_ query: CacheSearchQuery, size: Int, belowMessageID: Int64?, limit: Int) throws(ParleyError)
        -> (window: RelevanceWindow, edge: RelevanceWindowEdge, hits: [CacheSearchHit])
    {
        var parts = SearchConditions(query, highlights: true)
        if let below = belowMessageID { parts.add("message_search.rowid < ", .integer(below)) }
        let sizeValue = parts.bind(.integer(Int64(size) + 1))
        let limitValue = parts.bind(.integer(Int64(limit)))
        let sql = """
            SELECT message_search.rowid, \(SearchRank.pageFunctionName)(message_search, \(limitValue), 0),
                CASE WHEN \(SearchRank.pageFunctionName)(message_search, \(limitValue), 1)
                    THEN snippet(message_search, -1, ?2, ?3, '…', 16) END
            FROM message_search \(parts.messagesJoin)
            WHERE \(parts.whereClause) ORDER BY message_search.rowid DESC LIMIT \(sizeValue)
            """
        try updateSearchIndex()
        return try readingExpression { () throws(ParleyError) in
            var count = 0
            var oldest: Int64 = 0
            var olderExists = false
            // The best `limit`, best first: the matches come newest first, so one that only
            // ties the last kept ranks after it and most are passed over at one comparison.
            var best: [RankedMatch] = []
            var snippets: [Int64: String] = [:]
            try database.statement(sql).rows(parts.values) { row in
                guard count < size else {
                    olderExists = true
                    return
                }
                let match = RankedMatch(id: row.int64(0), score: row.double(1))
                count += 1
                oldest = match.id
                guard limit > 0, best.count < limit || match.ranksBefore(best[best.count - 1]) else { return }
                best.insert(match, at: best.firstIndex { match.ranksBefore($0) } ?? best.count)
                if best.count > limit { best.removeLast() }
                if let snippet = row.string(2) { snippets[match.id] = snippet }
            }
            let window = RelevanceWindow(lowestMessageID: count >= size ? oldest : nil, belowMessageID: belowMessageID)
            let edge = RelevanceWindowEdge(rankedMatches: count, olderMatchesExist: olderExists)
            // The walk made each match's snippet as it entered the page, as here: the rest of a
            // hit is its row of `messages`. A plan that reads the matches in another order (for
            // a filter) may have missed some; then the page's snippets are made again.
            guard best.allSatisfy({ snippets[$0.id] != nil }) else { return (window, edge, try rankedHits(best, query)) }
            return (window, edge, try storedHits(best, snippets))
        }
    }

    /// How `window` of `query` stands now: the matches it holds, and whether one lies below it.
    public func relevanceWindowEdge(_ query: CacheSearchQuery, _ window: RelevanceWindow) throws(ParleyError) -> RelevanceWindowEdge {
        var parts = SearchConditions(query)
        parts.restrict(to: window)
        try updateSearchIndex()
        return try readingExpression { () throws(ParleyError) in
            var count = 0
            try database.statement("SELECT count(*) FROM message_search \(parts.messagesJoin) WHERE \(parts.whereClause)")
                .rows(parts.values) { count = Int($0.int64(0)) }
            guard let lowest = window.lowestMessageID else { return RelevanceWindowEdge(rankedMatches: count) }
            return RelevanceWindowEdge(rankedMatches: count, olderMatchesExist: try matchExists(query, below: lowest))
        }
    }

    private func matchExists(_ query: CacheSearchQuery, below id: Int64) throws(ParleyError) -> Bool {
        var parts = SearchConditions(query)
        parts.add("message_search.rowid < ", .integer(id))
        var exists = false
        try database.statement("SELECT EXISTS (SELECT 1 FROM message_search \(parts.messagesJoin) WHERE \(parts.whereClause))")
            .rows(parts.values) { exists = $0.int64(0) != 0 }
        return exists
    }

    /// Runs statements that read the index with the caller's expression: a plain SQL error
    /// (not busy, I/O or a damaged file) comes from the expression, the caller's input, as
    /// the statements themselves are fixed and valid.
    private func readingExpression<T>(_ body: () throws(ParleyError) -> T) throws(ParleyError) -> T {
        do throws(ParleyError) {
            return try body()
        } catch {
            if database.lastFailureCode & 0xff == 1 /* SQLITE_ERROR */ {
                throw .invalidArgument("search query: \(error.message)")
            }
            throw error
        }
    }

    /// Runs a search statement whose columns are id, channel, created_at, text, snippet, score.
    private func hits(_ sql: String, _ values: [SQLiteValue]) throws(ParleyError) -> [CacheSearchHit] {
        var hits: [CacheSearchHit] = []
        try database.statement(sql).rows(values) { row in
            let id = row.int64(0)
            hits.append(
                CacheSearchHit(
                    messageID: id, channelURL: row.string(1) ?? "", key: MessageKey(createdAt: row.int64(2), messageID: id),
                    json: row.string(3) ?? "null", snippet: row.string(4) ?? "", score: row.double(5)))
        }
        return hits
    }

    /// Which of these server messages are stored.
    public func storedMessageIDs(among ids: [Int64]) throws(ParleyError) -> Set<Int64> {
        guard !ids.isEmpty else { return [] }
        var stored: Set<Int64> = []
        try database.statement("SELECT message_id FROM messages WHERE message_id IN (SELECT value FROM json_each(?1))")
            .rows([.text(JSONValue.array(ids.map(JSONValue.int)).canonicalText)]) { stored.insert($0.int64(0)) }
        return stored
    }

    /// How many noted changes wait before a commit applies them to the index. Every read
    /// of the index applies whatever waits first (`updateSearchIndex`), so a search always
    /// sees exactly the committed messages; between reads, a write that changes one message
    /// (a live message, a send) does not pay for a new index segment of its own: FTS5
    /// writes one per flush of its pending terms, which cost a live message about a fifth of
    /// its commit. The notes are a table, so changes that wait survive a restart.
    static let searchIndexBatch: Int64 = 128

    /// The commit hook's threshold (`appliesSearchNotesAtEveryCommit`), apart from the cache
    /// so that the hook the database holds does not hold the cache.
    final class SearchNotesPerCommit: @unchecked Sendable {
        // Read and written on the thread that owns the cache, as the cache itself is.
        var count: Int64 = ChatCache.searchIndexBatch
    }

    /// Applies the changes the triggers noted in `message_search_changes` (schema version 9)
    /// to the search index and forgets them, once at least `waiting` are noted; run by every
    /// write transaction just before its commit with `searchIndexBatch`, and by
    /// `updateSearchIndex` with 1. First what the index holds for the changed messages goes,
    /// then their text as it is now goes in, both in message id order: FTS5 then writes one
    /// new segment for each step, where rows out of order or alternating deletes and inserts
    /// would cost one each. A message whose text ended as it began is left alone.
    static func indexChangedMessages(_ database: SQLiteDatabase, once waiting: Int64) throws(ParleyError) {
        var noted: Int64 = 0
        try database.statement("SELECT count(*) FROM (SELECT 1 FROM message_search_changes LIMIT ?1)").rows([.integer(waiting)]) {
            noted = $0.int64(0)
        }
        guard noted >= waiting, noted > 0 else { return }
        try database.statement("""
            INSERT INTO message_search (message_search, rowid, search_text, search_file_name)
                SELECT 'delete', c.message_id, c.old_text, c.old_file_name FROM message_search_changes c
                WHERE c.indexed AND NOT EXISTS (
                    SELECT 1 FROM messages m WHERE m.message_id = c.message_id
                        AND m.search_text = c.old_text AND m.search_file_name = c.old_file_name)
                ORDER BY c.message_id
            """).run()
        try database.statement("""
            INSERT INTO message_search (rowid, search_text, search_file_name)
                SELECT m.message_id, m.search_text, m.search_file_name
                FROM message_search_changes c CROSS JOIN messages m ON m.message_id = c.message_id
                WHERE NOT (c.indexed AND m.search_text = c.old_text AND m.search_file_name = c.old_file_name)
                ORDER BY c.message_id
            """).run()
        try database.statement("DELETE FROM message_search_changes").run()
    }

    /// Applies every noted change to the search index (in a transaction of its own, or a
    /// savepoint of the one open): run before each read of the index. A read-only connection
    /// cannot, and refuses to read an index that is behind rather than answer from it.
    func updateSearchIndex() throws(ParleyError) {
        var waiting = false
        try database.statement("SELECT EXISTS (SELECT 1 FROM message_search_changes)").rows { waiting = $0.int64(0) != 0 }
        guard waiting else { return }
        if readsOnly {
            throw .invalidState("search: changes wait to enter the search index; search through the cache's writing connection")
        }
        try transaction { () throws(ParleyError) in try Self.indexChangedMessages(database, once: 1) }
    }

    /// How many cached messages the search index holds (for checks and benchmarks).
    public func searchIndexCount() throws(ParleyError) -> Int64 {
        try updateSearchIndex()
        var count: Int64 = 0
        try database.statement("SELECT count(*) FROM message_search").rows { count = $0.int64(0) }
        return count
    }

    /// Checks the index against its content (FTS5 `integrity-check`); throws when they differ.
    public func checkSearchIndex() throws(ParleyError) {
        try updateSearchIndex()
        _ = try database.statement("INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)").run()
    }
}

/// The relevance score of a match, an FTS5 auxiliary function that every connection of the
/// cache has (`SQLiteFunctions`): for each phrase of the query, how often it occurs in the
/// message (text and file name), saturated as BM25 saturates it (k1 = 1.2: a second
/// occurrence adds less than the first; one adds exactly 1), summed. BM25's other parts are
/// left out because each costs a read per match or per word beyond the match's own positions:
/// the text's length (a row of the index's size table for every match, about ten times the
/// rest of the score) and each word's rarity (a walk of every match of the word in the whole
/// index, whatever the window).
enum SearchRank {
    static let functionName = "parley_search_rank"
    /// `parley_search_page(message_search, k, part)`, for a walk that keeps the best `k` matches
    /// as they come: part 0, the match's score (as `parley_search_rank`); part 1, 1 when the
    /// match enters the best `k` of the statement's matches so far (ties to the one seen
    /// first), else 0. The scores kept, and the last one with its row, are the statement's FTS5
    /// auxiliary data, so that both parts of a row score it once. In a walk newest first it
    /// picks out the matches that enter a page kept as they come, so that their snippets alone
    /// are made in that walk (a walk of its own for the page's snippets costs up to half the
    /// ranking).
    static let pageFunctionName = "parley_search_page"
    static let saturation = 1.2

    /// The auxiliary data of `parley_search_page`: its header, then the best scores, best first.
    private struct PageScores {
        var size: Int
        var kept: Int
        var lastRowID: Int64?
        var lastScore: Double
    }

    static func register(on handle: OpaquePointer) -> Int32 {
        guard let api = FTS5.api(of: handle), let create = api.pointee.xCreateFunction else { return SQLITE_ERROR }
        let code = create(api, functionName, nil, { extensionAPI, context, result, _, _ in
            guard let api = extensionAPI?.pointee, let context else { return sqlite3_result_error(result, "no FTS5 context", -1) }
            switch SearchRank.score(api, context) {
            case .success(let score): sqlite3_result_double(result, score)
            case .failure(let failure): sqlite3_result_error_code(result, failure.code)
            }
        }, nil)
        guard code == SQLITE_OK else { return code }
        return create(api, pageFunctionName, nil, { extensionAPI, context, result, count, values in
            guard let api = extensionAPI?.pointee, let context, let getData = api.xGetAuxdata, let setData = api.xSetAuxdata,
                let rowID = api.xRowid, count == 2, let sizeValue = values?[0], let partValue = values?[1]
            else { return sqlite3_result_error(result, "parley_search_page(message_search, k, part)", -1) }
            var page = getData(context, 0)?.assumingMemoryBound(to: PageScores.self)
            if page == nil {
                let size = Int(max(1, min(sqlite3_value_int(sizeValue), 1_000)))
                let bytes = MemoryLayout<PageScores>.stride + size * MemoryLayout<Double>.stride
                guard let made = malloc(bytes)?.assumingMemoryBound(to: PageScores.self) else { return sqlite3_result_error_nomem(result) }
                made.initialize(to: PageScores(size: size, kept: 0, lastRowID: nil, lastScore: 0))
                // On a failure FTS5 frees it itself.
                let stored = setData(context, UnsafeMutableRawPointer(made)) { free($0) }
                guard stored == SQLITE_OK else { return sqlite3_result_error_code(result, stored) }
                page = made
            }
            guard let page else { return }
            let row = rowID(context)
            let score: Double
            if page.pointee.lastRowID == row {
                score = page.pointee.lastScore
            } else {
                switch SearchRank.score(api, context) {
                case .success(let value): score = value
                case .failure(let failure): return sqlite3_result_error_code(result, failure.code)
                }
                page.pointee.lastRowID = row
                page.pointee.lastScore = score
            }
            guard sqlite3_value_int(partValue) == 1 else { return sqlite3_result_double(result, score) }
            let best = UnsafeMutableRawPointer(page.advanced(by: 1)).assumingMemoryBound(to: Double.self)
            let size = page.pointee.size, kept = page.pointee.kept
            guard kept < size || score > best[size - 1] else { return sqlite3_result_int(result, 0) }
            var at = kept < size ? kept : size - 1
            page.pointee.kept = min(kept + 1, size)
            while at > 0, score > best[at - 1] {
                best[at] = best[at - 1]
                at -= 1
            }
            best[at] = score
            sqlite3_result_int(result, 1)
        }, nil)
    }

    /// The score of the match `context` is on.
    static func score(_ api: Fts5ExtensionApi, _ context: OpaquePointer) -> Result<Double, SQLiteCode> {
        guard let phraseCount = api.xPhraseCount, let first = api.xPhraseFirst, let next = api.xPhraseNext else {
            return .failure(SQLiteCode(SQLITE_MISUSE))
        }
        var score = 0.0
        for phrase in 0..<phraseCount(context) {
            var iterator = Fts5PhraseIter()
            var column: Int32 = 0, offset: Int32 = 0
            let code = first(context, phrase, &iterator, &column, &offset)
            guard code == SQLITE_OK else { return .failure(SQLiteCode(code)) }
            var occurrences = 0.0
            while column >= 0 {
                occurrences += 1
                next(context, &iterator, &column, &offset)
            }
            score += occurrences * (saturation + 1) / (occurrences + saturation)
        }
        return .success(score)
    }

    /// An SQLite result code as an error.
    struct SQLiteCode: Error {
        var code: Int32
        init(_ code: Int32) { self.code = code }
    }
}

/// FTS5's C interface on a connection.
enum FTS5 {
    /// `SELECT fts5(?1)` with a pointer bound as "fts5_api_ptr" is how FTS5 hands out its API;
    /// nil without FTS5.
    static func api(of handle: OpaquePointer) -> UnsafeMutablePointer<fts5_api>? {
        var api: UnsafeMutablePointer<fts5_api>?
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(handle, "SELECT fts5(?1)", -1, &statement, nil) == SQLITE_OK, let statement else { return nil }
        let typeName = strdup("fts5_api_ptr")
        let stepped = withUnsafeMutablePointer(to: &api) { slot in
            sqlite3_bind_pointer(statement, 1, slot, typeName, nil)
            return sqlite3_step(statement)
        }
        sqlite3_finalize(statement)
        free(typeName)
        return stepped == SQLITE_ROW ? api : nil
    }
}

/// Turning what a user typed into a search expression.
public enum MessageSearchText {
    /// The words of `text` as the search index holds them: what the index's own tokenizer
    /// (`IndexTokenizer`) makes of it, folded (lower case, Latin accents removed).
    public static func words(_ text: String) throws(ParleyError) -> [String] {
        try IndexTokenizer.tokens(text).map(\.term)
    }

    /// The FTS5 expression for plain text: every word must occur, the last one as a prefix
    /// (what is being typed). Nil when the text has no words (nothing can match).
    ///
    /// Each word is the text the tokenizer read it from, quoted: FTS5 reads a quoted string
    /// with the same tokenizer, so each phrase is exactly that one word (never empty, never
    /// split), and nothing in it acts as FTS5 syntax.
    public static func matchExpression(_ text: String) throws(ParleyError) -> String? {
        let tokens = try IndexTokenizer.tokens(text)
        guard !tokens.isEmpty else { return nil }
        let utf8 = Array(text.utf8)
        var parts = tokens.map { token in
            let source = String(decoding: utf8[token.utf8Range], as: UTF8.self)
            // A word holds no ASCII punctuation with this tokenizer; doubled, a quote would still read as one.
            return "\"" + source.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"") + "\""
        }
        parts[parts.count - 1] += " *"
        return parts.joined(separator: " AND ")
    }
}

/// The search index's tokenizer, run on text that is not in the index: SQLite's `unicode61`
/// with the index's options, through the FTS5 API of a private in-memory connection. A query's
/// words are the words the index would make of the same text, so there is one definition of a
/// word, SQLite's Unicode tables included (they know Unicode 6.1: later characters, such as
/// skin-tone modifiers or the letters of newer scripts, count as letters there). A query word
/// the index cannot hold would be an empty phrase, and an AND with one matches nothing.
enum IndexTokenizer {
    /// The `tokenize` option of `message_search` (Store/ChatCache+Schema.swift, version 9);
    /// MessageSearchCacheTests holds the two equal.
    static let specification = "unicode61 remove_diacritics 2"

    /// One word: its folded form, as the index stores it, and where it lies in the text.
    struct Token: Equatable {
        var term: String
        var utf8Range: Range<Int>
    }

    /// The words of `text`, in order.
    static func tokens(_ text: String) throws(ParleyError) -> [Token] {
        guard !text.isEmpty else { return [] }
        return try shared.withLock { (instance: inout Instance?) throws(ParleyError) -> [Token] in
            if let instance { return try instance.tokens(text) }
            let opened = try Instance()
            instance = opened
            return try opened.tokens(text)
        }
    }

    /// Opened on first use and kept: the tokenizer belongs to its connection. One at a time:
    /// a `unicode61` instance folds into a buffer of its own.
    private static let shared = Locked<Instance?>(nil)

    private final class Instance {
        /// Never closed: the tokenizer's methods and their context belong to it.
        private let connection: OpaquePointer
        private let methods: fts5_tokenizer
        private let tokenizer: OpaquePointer

        init() throws(ParleyError) {
            var handle: OpaquePointer?
            let opened = sqlite3_open_v2(":memory:", &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil)
            guard opened == SQLITE_OK, let handle else {
                if let handle { sqlite3_close_v2(handle) }
                throw ParleyError(.cache, "search tokenizer: cannot open an in-memory database: \(String(cString: sqlite3_errstr(opened)))")
            }
            func fail(_ what: String) -> ParleyError {
                let error = ParleyError(.cache, "search tokenizer: \(what): \(String(cString: sqlite3_errmsg(handle)))")
                sqlite3_close_v2(handle)
                return error
            }
            guard let api = FTS5.api(of: handle), let find = api.pointee.xFindTokenizer else { throw fail("no FTS5 API") }
            var context: UnsafeMutableRawPointer?
            var methods = fts5_tokenizer()
            let name = Self.words(of: IndexTokenizer.specification)
            guard find(api, name[0], &context, &methods) == SQLITE_OK, let create = methods.xCreate, methods.xTokenize != nil else {
                throw fail("no tokenizer \(name[0])")
            }
            var arguments = name.dropFirst().map { UnsafePointer(strdup($0)) }
            defer { for argument in arguments { free(UnsafeMutablePointer(mutating: argument)) } }
            var created: OpaquePointer?
            guard create(context, &arguments, Int32(arguments.count), &created) == SQLITE_OK, let created else {
                throw fail("cannot create the tokenizer '\(IndexTokenizer.specification)'")
            }
            connection = handle
            self.methods = methods
            tokenizer = created
        }

        private static func words(of specification: String) -> [String] {
            specification.split(separator: " ").map(String.init)
        }

        func tokens(_ text: String) throws(ParleyError) -> [Token] {
            var found: [Token] = []
            var utf8 = Array(text.utf8)
            let count = Int32(utf8.count)
            let code = withUnsafeMutablePointer(to: &found) { collected in
                utf8.withUnsafeMutableBufferPointer { bytes in
                    bytes.baseAddress!.withMemoryRebound(to: CChar.self, capacity: max(1, bytes.count)) { text in
                        // A C callback captures nothing: the list travels as its context.
                        methods.xTokenize!(tokenizer, collected, FTS5_TOKENIZE_DOCUMENT, text, count) { context, _, token, length, start, end in
                            let term = token.map { String(decoding: UnsafeRawBufferPointer(start: UnsafeRawPointer($0), count: Int(length)), as: UTF8.self) } ?? ""
                            context!.assumingMemoryBound(to: [Token].self).pointee.append(Token(term: term, utf8Range: Int(start)..<Int(end)))
                            return SQLITE_OK
                        }
                    }
                }
            }
            guard code == SQLITE_OK else {
                throw ParleyError(.cache, "search tokenizer: \(String(cString: sqlite3_errstr(code)))")
            }
            return found
        }
    }
}
