import Testing
@testable import ParleyCore

// ChatCache on its own (in memory): keyset message pages with ties and filters, the
// pass-through JSON page, newer-only upserts, chunk merging and the newest-end rule,
// channel list pages, tokens, and what removing a channel takes with it.

private let base: Int64 = 1_700_000_000_000

private func message(
    _ id: Int64, at createdAt: Int64? = nil, channel: String = "c1", type: String = "MESG",
    customType: String = "", sender: String = "u1", parent: Int64 = 0, replyToChannel: Bool = false,
    updatedAt: Int64 = 0, text: String? = nil, reqID: String? = nil
) -> JSONValue {
    [
        "message_id": .int(id), "channel_url": .string(channel), "created_at": .int(createdAt ?? base + id),
        "updated_at": .int(updatedAt), "type": .string(type), "message": .string(text ?? "m\(id)"),
        "req_id": .string(reqID ?? "r\(id)"), "user": ["user_id": .string(sender)], "custom_type": .string(customType),
        "parent_message_id": .int(parent), "is_reply_to_channel": .bool(replyToChannel),
    ]
}

private func key(_ id: Int64, at createdAt: Int64? = nil) -> MessageKey {
    MessageKey(createdAt: createdAt ?? base + id, messageID: id)
}

@Suite struct ChatCacheTests {
    private func makeCache() throws -> ChatCache { try ChatCache(location: .memory) }

    @Test func pagesAreKeysetOrderedWithTiesBrokenByMessageID() throws {
        let cache = try makeCache()
        defer { cache.close() }
        // Ids 1...9; 4, 5 and 6 share one timestamp.
        for id in Int64(1)...9 {
            try cache.upsertMessage(message(id, at: (4...6).contains(id) ? base + 4 : base + id))
        }
        try cache.upsertMessage(message(100, channel: "other"))
        let tie = base + 4
        #expect(try cache.messages(channelURL: "c1", before: .newest, limit: 3).map(\.messageID) == [7, 8, 9])
        #expect(try cache.messages(channelURL: "c1", before: key(6, at: tie), limit: 10).map(\.messageID) == [1, 2, 3, 4, 5])
        #expect(try cache.messages(channelURL: "c1", before: key(6, at: tie), inclusive: true, limit: 2).map(\.messageID) == [5, 6])
        #expect(try cache.messages(channelURL: "c1", after: key(4, at: tie), limit: 3).map(\.messageID) == [5, 6, 7])
        #expect(try cache.messages(channelURL: "c1", after: key(4, at: tie), inclusive: true, limit: 1).map(\.messageID) == [4])
        #expect(try cache.messages(channelURL: "c1", after: .oldest, limit: 100).map(\.messageID) == Array(1...9))
        #expect(try cache.messages(channelURL: "c1", before: .newest, limit: 0).isEmpty)
        #expect(throws: ParleyError.self) { try cache.messages(channelURL: "c1", before: .newest, limit: -1) }
        // Walking backwards page by page visits every message once.
        var seen: [Int64] = []
        var cursor = MessageKey.newest
        while true {
            let page = try cache.messages(channelURL: "c1", before: cursor, limit: 2)
            guard let first = page.first else { break }
            seen.insert(contentsOf: page.map(\.messageID), at: 0)
            cursor = MessageKey(createdAt: first.createdAt, messageID: first.messageID)
        }
        #expect(seen == Array(1...9))
    }

    @Test func thePassThroughPageMatchesTheObjectPage() throws {
        let cache = try makeCache()
        defer { cache.close() }
        for id in Int64(1)...40 {
            try cache.upsertMessage(message(id, at: base + id / 3, text: "text \(id) \"quoted\" é"))
        }
        for cursor in [MessageKey.newest, key(30, at: base + 10), key(2, at: base), MessageKey.oldest] {
            for limit in [1, 7, 100] {
                var buffer: [UInt8] = [UInt8(ascii: "[")]
                let count = try cache.appendMessageTexts(channelURL: "c1", before: cursor, limit: limit, to: &buffer)
                buffer.append(UInt8(ascii: "]"))
                let expected = try cache.messages(channelURL: "c1", before: cursor, limit: limit)
                #expect(count == expected.count)
                #expect(String(decoding: buffer, as: UTF8.self) == "[" + expected.map(\.json).joined(separator: ",") + "]")
                // And it is valid JSON holding the same messages.
                let parsed = try JSONValue.parse(buffer)
                #expect(parsed.arrayValue?.compactMap { $0["message_id"]?.int64Value } == expected.map(\.messageID))
            }
        }
        var empty: [UInt8] = []
        #expect(try cache.appendMessageTexts(channelURL: "none", before: .newest, limit: 5, to: &empty) == 0)
        #expect(empty.isEmpty)
        #expect(throws: ParleyError.self) { try cache.appendMessageTexts(channelURL: "c1", before: .newest, limit: -1, to: &empty) }
    }

