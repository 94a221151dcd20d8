// Chunks: per channel (and filter scope), non-overlapping ranges of message keys that the
// cache holds continuously. A page is served from the cache only inside a chunk.

/// What `appendRealtimeMessage` did.
public struct RealtimeAppendResult: Sendable, Hashable {
    public var outcome: MessageUpsertOutcome
    /// The message lies in a chunk that reaches the newest end (that chunk was extended to
    /// it if needed). False: the message is stored but outside any continuous range.
    public var isContinuous: Bool
}

extension ChatCache {
    /// Records that the cache holds every message (of `scope`) of the channel with keys in
    /// `from...to`, and whether nothing older / newer exists. Overlapping or adjacent
    /// chunks of the same channel and scope are merged (flags combined); when the result
    /// reaches the newest (oldest) end, no other chunk of that scope keeps that flag.
    /// Returns the merged chunk.
    ///
    /// `from`/`to` are the range the server vouched for, which may extend past the
    /// messages returned: a `prev` page anchored at key A is continuous up to A itself.
    @discardableResult
    public func addContinuousRange(
        channelURL: String, scope: String = "", from: MessageKey, to: MessageKey,
        reachesOldest: Bool = false, reachesNewest: Bool = false
    ) throws(ParleyError) -> MessageChunk {
        guard from <= to else {
            throw ParleyError.invalidArgument("continuous range must not be reversed: from \(from) is after to \(to)")
        }
        return try transaction { () throws(ParleyError) in
            var merged = MessageChunk(
                channelURL: channelURL, scope: scope, start: from, end: to,
                reachesOldest: reachesOldest, reachesNewest: reachesNewest)
            var others: [(id: Int64, chunk: MessageChunk)] = []  // chunks left as they are
            // Stored chunks are disjoint and not adjacent, so in start order one pass absorbs
            // every chunk that touches the growing range.
            for (id, chunk) in try storedChunks(channelURL: channelURL, scope: scope) {
                if Self.touches(chunk, merged) {
                    merged.start = min(merged.start, chunk.start)
                    merged.end = max(merged.end, chunk.end)
                    merged.reachesOldest = merged.reachesOldest || chunk.reachesOldest
                    merged.reachesNewest = merged.reachesNewest || chunk.reachesNewest
                    try database.statement("DELETE FROM chunks WHERE chunk_id = ?1").run([.integer(id)])
                } else {
                    others.append((id, chunk))
                }
            }
            // Only one range can border the newest (oldest) end: a disjoint range claiming
            // it too is out of date.
            for (id, chunk) in others {
                let clearsNewest = merged.reachesNewest && chunk.reachesNewest
                let clearsOldest = merged.reachesOldest && chunk.reachesOldest
                if clearsNewest || clearsOldest {
                    try database.statement("""
                        UPDATE chunks SET reaches_newest = reaches_newest AND NOT ?2, reaches_oldest = reaches_oldest AND NOT ?3
                        WHERE chunk_id = ?1
                        """).run([.integer(id), SQLiteValue(clearsNewest), SQLiteValue(clearsOldest)])
                }
            }
            try database.statement("""
                INSERT INTO chunks (channel_url, scope, start_created_at, start_message_id, end_created_at, end_message_id,
                                    reaches_oldest, reaches_newest)
                VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                """).run([
                    .text(channelURL), .text(scope), .integer(merged.start.createdAt), .integer(merged.start.messageID),
                    .integer(merged.end.createdAt), .integer(merged.end.messageID),
                    SQLiteValue(merged.reachesOldest), SQLiteValue(merged.reachesNewest),
                ])
            return merged
        }
    }

    /// True when the two ranges overlap or are adjacent (no key can lie between them).
    static func touches(_ left: MessageChunk, _ right: MessageChunk) -> Bool {
        let (first, second) = left.start <= right.start ? (left, right) : (right, left)
        return second.start <= first.end || second.start == successor(of: first.end)
    }

    /// The next key in (created_at, message_id) order; nil after the last possible key.
    static func successor(of key: MessageKey) -> MessageKey? {
        if key.messageID < .max { return MessageKey(createdAt: key.createdAt, messageID: key.messageID + 1) }
        if key.createdAt < .max { return MessageKey(createdAt: key.createdAt + 1, messageID: .min) }
        return nil
    }

