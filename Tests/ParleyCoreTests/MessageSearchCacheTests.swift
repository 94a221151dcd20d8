import Glibc
import Testing
@testable import ParleyCore

// The cache's search index (schema version 8) on its own: it follows every write of the
// messages (random inserts, edits, deletions, truncations, evictions, clears: the results
// equal a brute-force scan after each step), plain text never acts as FTS5 syntax, the
// filters and both orders, and a cache written before the index gets indexed when opened.

private let base: Int64 = 1_700_000_000_000

private func message(
    _ id: Int64, channel: String = "c1", text: String, fileName: String? = nil, customType: String = "", sender: String = "u1",
    createdAt: Int64? = nil, updatedAt: Int64 = 0
) -> JSONValue {
    var fields: [String: JSONValue] = [
        "message_id": .int(id), "channel_url": .string(channel), "created_at": .int(createdAt ?? base + id / 2),
        "updated_at": .int(updatedAt), "type": .string(fileName == nil ? "MESG" : "FILE"), "message": .string(text),
        "req_id": .string(""), "user": ["user_id": .string(sender)], "custom_type": .string(customType),
    ]
    if let fileName { fields["file"] = ["name": .string(fileName), "url": "http://x/f", "size": 1, "type": "text/plain"] }
    return .object(fields)
}

/// The plain-text rule over ASCII words, by brute force: every query word is a word of the
/// text or file name (case folded), the last one as a prefix.
private func matches(_ query: String, text: String, fileName: String) throws -> Bool {
    let words = try MessageSearchText.words(query).map { $0.lowercased() }
    guard !words.isEmpty else { return false }
    let haystack = Set(try MessageSearchText.words(text + " " + fileName).map { $0.lowercased() })
    for (index, word) in words.enumerated() {
        let found = index == words.count - 1 ? haystack.contains { $0.hasPrefix(word) } : haystack.contains(word)
        if !found { return false }
    }
    return true
}

private struct Stored {
    var channel: String
    var text: String
    var fileName: String
    var key: MessageKey
    var sender: String
}