    @Test func localMessagesFollowInCreationOrder() throws {
        let cache = try makeCache()
        defer { cache.close() }
        try cache.upsertMessage(message(1))
        for name in ["a", "b", "c"] {
            try cache.insertPendingMessage(
                ["req_id": .string("local-\(name)"), "channel_url": "c1", "created_at": .int(base), "message": .string(name)],
                outbox: OutboxRequest(kind: "user", requestJSON: "{}"))
        }
        try cache.markFailed(reqID: "local-b", error: ParleyError(.network, "offline"), retryable: true)
        var buffer: [UInt8] = [UInt8(ascii: "[")]
        try cache.appendMessageTexts(channelURL: "c1", before: .newest, limit: 10, to: &buffer)
        #expect(try cache.appendLocalMessageTexts(channelURL: "c1", to: &buffer) == 3)
        buffer.append(UInt8(ascii: "]"))
        let parsed = try JSONValue.parse(buffer)
        // Local messages carry message_id 0 until the server accepts them.
        let identities = parsed.arrayValue?.map { item -> String in
            let id = item["message_id"]?.int64Value ?? 0
            return id > 0 ? String(id) : item["req_id"]?.stringValue ?? "?"
        }
        #expect(identities == ["1", "local-a", "local-b", "local-c"])
        #expect(parsed.arrayValue?[2]["sending_status"]?.stringValue == "failed")
        #expect(try cache.localMessages(channelURL: "c1", status: .pending).map(\.reqID) == ["local-a", "local-c"])
        // The server's copy replaces the local one (same req_id) and takes its outbox row.
        let accepted = message(2, reqID: "local-a")
        #expect(try cache.upsertMessage(accepted) == .replacedLocal(reqID: "local-a"))
        #expect(try cache.localMessages(channelURL: "c1").map(\.reqID) == ["local-b", "local-c"])
        #expect(try cache.outboxEntries().map(\.reqID) == ["local-b", "local-c"])
        // The drain reads only the oldest.
        #expect(try cache.outboxEntries(channelURL: "c1", limit: 1).map(\.reqID) == ["local-b"])
        #expect(try cache.outboxEntries(channelURL: "other", limit: 1).isEmpty)
    }

