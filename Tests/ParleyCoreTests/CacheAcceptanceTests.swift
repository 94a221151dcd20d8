import Glibc
import Testing
@testable import ParleyCore

// The cache rules the client engine promises: files from an older schema are migrated with
// their data, unusable files are replaced (never fatal), eviction removes whole channels
// least recently read first and never pending or failed messages.

private func temporaryDirectory() throws -> String { try temporaryDirectory(prefix: "parley-cache-test") }

/// `padding` bytes go into `data`: the message's size, not its text (which the search index
/// keeps a second copy of, ChatCache+Schema.swift version 8).
private func message(_ id: Int64, channel: String, text: String = "hello", padding: Int = 0) -> JSONValue {
    [
        "message_id": .int(id), "channel_url": .string(channel), "created_at": .int(1_700_000_000_000 + id),
        "updated_at": 0, "type": "MESG", "message": .string(text), "data": .string(String(repeating: "x", count: padding)),
        "req_id": .string("r\(id)"), "user": ["user_id": "u1"], "custom_type": "", "parent_message_id": 0,
    ]
}

private func channel(_ url: String) -> JSONValue {
    ["channel_url": .string(url), "name": .string(url), "created_at": 1_700_000_000_000, "custom_type": ""]
}

@Suite struct CacheAcceptanceTests {
    @Test func aVersion1FileIsMigratedWithItsData() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        // A file as the first released schema wrote it.
        let old = try SQLiteDatabase(location: .file(path: path), migrations: [ChatCache.migrations[0]])
        #expect(old.userVersion == 1)
        let stored = message(7, channel: "c1").canonicalText
        try old.statement("""
            INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                  parent_message_id, json)
            VALUES (7, 'c1', 1700000000007, 0, 'r7', 'MESG', '', 'u1', 0, ?1)
            """).run([.text(stored)])
        try old.statement("INSERT INTO meta (key, value) VALUES ('last_event_id', '41')").run()
        old.close()

        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.recovery == nil)
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
        #expect(try cache.message(id: 7)?.json == stored)
        #expect(try cache.metaValue("last_event_id") == "41")
        // The tables version 2 added work.
        try cache.insertPendingMessage(
            ["req_id": "p1", "channel_url": "c1", "created_at": 1_700_000_000_100, "message": "later"],
            outbox: OutboxRequest(kind: "user", requestJSON: "{}"))
        #expect(try cache.outboxEntries().map(\.reqID) == ["p1"])
    }

    @Test func aCorruptFileIsMovedAsideAndReplaced() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let garbage = Array("definitely not an SQLite database ".utf8) + [UInt8](repeating: 0xAB, count: 8192)
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(descriptor >= 0)
        _ = garbage.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)

        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        let recovery = try #require(cache.recovery)
        #expect(recovery.movedTo.hasPrefix(path + ".corrupt-"))
        #expect(access(recovery.movedTo, F_OK) == 0)
        #expect(try cache.channelCount() == 0)
        try cache.upsertChannel(channel("c1"))
        #expect(try cache.channel(url: "c1") != nil)
    }

    /// Opening a large file reads its schema only (its cost does not grow with the file); the
    /// full walk (`quickCheck`) finds damage deep inside it, and a file marked damaged is
    /// replaced at the next open with its unsent messages carried over.
    @Test func aLargeFileOpensWithoutAFullWalkAndItsDamageIsFoundLater() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        do {
            let cache = try ChatCache(location: .file(path: path))
            #expect(!cache.integrityCheckDeferred)  // a new, small file: fully checked
            try cache.upsertChannel(channel("c1"))
            try cache.database.execute("""
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 18000)
                INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                      parent_message_id, is_reply_to_channel, json)
                SELECT i, 'c1', i, 0, '', 'MESG', '', 'u1', 0, 0, printf('{"pad":"%.4000c"}', 'x') FROM n
                """)
            _ = try cache.insertPendingMessage(
                ["req_id": "unsent", "channel_url": "c1", "created_at": 1, "message": "keep me", "sending_status": "pending"],
                outbox: OutboxRequest(kind: "user", requestJSON: #"{"message":"keep me","message_type":"MESG","req_id":"unsent"}"#))
            cache.close()
        }
        var pageCount: Int64 = 0
        do {
            let started = Engine.nowMs()
            let cache = try ChatCache(location: .file(path: path))
            let elapsed = Engine.nowMs() - started
            #expect(cache.integrityCheckDeferred && cache.recovery == nil)
            #expect(elapsed < 1_000, "opening took \(elapsed) ms")
            pageCount = try cache.scalarInt("PRAGMA page_count")
            cache.close()
        }
        #expect(SQLiteDatabase.quickCheck(path: path) == nil)
        // Garbage in a page near the end (message rows, far from the schema).
        let descriptor = open(path, O_WRONLY)
        let garbage = [UInt8](repeating: 0xAB, count: 4096)
        _ = garbage.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, off_t((pageCount - 20) * 4096)) }
        close(descriptor)
        let problem = try #require(SQLiteDatabase.quickCheck(path: path))
        #expect(!problem.isEmpty)
        do {
            let cache = try ChatCache(location: .file(path: path))  // still opens: the walk is deferred
            #expect(cache.recovery == nil)
            cache.database.markDamaged("quick_check: \(problem)")
            cache.close()
        }
        let replaced = try ChatCache(location: .file(path: path))
        defer { replaced.close() }
        #expect(replaced.recovery != nil)
        #expect(replaced.salvage?.restoredReqIDs == ["unsent"])
        #expect(try replaced.localMessages(channelURL: "c1").map(\.reqID) == ["unsent"])
        #expect(try replaced.outboxEntries().map(\.reqID) == ["unsent"])
    }

    /// The deferred full check runs at most once a day per file (its marker's age), on a
    /// thread at the lowest CPU priority.
    @Test func theDeferredCheckIsSkippedWhileItsMarkerIsFreshAndRunsAtTheLowestPriority() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let marker = directory + "/user.sqlite" + SQLiteDatabase.checkedMarkerSuffix
        #expect(!SQLiteFiles.modifiedWithin(marker, seconds: SQLiteDatabase.fullCheckIntervalSeconds))
        SQLiteFiles.writeSmallFile(marker, "quick_check ok")
        #expect(SQLiteFiles.modifiedWithin(marker, seconds: SQLiteDatabase.fullCheckIntervalSeconds))
        var old = utimbuf(actime: time(nil) - 2 * 86_400, modtime: time(nil) - 2 * 86_400)
        #expect(utime(marker, &old) == 0)
        #expect(!SQLiteFiles.modifiedWithin(marker, seconds: SQLiteDatabase.fullCheckIntervalSeconds))

        let seen = Locked<Int32>(-100)
        let thread = try NativeThread.start(name: "nice-test") {
            SQLiteFiles.lowerThisThreadsPriority()
            errno = 0
            let value = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
            seen.withLock { $0 = value }
        }
        thread.join()
        #expect(seen.withLock { $0 } == 19)
        // The caller's own priority is untouched.
        #expect(getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0) != 19)
    }

    @Test func aFileFromANewerVersionIsMovedAside() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        do {
            let cache = try ChatCache(location: .file(path: path))
            try cache.database.execute("PRAGMA user_version = 999")
            cache.close()
        }
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.recovery?.movedTo.hasPrefix(path + ".newer-") == true)
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
    }

    @Test func evictionTakesWholeChannelsLeastRecentlyReadFirstAndKeepsLocalMessages() throws {
        // A small limit so that a few hundred KB of messages exceed it.
        let cache = try ChatCache(location: .memory, uncheckedSizeLimitBytes: 600_000)
        defer { cache.close() }
        var id: Int64 = 0
        for url in ["old", "recent", "never-read"] {
            try cache.upsertChannel(channel(url))
            for _ in 0..<60 {
                id += 1
                try cache.upsertMessage(message(id, channel: url, padding: 4000))
            }
        }
        try cache.touchChannel(url: "old", at: 1_000)
        try cache.touchChannel(url: "recent", at: 2_000)
        try cache.insertPendingMessage(
            ["req_id": "keep-me", "channel_url": "never-read", "created_at": 1_800_000_000_000, "message": "pending"],
            outbox: OutboxRequest(kind: "user", requestJSON: "{}"))
        try cache.markFailed(reqID: "keep-me", error: ParleyError(.network, "offline"), retryable: true)
        #expect(try cache.usedBytes() > cache.sizeLimitBytes)

        let report = try cache.evictIfNeeded()
        // Never-read goes first, then the least recently read; the most recent survives.
        #expect(report.evictedChannelURLs.first == "never-read")
        #expect(!report.evictedChannelURLs.contains("recent"))
        #expect(report.usedBytesAfter <= cache.sizeLimitBytes)
        #expect(try cache.messageCount(channelURL: "never-read") == 0)
        #expect(try cache.messageCount(channelURL: "recent") == 60)
        // Whole channels only: an evicted channel keeps no stray messages.
        for url in report.evictedChannelURLs {
            #expect(try cache.messageCount(channelURL: url) == 0)
        }
        // The failed message, its outbox row and the channel rows stay.
        #expect(try cache.localMessages(channelURL: "never-read").map(\.reqID) == ["keep-me"])
        #expect(try cache.outboxEntries().map(\.reqID) == ["keep-me"])
        #expect(try cache.channelCount() == 3)
        // Under the limit, nothing happens.
        #expect(try cache.evictIfNeeded().evictedChannelURLs.isEmpty)
    }

    @Test func protectedChannelsAreNotEvicted() throws {
        let cache = try ChatCache(location: .memory, uncheckedSizeLimitBytes: 300_000)
        defer { cache.close() }
        var id: Int64 = 0
        for url in ["a", "b"] {
            for _ in 0..<60 {
                id += 1
                try cache.upsertMessage(message(id, channel: url, padding: 4000))
            }
        }
        let report = try cache.evictIfNeeded(protecting: ["a"])
        #expect(report.evictedChannelURLs == ["b"])
        #expect(try cache.messageCount(channelURL: "a") == 60)
    }

    @Test func aVersion3FileKeepsItsChannelsMembersAsRows() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let old = try SQLiteDatabase(location: .file(path: path), migrations: Array(ChatCache.migrations.prefix(3)))
        let members: JSONValue = [["user_id": "zed", "nickname": "a", "read_ts": 5], ["user_id": "amy", "nickname": "b\"}", "read_ts": 0]]
        var full = channel("c1")
        full = .object((full.objectValue ?? [:]).merging(["members": members, "metadata": ["k": "v"]]) { $1 })
        for (url, json) in [("c1", full.canonicalText), ("c2", channel("c2").canonicalText)] {
            try old.statement("""
                INSERT INTO channels (channel_url, created_at, name, custom_type, chronological_key, activity_rank, activity_key, json)
                VALUES (?1, 1700000000000, ?1, '', -1700000000000, 1, -1700000000000, ?2)
                """).run([.text(url), .text(json)])
        }
        old.close()

        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
        // Read back exactly as stored before, members in their order, from rows of their own.
        #expect(try cache.channel(url: "c1")?.json == full.canonicalText)
        #expect(try cache.channel(url: "c1", withMembers: false)?.json.contains("members") == false)
        #expect(try cache.channelMemberTexts(url: "c1") == members.arrayValue?.map(\.canonicalText))
        #expect(try cache.channel(url: "c2")?.json == channel("c2").canonicalText)
        #expect(try cache.channelMemberTexts(url: "c2") == nil)
    }

    /// Version 7 takes the id of the poll a stored message carries into a column: the
    /// catch-up's poll changelogs and the poll events find the message by it. A damaged text
    /// is left with none, and later writes of its row still work.
    @Test func aVersion6FileKnowsTheMessagesThatCarryPolls() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let old = try SQLiteDatabase(location: .file(path: path), migrations: Array(ChatCache.migrations.prefix(6)))
        let rows: [(Int64, String, String)] = [
            (1, "c1", #"{"message_id":1,"poll":{"id":7,"title":"t"}}"#), (2, "c1", #"{"message_id":2}"#),
            (3, "c2", #"{"message_id":3,"poll":{"id":"8"}}"#), (4, "c2", #"{"message_id":4,"poll":{"id":9"#),
        ]
        for (id, url, json) in rows {
            try old.statement("""
                INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                      parent_message_id, is_reply_to_channel, json)
                VALUES (?1, ?2, ?1, 0, '', 'MESG', '', 'u1', 0, 0, ?3)
                """).run([.integer(id), .text(url), .text(json)])
        }
        old.close()
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
        #expect(try cache.channelsWithPolls() == ["c1"])
        #expect(try cache.messageID(carryingPoll: 7, channelURL: "c1") == 1)
        #expect(try cache.messageID(carryingPoll: 7, channelURL: "c2") == nil)
        #expect(try cache.messageID(carryingPoll: 9, channelURL: "c2") == nil)
        // A message written now carries its poll's id; the damaged row can still be replaced.
        try cache.upsertMessage(["message_id": 4, "channel_url": "c2", "created_at": 4, "updated_at": 1,
                                 "poll": ["id": 9, "title": "again"]])
        #expect(try cache.messageID(carryingPoll: 9, channelURL: "c2") == 4)
        #expect(try cache.channelsWithPolls() == ["c1", "c2"])
    }

    /// Version 10 keeps where each message's optional members lie beside its text. Rows of
    /// a version 9 file have none: a view cuts them by scanning, with the same result, and
    /// the next write of a row adds them.
    @Test func aVersion9FilePresentsItsMessagesAndGainsSpansOnWrite() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let old = try SQLiteDatabase(location: .file(path: path), migrations: Array(ChatCache.migrations.prefix(9)))
        let message: JSONValue = ["message_id": 1, "channel_url": "c1", "created_at": 10, "updated_at": 0, "message": "hi",
                                  "reactions": [["key": "ok", "user_ids": ["u1"]]], "sorted_metaarray": [], "user": ["user_id": "u1"]]
        try old.statement("""
            INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                  parent_message_id, is_reply_to_channel, json, json_check)
            VALUES (1, 'c1', 10, 0, '', 'MESG', '', 'u1', 0, 0, ?1, ?2)
            """).run([.text(message.canonicalText), .integer(StoredTextCheck.value(of: message.canonicalText))])
        old.close()
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
        let read = try #require(try cache.message(id: 1))
        #expect(read.json == message.canonicalText)
        #expect(read.optionalMembers == nil)
        let params = MessageListParams()
        let presented = MessageItem(stored: read).presented(params, omitting: params.omittedMembers)
        #expect(presented.canonicalText == params.presented(message).canonicalText)
        try cache.upsertMessages([message], force: true)
        #expect(try cache.message(id: 1)?.optionalMembers == nil)  // the same text: not written again
        var edited = message
        if case .object(var fields) = edited {
            fields["updated_at"] = 5
            edited = .object(fields)
        }
        try cache.upsertMessages([edited])
        let written = try #require(try cache.message(id: 1))
        #expect(written.optionalMembers == OptionalMemberSpans.scanning(edited.canonicalText))
        #expect(written.optionalMembers != nil)
        #expect(MessageItem(stored: written).presented(params, omitting: params.omittedMembers).canonicalText
            == params.presented(edited).canonicalText)
    }

    @Test func aVersion4FileSortsNamesByTheirNormalForm() throws {
        let directory = try temporaryDirectory()
        defer { removeTree(directory) }
        let path = directory + "/user.sqlite"
        let old = try SQLiteDatabase(location: .file(path: path), migrations: Array(ChatCache.migrations.prefix(4)))
        // Names that differ only in normalization, stored by a version that sorted raw bytes.
        for (url, name) in [("u1", "e\u{301}b"), ("u2", "\u{e9}a"), ("u3", "f"), ("u4", "A\u{308}"), ("u5", "ea")] {
            try old.statement("""
                INSERT INTO channels (channel_url, created_at, name, custom_type, chronological_key, activity_rank, activity_key, json)
                VALUES (?1, 1700000000000, ?2, '', -1700000000000, 1, -1700000000000, ?3)
                """).run([.text(url), .text(name), .text(channel(url).canonicalText)])
        }
        old.close()
        let cache = try ChatCache(location: .file(path: path))
        defer { cache.close() }
        #expect(cache.schemaVersion == ChatCache.migrations.last?.version)
        // NFC bytes: "A\u{308}" is "\u{c4}" (C3 84), "\u{e9}a" and "e\u{301}b" start C3 A9.
        let expected = ["u5", "u3", "u4", "u2", "u1"]
        #expect(try cache.channels(order: .channelNameAlphabetical, limit: 10).map(\.channelURL) == expected)
        #expect(try cache.channels(sort: .channelName, after: nil, limit: 10).map(\.channelURL) == expected)
    }

    @Test func namesAndMetadataValuesSortByTheirNormalFormThenURL() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        // Canonically equal names (and values) tie, whatever their form, and are ordered by URL.
        let entries: [(url: String, name: String, rank: String?)] = [
            ("c6", "\u{e9}a", "A\u{30a}"), ("c1", "e\u{301}a", "\u{212b}"), ("c5", "A\u{308}", nil), ("c2", "B", "\u{c5}"),
            ("c4", "f", "b"), ("c3", "\u{c4}", "e\u{301}"),
        ]
        for entry in entries {
            var fields = channel(entry.url).objectValue ?? [:]
            fields["name"] = .string(entry.name)
            if let rank = entry.rank { fields["metadata"] = ["rank": .string(rank)] }
            try cache.upsertChannel(.object(fields))
        }
        let byName = ["c2", "c4", "c3", "c5", "c1", "c6"]
        let byRank = ["c4", "c1", "c2", "c6", "c3", "c5"]
        for limit in 1...7 {
            for (sort, expected) in [(ChannelListSort.channelName, byName), (.metadataValue(key: "rank"), byRank)] {
                var walked: [String] = []
                var after: [SQLiteValue]?
                var query = GroupChannelListQuery()
                query.order = sort == .channelName ? .channelNameAlphabetical : .metadataValueAlphabetical
                query.metadataOrderKey = sort == .channelName ? nil : "rank"
                while true {
                    let page = try cache.channels(sort: sort, after: after, limit: limit)
                    guard let last = page.last else { break }
                    walked += page.map(\.channelURL)
                    after = query.sortKey(try JSONValue.parse(last.json)).elements.map(\.sqliteValue)
                }
                #expect(walked == expected, "\(sort) limit \(limit)")
            }
        }
    }

    @Test func membersAreStoredPerRowAndChangedOneAtATime() throws {
        let cache = try ChatCache(location: .memory)
        defer { cache.close() }
        let alice: JSONValue = ["user_id": "alice", "read_ts": 1]
        let bob: JSONValue = ["user_id": "bob", "read_ts": 2]
        func with(_ members: [JSONValue]?, name: String = "c") -> JSONValue {
            var fields = channel("c1").objectValue ?? [:]
            fields["name"] = .string(name)
            if let members { fields["members"] = .array(members) }
            return .object(fields)
        }
        // A render without members stores none; changed members of an unknown list are not guessed.
        #expect(try cache.upsertChannel(with(nil)) == .inserted)
        #expect(try cache.updateChannelMembers(url: "c1", [alice]) == false)
        #expect(try cache.channel(url: "c1")?.json == with(nil).canonicalText)
        // A full list is stored; the same again is no change; a render without members keeps it.
        #expect(try cache.upsertChannel(with([bob, alice])) == .updated)
        #expect(try cache.upsertChannel(with([bob, alice])) == .unchanged)
        #expect(try cache.upsertChannel(with(nil, name: "renamed")) == .updated)
        #expect(try cache.channel(url: "c1")?.json == with([bob, alice], name: "renamed").canonicalText)
        // One member changes in place (its position kept); a non-member is not added.
        let newerAlice: JSONValue = ["user_id": "alice", "read_ts": 9]
        #expect(try cache.updateChannelMembers(url: "c1", [newerAlice, ["user_id": "carol"]]) == true)
        #expect(try cache.updateChannelMembers(url: "c1", [newerAlice]) == false)
        #expect(try cache.channel(url: "c1")?.json == with([bob, newerAlice], name: "renamed").canonicalText)
        // A new full list replaces the old one, order included; an empty list is a list.
        #expect(try cache.upsertChannel(with([alice])) == .updated)
        #expect(try cache.channelMemberTexts(url: "c1") == [alice.canonicalText])
        #expect(try cache.upsertChannel(with([])) == .updated)
        #expect(try cache.channel(url: "c1")?.json == with([]).canonicalText)
        // Malformed members are refused with a clear error; the stored channel stays.
        #expect(throws: ParleyError.self) { try cache.upsertChannel(with([["nickname": "no id"]], name: "bad")) }
        #expect(throws: ParleyError.self) { try cache.updateChannelMembers(url: "c1", [.string("x")]) }
        #expect(try cache.channel(url: "c1")?.json == with([]).canonicalText)
        // Deleting the channel deletes its members.
        #expect(try cache.upsertChannel(with([alice, bob])) == .updated)
        try cache.deleteChannel(url: "c1")
        #expect(try cache.scalarInt("SELECT count(*) FROM channel_members") == 0)
    }
}