@Suite struct MessageSearchCacheTests {
    @Test func theIndexFollowsEveryWriteOfTheMessages() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        let vocabulary = ["apple", "apricot", "Banana", "band", "cherry", "CHAT", "chart", "delta", "dog", "echo"]
        var random = SystemRandomNumberGenerator()
        var seed: UInt64 = 0x5EA4C4
        func next(_ bound: Int) -> Int {
            // A fixed sequence, so a failure can be replayed.
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            _ = random
            return Int((seed >> 33) % UInt64(bound))
        }
        func sentence() -> String { (0..<(1 + next(5))).map { _ in vocabulary[next(vocabulary.count)] }.joined(separator: next(2) == 0 ? " " : ", ") }
        var stored: [Int64: Stored] = [:]
        var deleted: [Int64: Stored] = [:]
        var nextID: Int64 = 1
        var writes: Int64 = 0
        // One write; false when it has to run outside a transaction (clearing vacuums).
        func write(_ step: Int, insideTransaction: Bool) throws -> Bool {
            writes += 1
            switch next(11) {
            case 0...4:
                let id = nextID
                nextID += 1
                let channel = ["c1", "c2", "c3"][next(3)]
                let fileName = next(4) == 0 ? sentence() + ".txt" : ""
                let text = fileName.isEmpty ? sentence() : ""
                let sender = ["u1", "u2"][next(2)]
                try cache.upsertMessage(message(id, channel: channel, text: text, fileName: fileName.isEmpty ? nil : fileName, sender: sender))
                stored[id] = Stored(channel: channel, text: text, fileName: fileName, key: MessageKey(createdAt: base + id / 2, messageID: id), sender: sender)
            case 5, 6:
                guard let id = stored.keys.randomElement(using: &random) else { return true }
                let entry = stored[id]!
                let text = entry.fileName.isEmpty ? sentence() : ""
                try cache.upsertMessage(
                    message(id, channel: entry.channel, text: text, fileName: entry.fileName.isEmpty ? nil : entry.fileName,
                            sender: entry.sender, updatedAt: base + 10_000 + writes))
                stored[id]!.text = text
            case 7:
                guard let id = stored.keys.randomElement(using: &random) else { return true }
                try cache.deleteMessage(messageID: id)
                deleted[id] = stored[id]
                stored[id] = nil
            case 8:
                // A deleted message comes back (a changelog after a delete in the same batch),
                // perhaps with another text.
                guard let id = deleted.keys.randomElement(using: &random), var entry = deleted.removeValue(forKey: id) else { return true }
                if entry.fileName.isEmpty && next(2) == 0 { entry.text = sentence() }
                try cache.upsertMessage(
                    message(id, channel: entry.channel, text: entry.text, fileName: entry.fileName.isEmpty ? nil : entry.fileName,
                            sender: entry.sender, updatedAt: base + 10_000 + writes))
                stored[id] = entry
            case 9:
                // A history reset: the channel's messages up to a time go.
                let channel = ["c1", "c2", "c3"][next(3)]
                let through = base + nextID / 2 - Int64(next(20))
                try cache.truncateHistory(channelURL: channel, through: through)
                for (id, entry) in stored where entry.channel == channel && entry.key.createdAt <= through { deleted[id] = entry }
                stored = stored.filter { $0.value.channel != channel || $0.value.key.createdAt > through }
            default:
                if next(8) == 0 {
                    guard !insideTransaction else { return false }
                    try cache.clear()
                    stored = [:]
                    deleted = [:]
                } else {
                    let channel = ["c1", "c2", "c3"][next(3)]
                    _ = try cache.transaction { () throws(ParleyError) in try cache.removeChannelMessages(url: channel) }
                    stored = stored.filter { $0.value.channel != channel }
                }
            }
            return true
        }
        for step in 0..<400 {
            if next(3) == 0 {
                // Several writes in one transaction: the index is brought up to date at its
                // commit, from the first state of each message it touched and the last.
                let count = 2 + next(6)
                try cache.transaction { () throws(ParleyError) in
                    for _ in 0..<count {
                        do { guard try write(step, insideTransaction: true) else { break } } catch { throw error as! ParleyError }
                    }
                }
            } else {
                _ = try write(step, insideTransaction: false)
            }
            let query = [vocabulary[next(vocabulary.count)], String(vocabulary[next(vocabulary.count)].prefix(2 + next(3)))]
                .prefix(1 + next(2)).joined(separator: " ")
            let expected = try stored.filter { try matches(query, text: $0.value.text, fileName: $0.value.fileName) }
                .sorted { $0.value.key > $1.value.key }.map(\.key)
            let found = try cache.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression(query)!), .first(limit: 10_000))
            #expect(found.map(\.messageID) == expected, "step \(step): '\(query)'")
            if step % 50 == 0 { try cache.checkSearchIndex() }
        }
        try cache.checkSearchIndex()
        #expect(try cache.searchIndexCount() == Int64(stored.count))
    }

    @Test func evictionTakesMessagesOutOfTheIndex() throws {
        // A limit every write exceeds: each eviction removes the least recently used channels.
        let cache = try ChatCache(location: .memory, uncheckedSizeLimitBytes: 1)
        defer { cache.close() }
        for id in Int64(1)...60 {
            try cache.upsertMessage(message(id, channel: "c\(id % 3)", text: "evicted word \(id)"))
        }
        try cache.touchChannel(url: "c1", at: 5)
        let report = try cache.evictIfNeeded(protecting: ["c1"])
        #expect(Set(report.evictedChannelURLs) == ["c0", "c2"])
        let found = try cache.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression("evicted")!), .first(limit: 100))
        let kept: [Int64] = Array((Int64(1)...60).reversed()).filter { $0 % 3 == 1 }
        #expect(found.map(\.messageID) == kept)
        try cache.checkSearchIndex()
        #expect(try cache.searchIndexCount() == 20)
    }

    @Test func plainTextNeverActsAsSyntax() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        try cache.upsertMessage(message(1, text: "Café au lait: NEAR the \"door\" OR window"))
        try cache.upsertMessage(message(2, text: "plain words only", fileName: nil))
        try cache.upsertMessage(message(3, text: "", fileName: "Quarterly-Report_2026.pdf"))
        func search(_ text: String) throws -> [Int64] {
            guard let match = try MessageSearchText.matchExpression(text) else { return [] }
            return try cache.searchMessages(CacheSearchQuery(match: match), .first(limit: 100)).map(\.messageID)
        }
        #expect(try search("cafe") == [1])
        #expect(try search("CAFÉ AU") == [1])
        #expect(try search("near(\"door\"") == [1])
        #expect(try search("door OR") == [1])
        #expect(try search("-window") == [1])
        #expect(try search("\"*") == [])
        #expect(try search("quarterly 2026") == [3])
        #expect(try search("report pd") == [3])
        #expect(try search("plain AND") == [])
        #expect(try search("👍 words") == [2])
        #expect(try search(String(repeating: "a'b:c*(", count: 140)) == [])
        // Advanced expressions: FTS5 syntax, and a syntax error is the caller's.
        #expect(try cache.searchMessages(CacheSearchQuery(match: "door OR plain"), .first(limit: 10)).map(\.messageID) == [2, 1])
        #expect(throws: ParleyError.self) { try cache.searchMessages(CacheSearchQuery(match: "door AND ("), .first(limit: 10)) }
        do {
            _ = try cache.searchMessages(CacheSearchQuery(match: "\"unterminated"), .first(limit: 10))
            Issue.record("a bad expression was accepted")
        } catch {
            #expect(error.code == .invalidArgument)
        }
    }

    @Test func filtersWindowsAndOrders() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        try cache.upsertMessage(message(1, channel: "a", text: "red fox", customType: "t1", sender: "u1", createdAt: base + 1))
        try cache.upsertMessage(message(2, channel: "b", text: "red red red fox", customType: "t2", sender: "u2", createdAt: base + 2))
        try cache.upsertMessage(message(3, channel: "a", text: "a red herring among many other words here", sender: "u2", createdAt: base + 3))
        try cache.upsertMessage(message(4, channel: "a", text: "blue", sender: "u1", createdAt: base + 4))
        var query = CacheSearchQuery(match: try MessageSearchText.matchExpression("red")!)
        #expect(try cache.searchMessages(query, .first(limit: 10)).map(\.messageID) == [3, 2, 1])
        #expect(try cache.searchMessages(query, .olderThan(messageID: 3, limit: 1)).map(\.messageID) == [2])
        #expect(try cache.searchMessages(query, .atOrNewerThan(messageID: 2)).map(\.messageID) == [3, 2])
        #expect(try cache.searchMessages(query, .among([1, 4, 99])).map(\.messageID) == [1])
        query.order = .relevance
        let ranked = try cache.searchMessages(query, .first(limit: 10))
        #expect(ranked.first?.messageID == 2)
        #expect(zip(ranked, ranked.dropFirst()).allSatisfy { $0.score >= $1.score })
        #expect(ranked.allSatisfy { $0.score > 0 })
        query.order = .time
        // Time order does not rank.
        #expect(try cache.searchMessages(query, .first(limit: 10)).map(\.score) == [0, 0, 0])
        query.filter.channelURLs = ["a"]
        #expect(try cache.searchMessages(query, .first(limit: 10)).map(\.messageID) == [3, 1])
        query.filter.senderIDs = ["u2"]
        #expect(try cache.searchMessages(query, .first(limit: 10)).map(\.messageID) == [3])
        query = CacheSearchQuery(match: try MessageSearchText.matchExpression("red")!)
        query.filter.customTypes = ["t1", "t2"]
        query.filter.createdFrom = base + 2
        query.filter.createdTo = base + 2
        #expect(try cache.searchMessages(query, .first(limit: 10)).map(\.messageID) == [2])
        query = CacheSearchQuery(match: try MessageSearchText.matchExpression("fox")!)
        query.filter.highlightStart = "["
        query.filter.highlightEnd = "]"
        #expect(try cache.searchMessages(query, .first(limit: 10)).map(\.snippet) == ["red red red [fox]", "red [fox]"])
    }

    @Test func relevanceRanksWindowsOfTheNewestMatches() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        try cache.upsertMessage(message(1, channel: "a", text: "red fox", createdAt: base + 1))
        try cache.upsertMessage(message(2, channel: "a", text: "red red red fox", createdAt: base + 2))
        try cache.upsertMessage(message(3, channel: "a", text: "a red herring", createdAt: base + 3))
        try cache.upsertMessage(message(4, channel: "a", text: "red red", createdAt: base + 4))
        try cache.upsertMessage(message(5, channel: "a", text: "blue", createdAt: base + 5))
        var query = CacheSearchQuery(match: try MessageSearchText.matchExpression("red")!)
        query.order = .relevance
        // The two newest matches, best first; two older ones below.
        let newest = try cache.formRelevanceWindow(query, size: 2, belowMessageID: nil, limit: 10)
        #expect(newest.window == RelevanceWindow(lowestMessageID: 3, belowMessageID: nil))
        #expect(newest.edge == RelevanceWindowEdge(rankedMatches: 2, olderMatchesExist: true))
        #expect(newest.hits.map(\.messageID) == [4, 3])
        #expect(newest.hits.map(\.score) == [2 * 2.2 / 3.2, 1])
        #expect(try cache.searchMessages(query, .ranked(newest.window, limit: 10)).map(\.messageID) == [4, 3])
        #expect(try cache.searchMessages(query, .ranked(newest.window, limit: 1)).map(\.messageID) == [4])
        let older = try cache.formRelevanceWindow(query, size: 2, belowMessageID: 3, limit: 1)
        #expect(older.window == RelevanceWindow(lowestMessageID: 1, belowMessageID: 3))
        #expect(older.edge == RelevanceWindowEdge(rankedMatches: 2, olderMatchesExist: false))
        #expect(older.hits.map(\.messageID) == [2])
        // The last window holds fewer: it reaches down to the oldest.
        let last = try cache.formRelevanceWindow(query, size: 3, belowMessageID: 3, limit: 10)
        #expect(last.window == RelevanceWindow(lowestMessageID: nil, belowMessageID: 3))
        #expect(last.edge == RelevanceWindowEdge(rankedMatches: 2, olderMatchesExist: false))
        #expect(last.hits.map(\.messageID) == [2, 1])
        // A new match joins the newest window; one below it makes older matches exist there.
        try cache.upsertMessage(message(6, channel: "a", text: "red", createdAt: base + 6))
        #expect(try cache.relevanceWindowEdge(query, newest.window) == RelevanceWindowEdge(rankedMatches: 3, olderMatchesExist: true))
        #expect(try cache.relevanceWindowEdge(query, last.window) == RelevanceWindowEdge(rankedMatches: 2, olderMatchesExist: false))
    }

    @Test func aCacheWrittenBeforeTheIndexIsIndexedWhenOpened() throws {
        let path = "/tmp/parley-search-migration-\(getpid()).sqlite"
        func remove() { for suffix in ["", "-wal", "-shm", ".outbox"] { unlink(path + suffix) } }
        defer { remove() }
        remove()
        do {
            let old = try SQLiteDatabase(location: .file(path: path), migrations: Array(ChatCache.migrations.prefix(7)))
            for id in Int64(1)...3 {
                _ = try old.statement("""
                    INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                          parent_message_id, json) VALUES (?1, 'c', ?2, 0, '', 'MESG', '', 'u', 0, ?3)
                    """).run([.integer(id), .integer(base + id), .text(message(id, text: "old message \(id)").canonicalText)])
            }
            // A damaged text is indexed as empty, and does not stop the migration.
            _ = try old.statement("""
                INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                      parent_message_id, json) VALUES (4, 'c', ?1, 0, '', 'MESG', '', 'u', 0, '{not json')
                """).run([.integer(base + 4)])
            old.close()
        }
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
        let found = try cache.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression("old mess")!), .first(limit: 10))
        #expect(found.map(\.messageID) == [3, 2, 1])
        try cache.checkSearchIndex()
        _ = try cache.deleteMessage(messageID: 4)
        try cache.checkSearchIndex()
    }

    @Test func aCacheOfVersion8KeepsItsIndexAndEverySearchSeesEveryCommit() throws {
        let path = "/tmp/parley-search-migration8-\(getpid()).sqlite"
        func remove() { for suffix in ["", "-wal", "-shm", ".outbox"] { unlink(path + suffix) } }
        defer { remove() }
        remove()
        do {
            // Version 8 indexed each write from its triggers.
            let old = try SQLiteDatabase(location: .file(path: path), migrations: Array(ChatCache.migrations.prefix(8)))
            for id in Int64(1)...4 {
                _ = try old.statement("""
                    INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                          parent_message_id, json, search_text) VALUES (?1, 'c', ?2, 0, '', 'MESG', '', 'u', 0, ?3, ?4)
                    """).run([.integer(id), .integer(base + id), .text(message(id, text: "kept words \(id)").canonicalText),
                              .text("kept words \(id)")])
            }
            old.close()
        }
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        func search(_ text: String) throws -> [Int64] {
            try cache.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression(text)!), .first(limit: 100)).map(\.messageID)
        }
        #expect(try search("kept") == [4, 3, 2, 1])
        try cache.upsertMessage(message(2, channel: "c", text: "changed words", createdAt: base + 2, updatedAt: 5))
        _ = try cache.deleteMessage(messageID: 3)
        #expect(try search("kept") == [4, 1])
        #expect(try search("changed") == [2])
        try cache.checkSearchIndex()

        // A write outside any transaction is noted by the triggers; the next search indexes it.
        _ = try cache.database.statement("UPDATE messages SET search_text = 'late text' WHERE message_id = 4").run()
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 1)
        #expect(try search("late") == [4])
        #expect(try search("kept") == [1])
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 0)
        try cache.checkSearchIndex()

        // Commits leave fewer than a batch of notes waiting; a commit that reaches the batch
        // applies them all. Either way a search sees every committed text.
        let batch = Int(ChatCache.searchIndexBatch)
        func count(_ text: String) throws -> Int {
            try cache.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression(text)!), .first(limit: 1000)).count
        }
        for id in 100..<(100 + batch - 1) {
            try cache.upsertMessage(message(Int64(id), channel: "c", text: "batched \(id)", createdAt: base + Int64(id)))
        }
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == Int64(batch - 1))
        _ = try cache.deleteMessage(messageID: 100)
        try cache.upsertMessage(message(101, channel: "c", text: "rewritten", createdAt: base + 101, updatedAt: 5))
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == Int64(batch - 1))
        try cache.upsertMessage(message(Int64(100 + batch), channel: "c", text: "batched last", createdAt: base + 500))
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 0)
        try cache.checkSearchIndex()
        #expect(try count("batched") == batch - 2)
        #expect(try search("rewritten") == [101])
        try cache.upsertMessage(message(Int64(101 + batch), channel: "c", text: "waiting", createdAt: base + 501))
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 1)
        #expect(try search("waiting") == [Int64(101 + batch)])
        #expect(try count("batched") == batch - 2)

        // While searches follow every change, each commit applies its own notes.
        cache.appliesSearchNotesAtEveryCommit = true
        try cache.upsertMessage(message(Int64(102 + batch), channel: "c", text: "followed", createdAt: base + 502))
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 0)
        cache.appliesSearchNotesAtEveryCommit = false
        try cache.upsertMessage(message(Int64(103 + batch), channel: "c", text: "waiting again", createdAt: base + 503))
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 1)

        // The read-only connection cannot apply notes: it refuses to search while any wait.
        let reader = try ChatCache(readerOf: path)
        defer { reader.close() }
        let refused = #expect(throws: ParleyError.self) {
            try reader.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression("waiting")!), .first(limit: 10))
        }
        #expect(refused?.code == .invalidState)
        #expect(try search("again") == [Int64(103 + batch)])
        #expect(try reader.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression("again")!), .first(limit: 10))
            .map(\.messageID) == [Int64(103 + batch)])

        // A transaction that rolls back leaves neither the messages nor the notes.
        do {
            try cache.transaction { () throws(ParleyError) in
                try cache.upsertMessage(message(9, channel: "c", text: "rolled back", createdAt: base + 9))
                throw ParleyError.invalidState("undo")
            }
        } catch {}
        #expect(try search("rolled").isEmpty)
        #expect(try cache.scalarInt("SELECT count(*) FROM message_search_changes") == 0)
        try cache.checkSearchIndex()
    }

    /// One definition of a word: the words of any text, typed as a query, are exactly the
    /// words the index holds for a message of that text, in order; so every word of a
    /// message, typed, finds it. The samples are the kinds of text whose words the Unicode
    /// tables of Swift and of SQLite's tokenizer tell apart.
    @Test func aQueryHasTheWordsTheIndexHoldsForTheSameText() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        var schema = ""
        try cache.database.statement("SELECT sql FROM sqlite_master WHERE name = 'message_search'").rows { schema = $0.string(0) ?? "" }
        #expect(schema.contains("tokenize = '\(IndexTokenizer.specification)'"), "\(schema)")
        let samples = [
            "circled \u{24D0} marker probe", "stru\u{336}ck through", "re\u{301}sume\u{301} r\u{E9}sum\u{E9}",
            "thumbs \u{1F44D}\u{1F3FD} up", "family \u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467} photo",
            "coder \u{1F469}\u{1F3FD}\u{200D}\u{1F4BB} at work", "vithkuqi \u{10570}\u{10597} kawi \u{11F04}",
            "\u{3AC}\u{3BB}\u{3C6}\u{3B1} \u{1F08}\u{3B8}\u{1FC6}\u{3BD}\u{3B1}\u{3B9}", "\u{451}\u{43B}\u{43A}\u{430} \u{439} \u{438}\u{306}",
            "don't C++ a_b x\u{B2} \u{E000}private", "\u{301}leading mark and trailing\u{336}", "",
        ]
        for (index, text) in samples.enumerated() {
            try cache.upsertMessage(message(Int64(index + 1), text: text))
        }
        #expect(try cache.searchIndexCount() == Int64(samples.count))  // the waiting notes applied
        try cache.database.execute("CREATE VIRTUAL TABLE temp.indexed USING fts5vocab(main, message_search, instance)")
        var indexed: [Int64: [String]] = [:]
        try cache.database.statement("SELECT doc, term FROM temp.indexed ORDER BY doc, offset").rows { row in
            indexed[row.int64(0), default: []].append(row.string(1) ?? "")
        }
        for (index, text) in samples.enumerated() {
            let words = try MessageSearchText.words(text)
            #expect(words == indexed[Int64(index + 1)] ?? [], "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
            for word in Set(words) {
                let found = try cache.searchMessages(CacheSearchQuery(match: MessageSearchText.matchExpression(word)!), .first(limit: 100))
                #expect(found.map(\.messageID).contains(Int64(index + 1)), "'\(word)' does not find '\(text)'")
            }
        }
        // The words the two tables tell apart, typed around others: the query holds only the
        // index's words (before, a symbol Swift counts as a letter made an empty phrase).
        #expect(try MessageSearchText.words("circled \u{24D0} marker") == ["circled", "marker"])
        #expect(try MessageSearchText.matchExpression("\u{24D0} Marker") == "\"Marker\" *")
        #expect(try MessageSearchText.matchExpression("\u{24D0}") == nil)
        #expect(try MessageSearchText.words("\u{1F44D}\u{1F3FD}") == ["\u{1F3FD}"])
        #expect(try MessageSearchText.words("stru\u{336}ck") == ["stru", "ck"])
        #expect(try MessageSearchText.matchExpression("R\u{E9}sum\u{E9} stru\u{336}ck") == "\"R\u{E9}sum\u{E9}\" AND \"stru\" AND \"ck\" *")
    }
}