    @Test func filtersSelectByTypeCustomTypeSenderAndReplies() throws {
        let cache = try makeCache()
        defer { cache.close() }
        try cache.upsertMessages([
            message(1),
            message(2, type: "FILE", customType: "photo"),
            message(3, type: "ADMM", sender: ""),
            message(4, customType: "photo", sender: "u2"),
            message(5, sender: "u2", parent: 1),
            message(6, parent: 1, replyToChannel: true),
        ])
        func ids(_ filter: MessageFilter) throws -> [Int64] {
            try cache.messages(channelURL: "c1", before: .newest, limit: 100, filter: filter).map(\.messageID)
        }
        #expect(try ids(MessageFilter()) == [1, 2, 3, 4, 5, 6])
        #expect(try ids(MessageFilter(messageType: .file)) == [2])
        #expect(try ids(MessageFilter(messageType: .admin)) == [3])
        #expect(try ids(MessageFilter(messageType: .user)) == [1, 4, 5, 6])
        #expect(try ids(MessageFilter(customTypes: ["photo"])) == [2, 4])
        #expect(try ids(MessageFilter(customTypes: ["*"])) == [1, 2, 3, 4, 5, 6])
        #expect(try ids(MessageFilter(senderUserIDs: ["u2"])) == [4, 5])
        #expect(try ids(MessageFilter(replyType: .none)) == [1, 2, 3, 4])
        #expect(try ids(MessageFilter(replyType: .onlyReplyToChannel)) == [1, 2, 3, 4, 6])
        #expect(try ids(MessageFilter(messageType: .user, customTypes: ["photo"], senderUserIDs: ["u2"])) == [4])
        // The in-memory test agrees with the SQL for every message and filter.
        let filters = [
            MessageFilter(messageType: .file), MessageFilter(customTypes: ["photo"]), MessageFilter(senderUserIDs: ["u2"]),
            MessageFilter(replyType: .none), MessageFilter(replyType: .onlyReplyToChannel),
        ]
        let all = try cache.messages(channelURL: "c1", before: .newest, limit: 100)
        for filter in filters {
            let expected = try ids(filter)
            let matched = try all.filter { filter.matches(try JSONValue.parse($0.json)) }.map(\.messageID)
            #expect(matched == expected, "\(filter.continuityScope)")
        }
        #expect(MessageFilter(customTypes: ["b", "a", "b"]).continuityScope == MessageFilter(customTypes: ["a", "b"]).continuityScope)
        #expect(MessageFilter(customTypes: ["*"]).continuityScope.isEmpty)
        #expect(try cache.messageCount(channelURL: "c1", from: key(2), to: key(5), filter: MessageFilter(senderUserIDs: ["u2"])) == 2)
    }

    @Test func upsertsReplaceOnlyNewerCopiesUnlessForced() throws {
        let cache = try makeCache()
        defer { cache.close() }
        #expect(try cache.upsertMessage(message(1, updatedAt: 10, text: "v10")) == .inserted)
        #expect(try cache.upsertMessage(message(1, updatedAt: 5, text: "v5")) == .unchanged)
        #expect(try cache.upsertMessage(message(1, updatedAt: 10, text: "v10 again")) == .unchanged)
        #expect(try cache.message(id: 1)?.json.contains("\"v10\"") == true)
        #expect(try cache.upsertMessage(message(1, updatedAt: 11, text: "v11")) == .updated)
        // A reaction change does not move updated_at: only forced.
        #expect(try cache.upsertMessage(message(1, updatedAt: 11, text: "with reaction"), force: true) == .updated)
        #expect(try cache.upsertMessage(message(1, updatedAt: 11, text: "with reaction"), force: true) == .unchanged)
        #expect(try cache.message(id: 1)?.json.contains("with reaction") == true)
        // Invalid objects are refused, naming the field, and a bad batch writes nothing.
        #expect(throws: ParleyError.self) { try cache.upsertMessage(["message_id": 0, "channel_url": "c1", "created_at": 1]) }
        #expect(throws: ParleyError.self) { try cache.upsertMessage(["message_id": 7, "created_at": 1]) }
        #expect(throws: ParleyError.self) { try cache.upsertMessages([message(8), ["message_id": "x"]]) }
        #expect(try cache.message(id: 8) == nil)
        #expect(try cache.deleteMessages(messageIDs: [1, 99]) == [1])
        #expect(try cache.messageCount(channelURL: "c1") == 0)
    }

    @Test func aMessagePageIsContinuousOnlyInsideOneUnfilteredChunk() throws {
        let cache = try makeCache()
        defer { cache.close() }
        try cache.upsertMessages((1...6).map { message($0) })
        func continuous(before: Int64?, limit: Int) throws -> Bool {
            try cache.messagePageIsContinuous(
                channelURL: "c1", before: before.map { MessageKey(createdAt: base + $0, messageID: .min) } ?? .newest,
                limit: limit, anchored: before != nil)
        }
        // Nothing vouched for: only a page that spans nothing is continuous.
        #expect(try !continuous(before: nil, limit: 3))
        #expect(try continuous(before: nil, limit: 1))
        #expect(try continuous(before: 1, limit: 3))  // empty
        // 1...3 loaded together, 5...6 apart (4 arrived outside any range: the hole).
        try cache.addContinuousRange(channelURL: "c1", from: key(1), to: key(3), reachesOldest: true)
        try cache.addContinuousRange(channelURL: "c1", from: key(5), to: key(6))
        #expect(try continuous(before: nil, limit: 2))
        #expect(try !continuous(before: nil, limit: 3))  // 4...6 spans the hole before 5
        #expect(try continuous(before: 3, limit: 2))  // 1, 2 and on to just before 3
        #expect(try !continuous(before: 5, limit: 2))  // 3, 4: 4 is outside
        // A filtered range says nothing about an unfiltered page.
        try cache.addContinuousRange(channelURL: "c1", scope: "type=FILE", from: key(1), to: key(6))
        #expect(try !continuous(before: nil, limit: 6))
        try cache.addContinuousRange(channelURL: "c1", from: key(3), to: key(5))
        #expect(try continuous(before: nil, limit: 6))
    }