    /// The channel's chunks of `scope` (or of every scope when nil), ordered by start.
    public func chunks(channelURL: String, scope: String? = nil) throws(ParleyError) -> [MessageChunk] {
        var result: [MessageChunk] = []
        try database.statement(Self.chunksOfAnyScopeSQL).rows([.text(channelURL), SQLiteValue(scope)]) { row in
            result.append(Self.readChunk(row).chunk)
        }
        return result
    }

    private func storedChunks(channelURL: String, scope: String) throws(ParleyError) -> [(id: Int64, chunk: MessageChunk)] {
        var result: [(id: Int64, chunk: MessageChunk)] = []
        try database.statement(Self.chunksOfScopeSQL).rows([.text(channelURL), .text(scope)]) { row in
            result.append(Self.readChunk(row))
        }
        return result
    }

    /// The range around `key` the cache holds continuously for `scope`: the union of the
    /// chunks of that scope and the unfiltered ones (continuous for every filter) that hold
    /// the key. They all hold it, so their union has no hole; it reaches an end when the
    /// chunk that goes furthest that way does. Nil when the key is in no chunk.
    public func chunk(channelURL: String, scope: String = "", containing key: MessageKey) throws(ParleyError) -> MessageChunk? {
        var candidates = try storedChunks(channelURL: channelURL, scope: scope).map(\.chunk)
        if !scope.isEmpty { candidates += try storedChunks(channelURL: channelURL, scope: "").map(\.chunk) }
        let holding = candidates.filter { $0.contains(key) }
        guard var union = holding.first else { return nil }
        for other in holding.dropFirst() {
            if other.start < union.start || (other.start == union.start && other.reachesOldest) {
                union.start = other.start
                union.reachesOldest = other.reachesOldest
            }
            if other.end > union.end || (other.end == union.end && other.reachesNewest) {
                union.end = other.end
                union.reachesNewest = other.reachesNewest
            }
        }
        return union
    }

    /// The newest key a chunk of `scope` (or an unfiltered one) holds: where what the cache
    /// knows continuously of the channel ends. Nil when no chunk exists.
    public func newestContinuousKey(channelURL: String, scope: String = "") throws(ParleyError) -> MessageKey? {
        var candidates = try storedChunks(channelURL: channelURL, scope: scope).map(\.chunk)
        if !scope.isEmpty { candidates += try storedChunks(channelURL: channelURL, scope: "").map(\.chunk) }
        return candidates.map(\.end).max()
    }

    /// True when one chunk (of `scope`, or unfiltered) holds all of `from...to`.
    public func chunkCovers(channelURL: String, scope: String = "", from: MessageKey, to: MessageKey) throws(ParleyError) -> Bool {
        guard from <= to else { return false }
        var candidates = try storedChunks(channelURL: channelURL, scope: scope).map(\.chunk)
        if !scope.isEmpty { candidates += try storedChunks(channelURL: channelURL, scope: "").map(\.chunk) }
        return candidates.contains { $0.start <= from && to <= $0.end }
    }

    /// Whether the page `appendMessageTexts(channelURL:before:limit:)` gives is known to be
    /// whole: one unfiltered chunk holds every key from its oldest message to its newest one
    /// and, when `anchored` (a page before a given time), on to just before `before` (so that
    /// it joins the page after it). A page of one message at the newest end, or of none,
    /// spans nothing and is whole.
    public func messagePageIsContinuous(channelURL: String, before: MessageKey, limit: Int, anchored: Bool) throws(ParleyError) -> Bool {
        var keys: [MessageKey] = []
        try database.statement("""
            SELECT created_at, message_id FROM messages WHERE channel_url = ?1 AND (created_at, message_id) < (?2, ?3)
            ORDER BY created_at DESC, message_id DESC LIMIT ?4
            """).rows([.text(channelURL), .integer(before.createdAt), .integer(before.messageID), .integer(Int64(max(limit, 0)))]) { row in
            keys.append(MessageKey(createdAt: row.int64(0), messageID: row.int64(1)))
        }
        guard let newest = keys.first, let oldest = keys.last else { return true }
        var through = newest
        if anchored, let justBefore = Self.predecessor(of: before), justBefore > through { through = justBefore }
        if oldest == through { return true }
        return try chunkCovers(channelURL: channelURL, scope: "", from: oldest, to: through)
    }