    @Test func chunksMergeWhenTheyTouchAndOnlyOneReachesEachEnd() throws {
        let cache = try makeCache()
        defer { cache.close() }
        try cache.addContinuousRange(channelURL: "c1", from: key(10), to: key(20), reachesNewest: true)
        try cache.addContinuousRange(channelURL: "c1", from: key(40), to: key(50), reachesNewest: true)
        // The newer claim wins the newest end; the older range loses its flag.
        var chunks = try cache.chunks(channelURL: "c1")
        #expect(chunks.map { [$0.start.messageID, $0.end.messageID] } == [[10, 20], [40, 50]])
        #expect(chunks.map(\.reachesNewest) == [false, true])
        // Adjacent (no key between 20 and its successor) merges; overlapping merges.
        let successor = MessageKey(createdAt: base + 20, messageID: 21)
        try cache.addContinuousRange(channelURL: "c1", from: successor, to: key(30), reachesOldest: true)
        chunks = try cache.chunks(channelURL: "c1")
        #expect(chunks.count == 2 && chunks[0].start == key(10) && chunks[0].end == key(30) && chunks[0].reachesOldest)
        let merged = try cache.addContinuousRange(channelURL: "c1", from: key(25), to: key(45))
        #expect(merged.start == key(10) && merged.end == key(50) && merged.reachesOldest && merged.reachesNewest)
        #expect(try cache.chunks(channelURL: "c1") == [merged])
        #expect(throws: ParleyError.self) { try cache.addContinuousRange(channelURL: "c1", from: key(5), to: key(4)) }
        // Scopes are separate; an unfiltered chunk covers every filter.
        try cache.addContinuousRange(channelURL: "c1", scope: "type=FILE", from: key(60), to: key(70))
        #expect(try cache.chunkCovers(channelURL: "c1", scope: "type=FILE", from: key(11), to: key(49)))
        #expect(try cache.chunkCovers(channelURL: "c1", scope: "type=FILE", from: key(61), to: key(69)))
        #expect(try !cache.chunkCovers(channelURL: "c1", from: key(61), to: key(69)))
        #expect(try !cache.chunkCovers(channelURL: "c1", from: key(45), to: key(55)))
        #expect(try cache.chunk(channelURL: "c1", containing: key(33))?.start == key(10))
        #expect(try cache.chunk(channelURL: "c1", containing: key(55)) == nil)
        #expect(try cache.chunks(channelURL: "c1", scope: "type=FILE").count == 1)
        #expect(try cache.chunks(channelURL: "c2").isEmpty)
    }

    @Test func theRangeAroundAKeyJoinsEveryChunkThatHoldsIt() throws {
        let cache = try makeCache()
        defer { cache.close() }
        // A filter's own range, loaded later and shorter, and an unfiltered one from the oldest
        // message: the filter's view of key 7 reaches the oldest end through the unfiltered one.
        try cache.addContinuousRange(channelURL: "c1", scope: "type=FILE", from: key(5), to: key(12), reachesNewest: true)
        try cache.addContinuousRange(channelURL: "c1", from: key(1), to: key(9), reachesOldest: true)
        let union = try #require(try cache.chunk(channelURL: "c1", scope: "type=FILE", containing: key(7)))
        #expect(union.start == key(1) && union.reachesOldest)
        #expect(union.end == key(12) && union.reachesNewest)
        // Past the unfiltered range only the filter's holds the key.
        let alone = try #require(try cache.chunk(channelURL: "c1", scope: "type=FILE", containing: key(11)))
        #expect(alone.start == key(5) && !alone.reachesOldest && alone.reachesNewest)
        // Unfiltered, the filter's range says nothing.
        let unfiltered = try #require(try cache.chunk(channelURL: "c1", containing: key(7)))
        #expect(unfiltered.end == key(9) && !unfiltered.reachesNewest && unfiltered.reachesOldest)
        #expect(try cache.chunk(channelURL: "c1", containing: key(11)) == nil)
    }

    @Test func realtimeMessagesExtendOnlyTheChunkAtTheNewestEnd() throws {
        let cache = try makeCache()
        defer { cache.close() }
        try cache.upsertMessages((1...5).map { message($0) })
        try cache.addContinuousRange(channelURL: "c1", from: key(1), to: key(5), reachesNewest: true)
        try cache.addContinuousRange(channelURL: "c1", scope: "type=MESG", from: key(1), to: key(5), reachesNewest: true)
        let appended = try cache.appendRealtimeMessage(message(6))
        #expect(appended == RealtimeAppendResult(outcome: .inserted, isContinuous: true))
        #expect(try cache.chunks(channelURL: "c1").allSatisfy { $0.end == key(6) })
        // While the stream is down nothing reaches the newest end: a message is stored but
        // breaks no range's promise.
        try cache.clearReachesNewest()
        let detached = try cache.appendRealtimeMessage(message(8))
        #expect(detached == RealtimeAppendResult(outcome: .inserted, isContinuous: false))
        #expect(try cache.chunks(channelURL: "c1").allSatisfy { $0.end == key(6) && !$0.reachesNewest })
        #expect(try cache.message(id: 8) != nil)
        // A message of another channel does not touch this channel's chunks.
        try cache.addContinuousRange(channelURL: "c1", from: key(6), to: key(8), reachesNewest: true)
        #expect(try cache.appendRealtimeMessage(message(9, channel: "c2")).isContinuous == false)
        #expect(try cache.chunk(channelURL: "c1", containing: key(8))?.reachesNewest == true)
        try cache.removeChunks(channelURL: "c1")
        #expect(try cache.chunks(channelURL: "c1").isEmpty)
        #expect(try cache.messageCount(channelURL: "c1") == 7)
    }

    @Test func channelPagesNeverSkipOrRepeat() throws {
        let cache = try makeCache()
        defer { cache.close() }
        // Equal created_at for some, names out of creation order, some with a last message.
        for index in 0..<25 {
            var fields: [String: JSONValue] = [
                "channel_url": .string("ch-\(index)"), "name": .string("name-\((index * 7) % 25)"),
                "created_at": .int(base + Int64(index / 3)), "custom_type": "",
            ]
            if index % 4 == 0 {
                fields["last_message"] = message(Int64(1000 + index), at: base + 5000 - Int64(index), channel: "ch-\(index)")
            }
            try cache.upsertChannel(.object(fields))
        }
        for order in ChannelListOrder.allCases {
            let everything = try cache.channels(order: order, limit: 100).map(\.channelURL)
            #expect(Set(everything).count == 25)
            var paged: [String] = []
            var after: ChannelOrderKey?
            while true {
                let page = try cache.channels(order: order, after: after, limit: 4)
                guard let last = page.last else { break }
                paged += page.map(\.channelURL)
                after = last.orderKey
            }
            #expect(paged == everything, "\(order)")
        }
        let latest = try cache.channels(order: .latestLastMessage, limit: 7).map(\.channelURL)
        #expect(latest == ["ch-0", "ch-4", "ch-8", "ch-12", "ch-16", "ch-20", "ch-24"])
        let alphabetical = try cache.channels(order: .channelNameAlphabetical, limit: 2).compactMap {
            try JSONValue.parse($0.json)["name"]?.stringValue
        }
        #expect(alphabetical == ["name-0", "name-1"])
        #expect(throws: ParleyError.self) { try cache.channels(order: .chronological, limit: -1) }
    }