    /// The previous key in (created_at, message_id) order; nil before the first possible key.
    static func predecessor(of key: MessageKey) -> MessageKey? {
        if key.messageID > .min { return MessageKey(createdAt: key.createdAt, messageID: key.messageID - 1) }
        if key.createdAt > .min { return MessageKey(createdAt: key.createdAt - 1, messageID: .max) }
        return nil
    }

    /// Stores a message that arrived on the real-time stream. If a chunk of its channel
    /// reaches the newest end, that chunk is extended to the message (every scope: a
    /// message another filter rejects does not break that filter's continuity), and the
    /// result says it is continuous. Otherwise it is stored but in no chunk: a view that
    /// is not at the newest end must not show it (its `has_next` stays true).
    @discardableResult
    public func appendRealtimeMessage(_ message: JSONValue) throws(ParleyError) -> RealtimeAppendResult {
        let columns = try MessageColumns(message)
        return try transaction { () throws(ParleyError) in
            let outcome = try storeMessage(columns, json: message.canonicalText, force: false)
            let key = MessageKey(createdAt: columns.createdAt, messageID: columns.messageID)
            var isContinuous = false
            try database.statement("""
                UPDATE chunks SET end_created_at = ?2, end_message_id = ?3
                WHERE channel_url = ?1 AND reaches_newest = 1 AND (end_created_at, end_message_id) < (?2, ?3)
                """).run([.text(columns.channelURL), .integer(key.createdAt), .integer(key.messageID)])
            for chunk in try chunks(channelURL: columns.channelURL) where chunk.reachesNewest && chunk.contains(key) {
                isContinuous = true
            }
            return RealtimeAppendResult(outcome: outcome, isContinuous: isContinuous)
        }
    }

    /// Drops the "reaches newest" flag of the channel's chunks (of every channel when nil):
    /// while the real-time stream is down, messages may arrive unseen, so no range can be
    /// known to reach the newest end until a gap check or a page says so again.
    public func clearReachesNewest(channelURL: String? = nil) throws(ParleyError) {
        try database.statement("UPDATE chunks SET reaches_newest = 0 WHERE ?1 IS NULL OR channel_url = ?1")
            .run([SQLiteValue(channelURL)])
    }

    /// Removes the channel's chunks (e.g. after a huge gap); messages stay.
    public func removeChunks(channelURL: String) throws(ParleyError) {
        try database.statement("DELETE FROM chunks WHERE channel_url = ?1").run([.text(channelURL)])
    }

    static let chunkColumns = """
        chunk_id, channel_url, scope, start_created_at, start_message_id, end_created_at, end_message_id,
        reaches_oldest, reaches_newest
        """

    static func readChunk(_ row: SQLiteStatement) -> (id: Int64, chunk: MessageChunk) {
        (row.int64(0), MessageChunk(
            channelURL: row.string(1) ?? "", scope: row.string(2) ?? "",
            start: MessageKey(createdAt: row.int64(3), messageID: row.int64(4)),
            end: MessageKey(createdAt: row.int64(5), messageID: row.int64(6)),
            reachesOldest: row.bool(7), reachesNewest: row.bool(8)))
    }
}

/// SQL texts made once: a statement looked up by the same text storage skips hashing it
/// (`SQLiteDatabase.statement(_:)`).
extension ChatCache {
    static let chunksOfAnyScopeSQL = """
        SELECT \(chunkColumns) FROM chunks WHERE channel_url = ?1 AND (?2 IS NULL OR scope = ?2)
        ORDER BY scope, start_created_at, start_message_id
        """
    static let chunksOfScopeSQL = """
        SELECT \(chunkColumns) FROM chunks WHERE channel_url = ?1 AND scope = ?2
        ORDER BY start_created_at, start_message_id
        """
}