    @Test func theTextAnUpsertGivesIsTheChannelAsStoredAndAsWrittenWhole() throws {
        let cache = try makeCache()
        defer { cache.close() }
        // Keys before and after "members", escapes, and members in the server's order (not sorted).
        let members: [JSONValue] = ["zed", "amy", "m\"q"].map { id in
            ["user_id": .string(id), "nickname": .string("N \(id)\n"), "is_online": .bool(id == "amy"), "state": "joined"]
        }
        let channel: JSONValue = [
            "channel_url": "c-text", "name": "a/b", "created_at": .int(base), "custom_type": "",
            "member_count": .int(3), "members": .array(members), "url": "c-text", "data": "",
        ]
        for round in 0..<2 {
            var storedText: String?
            _ = try cache.upsertChannel(channel, columns: try ChatCache.ChannelColumns(channel), storedText: &storedText)
            #expect(storedText == channel.canonicalText, "round \(round)")
            #expect(try cache.channel(url: "c-text")?.json == channel.canonicalText, "round \(round)")
        }
        var withoutMembers = channel
        if case .object(var fields) = channel { fields["members"] = nil; withoutMembers = .object(fields) }
        var storedText: String?
        _ = try cache.upsertChannel(withoutMembers, columns: try ChatCache.ChannelColumns(withoutMembers), storedText: &storedText)
        #expect(storedText == withoutMembers.canonicalText)
    }

    @Test func aStoredMemberListFollowsChangesInPlaceAndNewOrders() throws {
        let cache = try makeCache()
        defer { cache.close() }
        func channel(_ members: [(String, Bool)]) -> JSONValue {
            [
                "channel_url": "c-members", "name": "m", "created_at": .int(base), "custom_type": "",
                "members": .array(members.map { ["user_id": .string($0.0), "is_online": .bool($0.1)] }),
            ]
        }
        func stored() throws -> [String] {
            try (cache.channelMemberTexts(url: "c-members") ?? []).map { try JSONValue.parse($0)["user_id"]?.stringValue ?? "" }
        }
        let first = [("u1", false), ("u2", false), ("u3", false)]
        #expect(try cache.upsertChannel(channel(first)) == .inserted)
        #expect(try cache.upsertChannel(channel(first)) == .unchanged)
        // One member's object changes: that member only, in place.
        let second = [("u1", false), ("u2", true), ("u3", false)]
        #expect(try cache.upsertChannel(channel(second)) == .updated)
        #expect(try cache.channel(url: "c-members")?.json == channel(second).canonicalText)
        // Another order, a member gone, one new: the list as sent.
        let third = [("u3", true), ("u4", false), ("u1", false)]
        #expect(try cache.upsertChannel(channel(third)) == .updated)
        #expect(try stored() == ["u3", "u4", "u1"])
        #expect(try cache.channel(url: "c-members")?.json == channel(third).canonicalText)
    }

    @Test func aNewCacheHasTheSchemaTheMigrationsLeaveTextForText() throws {
        func schema(_ database: SQLiteDatabase) throws -> [String] {
            var rows: [String] = []
            try database.statement("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name").rows { row in
                rows.append([row.string(0), row.string(1), row.string(2), row.string(3)].map { $0 ?? "NULL" }.joined(separator: " | "))
            }
            return rows
        }
        let replayed = try SQLiteDatabase(location: .memory, migrations: ChatCache.migrations, replayingMigrations: true)
        defer { replayed.close() }
        let directory = try temporaryDirectory(prefix: "parley-fresh-schema")
        defer { removeTree(directory) }
        let created = try SQLiteDatabase(location: .file(path: directory + "/fresh.sqlite"), migrations: ChatCache.migrations)
        defer { created.close() }
        #expect(FreshSchema.statements(for: ChatCache.migrations) != nil)
        #expect(try schema(created) == schema(replayed))
        #expect(created.userVersion == replayed.userVersion)
        #expect(created.userVersion == ChatCache.migrations.last?.version)
        // And it works as a cache, search index included.
        let cache = try ChatCache(location: .file(path: directory + "/cache.sqlite"))
        defer { cache.close() }
        _ = try cache.upsertMessage(message(1))
        #expect(try cache.searchIndexCount() == 1)
    }

    @Test func removingAChannelTakesTheServersDataOfItAndNothingElse() throws {
        let cache = try makeCache()
        defer { cache.close() }
        for url in ["keep", "drop"] {
            try cache.upsertChannel(["channel_url": .string(url), "name": .string(url), "created_at": .int(base), "custom_type": ""])
            try cache.upsertMessages((1...3).map { message($0 + (url == "keep" ? 0 : 10), channel: url) })
            try cache.addContinuousRange(channelURL: url, from: .oldest, to: .newest)
            try cache.setSyncToken("t-\(url)", scope: ChatCache.messagesTokenScope(channelURL: url))
            try cache.touchChannel(url: url, at: 5)
            try cache.insertPendingMessage(
                ["req_id": .string("p-\(url)"), "channel_url": .string(url), "created_at": .int(base)],
                outbox: OutboxRequest(kind: "user", requestJSON: "{}"))
        }
        try cache.setSyncToken("global", scope: ChatCache.channelsTokenScope)
        #expect(try cache.deleteChannel(url: "drop"))
        #expect(try cache.channel(url: "drop") == nil)
        #expect(try cache.messageCount(channelURL: "drop") == 0)
        #expect(try cache.chunks(channelURL: "drop").isEmpty)
        #expect(try cache.syncToken(scope: ChatCache.messagesTokenScope(channelURL: "drop")) == nil)
        #expect(try cache.channelAccessTime(url: "drop") == nil)
        // The unsent message is the user's: it stays, and the outbox still sends it (the
        // server's refusal then ends it).
        #expect(try cache.localMessages(channelURL: "drop").map(\.reqID) == ["p-drop"])
        #expect(try cache.outboxEntries().map(\.reqID).sorted() == ["p-drop", "p-keep"])
        // The other channel and the global token are untouched.
        #expect(try cache.messageCount(channelURL: "keep") == 3)
        #expect(try cache.chunks(channelURL: "keep").count == 1)
        #expect(try cache.syncToken(scope: ChatCache.messagesTokenScope(channelURL: "keep")) == "t-keep")
        #expect(try cache.syncToken(scope: ChatCache.channelsTokenScope) == "global")
        #expect(try cache.channelAccessTime(url: "keep") == 5)
        #expect(try !cache.deleteChannel(url: "drop"))
        // Clearing empties everything, and the cache stays usable.
        try cache.clear()
        #expect(try cache.channelCount() == 0 && cache.outboxEntries().isEmpty)
        #expect(try cache.syncToken(scope: ChatCache.channelsTokenScope) == nil)
        try cache.upsertMessage(message(1))
        #expect(try cache.messageCount(channelURL: "c1") == 1)
    }

    @Test func statisticsCountRowsOnlyWhenAsked() throws {
        let cache = try makeCache()
        defer { cache.close() }
        try cache.upsertChannel(["channel_url": "c1", "name": "c1", "created_at": .int(base), "custom_type": ""])
        try cache.upsertMessage(message(1))
        try cache.upsertMessage(message(2))
        for name in ["a", "b"] {
            try cache.insertPendingMessage(
                ["req_id": .string("local-\(name)"), "channel_url": "c1", "created_at": .int(base), "message": .string(name)],
                outbox: OutboxRequest(kind: "user", requestJSON: "{}"))
        }
        try cache.markFailed(reqID: "local-b", error: ParleyError(.network, "offline"), retryable: true)
        let counted = try cache.statistics(countingRows: true)
        #expect(counted.messages == 2 && counted.channels == 1)
        #expect(counted.pendingMessages == 1 && counted.failedMessages == 1)
        #expect(counted.sizeBytes > 0)
        #expect(counted.searchIndexRows + counted.searchIndexBacklog >= 2)
        // Without counting, the rows are those kept; the sizes are read again.
        try cache.upsertMessage(message(3))
        try cache.markFailed(reqID: "local-a", error: ParleyError(.network, "offline"), retryable: true)
        let sized = try cache.statistics(countingRows: false, kept: counted)
        #expect(sized.messages == 2 && sized.pendingMessages == 0 && sized.failedMessages == 2)
        #expect(try cache.statistics(countingRows: true).messages == 3)
        // The first reading of a keeper always counts.
        var keeper = CacheStatisticsKeeper()
        #expect(try keeper.statistics(of: cache, dataVersion: nil).messages == 3)
    }
}
