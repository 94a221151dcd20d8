// Channels: upsert, get, delete, keyset-paged lists in the collection's orders, access times.

extension ChatCache {
    /// The columns a stored channel needs, read from its object.
    struct ChannelColumns {
        var orderKey: ChannelOrderKey
        var customType: String

        init(_ channel: JSONValue) throws(ParleyError) {
            let reader = try JSONReader(channel, path: "channel", errorCode: .protocolViolation)
            let url = try reader.string("channel_url")
            guard !url.isEmpty else { throw reader.error("channel_url", "must not be empty") }
            // Times are non-negative so that their negation (the stored sort key) cannot overflow.
            let createdAt = try reader.int("created_at", default: 0, in: 0...Int64.max)
            var lastMessageCreatedAt: Int64?
            if let lastMessage = try reader.optionalObject("last_message") {
                lastMessageCreatedAt = try lastMessage.int("created_at", in: 0...Int64.max)
            }
            orderKey = ChannelOrderKey(
                channelURL: url, createdAt: createdAt, lastMessageCreatedAt: lastMessageCreatedAt,
                name: try reader.string("name", default: ""))
            customType = try reader.string("custom_type", default: "")
            historyOffset = try reader.int("ts_message_offset", default: 0)
            var operators: [String]?
            if let list = reader.fields["operators"]?.arrayValue {
                operators = list.compactMap { $0["user_id"]?.stringValue }
            }
            operatorIDs = operators.map { ChatCache.jsonArrayText($0.sorted(by: utf8Precedes)) } ?? ""
            var pinned: [Int64]?
            if let list = reader.fields["pinned_message_ids"]?.arrayValue { pinned = list.compactMap(\.int64Value) }
            pinnedMessageIDs = pinned.map { JSONValue.array($0.sorted().map { .int($0) }).canonicalText } ?? ""
            messageContext = MessageChannelContext(
                historyOffset: historyOffset, operatorIDs: operators.map { Set($0) }, pinnedMessageIDs: pinned.map { Set($0) })
        }

        /// What `messageContext(channelURL:)` reads once these columns are stored.
        var messageContext: MessageChannelContext


        var historyOffset: Int64
        /// JSON array text of the operators' user ids, "" when the render did not list them.
        var operatorIDs: String
        /// JSON array text of the pinned message ids, "" when the render did not list them.
        var pinnedMessageIDs: String
    }

    /// Stores a channel object (it must have a non-empty `channel_url`; `created_at`,
    /// `name`, `custom_type`, `last_message.created_at` are read for ordering), replacing
    /// the stored one. Its `members`, when listed (each an object with a string `user_id`),
    /// replace the stored member list; when not listed, the stored list stays. A malformed
    /// object is refused with `.protocolViolation`.
    @discardableResult
    public func upsertChannel(_ channel: JSONValue) throws(ParleyError) -> ChannelUpsertOutcome {
        try upsertChannel(channel, columns: try ChannelColumns(channel))
    }

    /// `upsertChannel(_:)` with the columns the caller already read from `channel`.
    func upsertChannel(_ channel: JSONValue, columns: ChannelColumns) throws(ParleyError) -> ChannelUpsertOutcome {
        var storedText: String?
        return try upsertChannel(channel, columns: columns, storedText: &storedText)
    }

    /// `upsertChannel(_:columns:)` that also gives `channel`'s canonical text, made from the
    /// texts it wrote (a `members` list spliced in as `channel(url:)` reads it): a caller that
    /// reports the channel does not write a long member list out a second time.
    func upsertChannel(
        _ channel: JSONValue, columns: ChannelColumns, storedText: inout String?, before: ChannelRowLookup = .unread
    ) throws(ParleyError) -> ChannelUpsertOutcome {
        guard case .object(var fields) = channel, let members = fields.removeValue(forKey: "members") else {
            let json = channel.canonicalText
            storedText = json
            return try storeChannel(columns, json: json, members: nil, before: before)
        }
        guard case .array(let list) = members else {
            throw ParleyError(.protocolViolation, "channel.members: expected an array")
        }
        var memberRows: [(userID: String, json: String)] = []
        memberRows.reserveCapacity(list.count)
        for (index, member) in list.enumerated() {
            guard case .object = member, let userID = member["user_id"]?.stringValue else {
                throw ParleyError(.protocolViolation, "channel.members[\(index)]: expected an object with a string user_id")
            }
            memberRows.append((userID, member.canonicalText))
        }
        let json = JSONValue.object(fields).canonicalText
        storedText = Self.withMemberList(memberRows.map(\.json), in: json)
        // The member rows and the channel row change together.
        return try transaction { () throws(ParleyError) in
            try storeChannel(columns, json: json, members: memberRows, before: before)
        }
    }

    /// A channel's row as a write finds it, read once by a caller that merges into it and
    /// then stores the result (`upsertChannel(_:columns:storedText:before:)`).
    struct ChannelRowBefore {
        /// The row's text, without its member list.
        var channel: CachedChannel
        var membersKnown: Bool
        fileprivate var indexKeys: ChannelIndexKeys
    }

    /// Whether the caller has read the row a write changes (`.read(nil)`: not cached).
    enum ChannelRowLookup {
        case unread
        case read(ChannelRowBefore?)
    }

    /// The channel's row before a write, nil when the channel is not cached.
    func channelRowBefore(url: String) throws(ParleyError) -> ChannelRowBefore? {
        var result: ChannelRowBefore?
        try database.statement(Self.channelRowBeforeByURL).rows([.text(url)]) { row throws(ParleyError) in
            result = ChannelRowBefore(
                channel: try readChannel(row, withMembers: false), membersKnown: row.int64(5) != 0,
                indexKeys: ChannelIndexKeys(
                    chronological: row.int64(6), activityRank: row.int64(7), activity: row.int64(8), name: row.string(9) ?? ""))
        }
        return result
    }

    private static let updateChannelKeepingOrdersSQL = """
        UPDATE channels SET created_at = ?2, last_message_created_at = ?3, name = ?4, custom_type = ?5, json = ?6,
            history_offset = ?7, operator_ids = ?8, pinned_message_ids = ?9, members_known = ?10
        WHERE channel_url = ?1
        """
    private static let updateChannelAndActivitySQL = """
        UPDATE channels SET created_at = ?2, last_message_created_at = ?3, name = ?4, custom_type = ?5, json = ?6,
            history_offset = ?7, operator_ids = ?8, pinned_message_ids = ?9, members_known = ?10,
            activity_rank = ?11, activity_key = ?12
        WHERE channel_url = ?1
        """
    private static let channelRowBeforeByURL = """

        SELECT \(channelColumns), chronological_key, activity_rank, activity_key, name_key FROM channels WHERE channel_url = ?1
        """

    /// Replaces the stored objects of the members in `members` (by `user_id`, keeping their
    /// place in the list) when the channel's member list is stored; members not in it are
    /// not added (a list that misses one is stale and is replaced by the next full render).
    /// True when a stored member changed.
    public func updateChannelMembers(url: String, _ members: [JSONValue]) throws(ParleyError) -> Bool {
        try updateChannelMembers(url: url, members, membersKnown: try channelMembersKnown(url: url))
    }

    /// `updateChannelMembers(url:_:)` where the caller knows whether the list is stored.
    func updateChannelMembers(url: String, _ members: [JSONValue], membersKnown: Bool) throws(ParleyError) -> Bool {
        guard membersKnown else { return false }
        var changed = false
        for (index, member) in members.enumerated() {
            guard case .object = member, let userID = member["user_id"]?.stringValue else {
                throw ParleyError(.protocolViolation, "changed_members[\(index)]: expected an object with a string user_id")
            }
            let updated = try database.statement(
                "UPDATE channel_members SET json = ?3 WHERE channel_url = ?1 AND user_id = ?2 AND json != ?3"
            ).run([.text(url), .text(userID), .text(member.canonicalText)])
            if updated > 0 { changed = true }
        }
        return changed
    }

    /// The stored member list of a channel in the server's order (canonical texts), nil
    /// when the channel is not cached or its stored render did not list members.
    public func channelMemberTexts(url: String) throws(ParleyError) -> [String]? {
        try channelMembersKnown(url: url) ? try memberTexts(url: url) : nil
    }

    /// Whether the channel is cached.
    public func hasChannel(url: String) throws(ParleyError) -> Bool {
        var found = false
        try database.statement("SELECT 1 FROM channels WHERE channel_url = ?1").rows([.text(url)]) { _ in found = true }
        return found
    }

    /// Whether the channel is cached with its member list (false when not cached).
    public func channelMembersKnown(url: String) throws(ParleyError) -> Bool {
        var known = false
        try database.statement("SELECT members_known FROM channels WHERE channel_url = ?1").rows([.text(url)]) { row in
            known = row.int64(0) != 0
        }
        return known
    }

    private func memberTexts(url: String) throws(ParleyError) -> [String] {
        var texts: [String] = []
        try database.statement("SELECT json FROM channel_members WHERE channel_url = ?1 ORDER BY position")
            .rows([.text(url)]) { row throws(ParleyError) in texts.append(try storedJSON(row, 0, "a channel member")) }
        return texts
    }

    /// Stores several channels in one transaction (all or none); outcomes in input order.
    @discardableResult
    public func upsertChannels(_ channels: [JSONValue]) throws(ParleyError) -> [ChannelUpsertOutcome] {
        try transaction { () throws(ParleyError) in
            var outcomes: [ChannelUpsertOutcome] = []
            outcomes.reserveCapacity(channels.count)
            for channel in channels {
                outcomes.append(try upsertChannel(channel))
            }
            return outcomes
        }
    }

    /// `json` is the channel without `members`; `members` (nil: not listed) replace the
    /// stored list when they differ from it.
    /// The values of a channel row that its indexes order by.
    fileprivate struct ChannelIndexKeys {
        var chronological: Int64
        var activityRank: Int64
        var activity: Int64
        var name: String
    }

    private func storeChannel(
        _ columns: ChannelColumns, json: String, members: [(userID: String, json: String)]?, before: ChannelRowLookup
    ) throws(ParleyError) -> ChannelUpsertOutcome {
        let key = columns.orderKey
        let row: ChannelRowBefore? =
            switch before {
            case .read(let row): row
            case .unread: try channelRowBefore(url: key.channelURL)
            }
        let stored = row?.channel.json
        let storedMembersKnown = row?.membersKnown ?? false
        let storedIndexKeys = row?.indexKeys

        var membersChanged = false
        if let members {
            var storedMembers: [(userID: String, json: String)] = []
            if storedMembersKnown {
                try database.statement("SELECT user_id, json FROM channel_members WHERE channel_url = ?1 ORDER BY position")
                    .rows([.text(key.channelURL)]) { row in storedMembers.append((row.string(0) ?? "", row.string(1) ?? "")) }
            }
            let sameMembers = storedMembersKnown && storedMembers.count == members.count
                && zip(storedMembers, members).allSatisfy { $0.userID == $1.userID }
            if sameMembers {
                // The same members in the same order: only the ones whose objects changed are
                // written (presence moves a few at a time in a channel of many).
                let update = try database.statement("UPDATE channel_members SET json = ?3 WHERE channel_url = ?1 AND user_id = ?2")
                for (old, new) in zip(storedMembers, members) where !utf8Equal(old.json, new.json) {
                    try update.run([.text(key.channelURL), .text(new.userID), .text(new.json)])
                    membersChanged = true
                }
            } else {
                membersChanged = true
                try database.statement("DELETE FROM channel_members WHERE channel_url = ?1").run([.text(key.channelURL)])
                let insert = try database.statement(
                    "INSERT OR REPLACE INTO channel_members (channel_url, user_id, position, json) VALUES (?1, ?2, ?3, ?4)")
                for (position, member) in members.enumerated() {
                    try insert.run([.text(key.channelURL), .text(member.userID), .integer(Int64(position)), .text(member.json)])
                }
            }
        }
        if let stored, utf8Equal(stored, json) {
            guard membersChanged else { return .unchanged }
            if !storedMembersKnown {
                try database.statement("UPDATE channels SET members_known = 1 WHERE channel_url = ?1").run([.text(key.channelURL)])
            }
            return .updated
        }
        let indexKeys = ChannelIndexKeys(
            chronological: -key.createdAt, activityRank: key.lastMessageCreatedAt == nil ? 1 : 0,
            activity: -(key.lastMessageCreatedAt ?? key.createdAt), name: nameOrderKey(key.name))
        let membersKnown: Int64 = members != nil || storedMembersKnown ? 1 : 0
        if let storedIndexKeys, storedIndexKeys.chronological == indexKeys.chronological, storedIndexKeys.name == indexKeys.name {
            // SQLite rewrites every index that has a column in the SET list, whether its value
            // changed or not: a new message moves only the activity order, so only that
            // index is written (a page fewer per index left alone, for every live message).
            let sameActivity = storedIndexKeys.activityRank == indexKeys.activityRank && storedIndexKeys.activity == indexKeys.activity
            var values: [SQLiteValue] = [
                .text(key.channelURL), .integer(key.createdAt), SQLiteValue(key.lastMessageCreatedAt), .text(key.name),
                .text(columns.customType), .text(json), .integer(columns.historyOffset), .text(columns.operatorIDs),
                .text(columns.pinnedMessageIDs), .integer(membersKnown),
            ]
            if !sameActivity { values += [.integer(indexKeys.activityRank), .integer(indexKeys.activity)] }
            try database.statement(sameActivity ? Self.updateChannelKeepingOrdersSQL : Self.updateChannelAndActivitySQL).run(values)
            return .updated
        }
        try database.statement("""
            INSERT INTO channels (channel_url, created_at, last_message_created_at, name, custom_type,
                                  chronological_key, activity_rank, activity_key, json,
                                  history_offset, operator_ids, pinned_message_ids, members_known, name_key)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
            ON CONFLICT (channel_url) DO UPDATE SET
                created_at = excluded.created_at, last_message_created_at = excluded.last_message_created_at,
                name = excluded.name, custom_type = excluded.custom_type,
                chronological_key = excluded.chronological_key, activity_rank = excluded.activity_rank,
                activity_key = excluded.activity_key, json = excluded.json, history_offset = excluded.history_offset,
                operator_ids = excluded.operator_ids, pinned_message_ids = excluded.pinned_message_ids,
                members_known = excluded.members_known, name_key = excluded.name_key
            """).run([
                .text(key.channelURL), .integer(key.createdAt), SQLiteValue(key.lastMessageCreatedAt),
                .text(key.name), .text(columns.customType),
                .integer(indexKeys.chronological), .integer(indexKeys.activityRank), .integer(indexKeys.activity),
                .text(json), .integer(columns.historyOffset), .text(columns.operatorIDs), .text(columns.pinnedMessageIDs),
                .integer(membersKnown), .text(indexKeys.name),
            ])
        return stored == nil ? .inserted : .updated
    }

    /// The stored channel, nil when not cached. With `withMembers` its JSON carries the
    /// stored member list (when one is stored); without, it is the row alone (what a write
    /// merges into: reading it costs nothing per member).
    public func channel(url: String, withMembers: Bool = true) throws(ParleyError) -> CachedChannel? {
        var result: CachedChannel?
        try database.statement(Self.channelByURL)
            .rows([.text(url)]) { row throws(ParleyError) in result = try self.readChannel(row, withMembers: withMembers) }
        return result
    }

    /// Removes a channel and the server's data cached for it: its messages, members, chunks,
    /// message token and access time. True when the channel row or any message existed.
    ///
    /// The user's unsent messages (pending and failed, with their outbox rows) stay: they are
    /// the user's, not a copy of the server's. Each still ends as every send does: the
    /// outbox sends a pending one and the server's refusal (403 after a leave or a ban, 404
    /// after a deletion) fails it, kept or dropped as the resend policy says; a failed one
    /// can be resent (after joining again) or removed.
    @discardableResult
    public func deleteChannel(url: String) throws(ParleyError) -> Bool {
        try transaction { () throws(ParleyError) in
            var removed = try database.statement("DELETE FROM channels WHERE channel_url = ?1").run([.text(url)])
            try database.statement("DELETE FROM channel_members WHERE channel_url = ?1").run([.text(url)])
            removed += try removeChannelMessages(url: url)
            try database.statement("DELETE FROM channel_access WHERE channel_url = ?1").run([.text(url)])
            return removed > 0
        }
    }

    /// Removes a channel's succeeded messages, chunks and message token (what eviction
    /// drops); returns the number of messages removed.
    func removeChannelMessages(url: String) throws(ParleyError) -> Int {
        let removed = try database.statement("DELETE FROM messages WHERE channel_url = ?1").run([.text(url)])
        try database.statement("DELETE FROM chunks WHERE channel_url = ?1").run([.text(url)])
        try removeSyncToken(scope: Self.messagesTokenScope(channelURL: url))
        try removeSyncToken(scope: Self.pollsTokenScope(channelURL: url))
        return removed
    }

    /// A page of channels in `order`, starting strictly after `after` (nil: from the
    /// start). Keyset pagination: channels inserted or moved meanwhile never cause a skip
    /// or a duplicate among the unchanged ones.
    /// `withMembers` false: each channel's text without its stored member list (a walk
    /// over the channels that needs only their keys does not read every member).
    public func channels(
        order: ChannelListOrder, after: ChannelOrderKey? = nil, limit: Int, withMembers: Bool = true
    ) throws(ParleyError) -> [CachedChannel] {
        guard limit >= 0 else { throw ParleyError.invalidArgument("channel page limit must not be negative, got \(limit)") }
        if limit == 0 { return [] }
        let sortColumns: String
        var values: [SQLiteValue]
        switch order {
        case .chronological:
            sortColumns = "chronological_key, channel_url"
            values = after.map { [.integer(-$0.createdAt), .text($0.channelURL)] } ?? []
        case .latestLastMessage:
            sortColumns = "activity_rank, activity_key, chronological_key, channel_url"
            values = after.map { key in
                [.integer(key.lastMessageCreatedAt == nil ? 1 : 0), .integer(-(key.lastMessageCreatedAt ?? key.createdAt)),
                 .integer(-key.createdAt), .text(key.channelURL)]
            } ?? []
        case .channelNameAlphabetical:
            sortColumns = "name_key, channel_url"
            values = after.map { [.text(nameOrderKey($0.name)), .text($0.channelURL)] } ?? []
        }
        var sql = "SELECT \(Self.channelColumns) FROM channels"
        if !values.isEmpty {
            let placeholders = (1...values.count).map { "?\($0)" }.joined(separator: ", ")
            sql += " WHERE (\(sortColumns)) > (\(placeholders))"
        }
        sql += " ORDER BY \(sortColumns) LIMIT ?\(values.count + 1)"
        values.append(.integer(Int64(limit)))
        var result: [CachedChannel] = []
        try database.statement(sql).rows(values) { row throws(ParleyError) in
            result.append(try self.readChannel(row, withMembers: withMembers))
        }
        return result
    }

    /// Number of cached channels.
    public func channelCount() throws(ParleyError) -> Int {
        Int(try scalarInt("SELECT count(*) FROM channels"))
    }

    /// Records that the app used the channel at `at` (ms): eviction removes the least
    /// recently accessed channels first. Works whether or not the channel row is cached.
    public func touchChannel(url: String, at: Int64) throws(ParleyError) {
        try database.statement("""
            INSERT INTO channel_access (channel_url, accessed_at) VALUES (?1, ?2)
            ON CONFLICT (channel_url) DO UPDATE SET accessed_at = max(accessed_at, excluded.accessed_at)
            """).run([.text(url), .integer(at)])
    }

    /// The last access time recorded by `touchChannel`, nil if never.
    public func channelAccessTime(url: String) throws(ParleyError) -> Int64? {
        var result: Int64?
        try database.statement("SELECT accessed_at FROM channel_access WHERE channel_url = ?1").rows([.text(url)]) { row in
            result = row.int64(0)
        }
        return result
    }

    static let channelColumns = "channel_url, created_at, last_message_created_at, name, json, members_known"
    private static let channelByURL = "SELECT \(channelColumns) FROM channels WHERE channel_url = ?1"

    /// A stored channel's text with its stored member texts as `members`, in their order.
    static func withMemberList(_ memberTexts: [String], in channelText: String) -> String {
        CanonicalObjectText.inserting(name: "members", value: "[" + memberTexts.joined(separator: ",") + "]", into: channelText)
    }

    func readChannel(_ row: SQLiteStatement, withMembers: Bool = true) throws(ParleyError) -> CachedChannel {
        let url = row.string(0) ?? ""
        var json = try storedJSON(row, 4, "a channel")
        if withMembers, row.int64(5) != 0 {
            let members = try memberTexts(url: url)
            json = Self.withMemberList(members, in: json)
        }
        return CachedChannel(
            orderKey: ChannelOrderKey(
                channelURL: url, createdAt: row.int64(1),
                lastMessageCreatedAt: row.isNull(2) ? nil : row.int64(2), name: row.string(3) ?? ""),
            json: json)
    }
}

/// What a channel's messages copy from it: messages created at or before `historyOffset`
/// are hidden from the user; a sender's `role` follows `operatorIDs`; `is_pinned` follows
/// `pinnedMessageIDs` (nil: the stored render did not list them).
public struct MessageChannelContext: Sendable, Equatable {
    public var historyOffset: Int64
    public var operatorIDs: Set<String>?
    public var pinnedMessageIDs: Set<Int64>?
}

extension ChatCache {
    /// The context of a cached channel's messages, nil when the channel is not cached.
    public func messageContext(channelURL: String) throws(ParleyError) -> MessageChannelContext? {
        var result: MessageChannelContext?
        try database.statement("SELECT history_offset, operator_ids, pinned_message_ids FROM channels WHERE channel_url = ?1")
            .rows([.text(channelURL)]) { row in
                let operators = row.string(1).flatMap { $0.isEmpty ? nil : try? JSONValue.parse($0) }
                let pinned = row.string(2).flatMap { $0.isEmpty ? nil : try? JSONValue.parse($0) }
                result = MessageChannelContext(
                    historyOffset: row.int64(0),
                    operatorIDs: operators?.arrayValue.map { Set($0.compactMap(\.stringValue)) },
                    pinnedMessageIDs: pinned?.arrayValue.map { Set($0.compactMap(\.int64Value)) })
            }
        return result
    }
}

/// The orders a channel list view pages the cache in. Each sorts by a tuple of columns
/// ending with the URL; `ChannelListSort.sortColumns` names them.
public enum ChannelListSort: Sendable, Hashable {
    case chronological
    case latestLastMessage
    case channelName
    /// By the value of one metadata key; channels without the key last (rank 1, value "").
    case metadataValue(key: String)

    /// The sort tuple as SQL expressions (the metadata order reads the value with
    /// json_each, so that any key, quotes included, is looked up exactly).
    var sortColumns: [String] {
        switch self {
        case .chronological: ["chronological_key", "channel_url"]
        case .latestLastMessage: ["activity_rank", "activity_key", "chronological_key", "channel_url"]
        case .channelName: ["name_key", "channel_url"]
        case .metadataValue: ["metadata_rank", "coalesce(metadata_value, '')", "channel_url"]
        }
    }
}

extension ChatCache {
    /// Up to `limit` channels in `sort` order, starting strictly after the sort tuple
    /// `after` (its elements in `sort.sortColumns` order; nil: from the start). The
    /// collections filter what this returns; the tuples agree with the server's listing.
    /// `withMembers` as in `channel(url:withMembers:)`.
    public func channels(
        sort: ChannelListSort, after: [SQLiteValue]?, limit: Int, withMembers: Bool = true
    ) throws(ParleyError) -> [CachedChannel] {
        guard limit > 0 else { return [] }
        let columns = sort.sortColumns
        if let after, after.count != columns.count {
            throw .invalidArgument("channel page: expected \(columns.count) sort values, got \(after.count)")
        }
        var values: [SQLiteValue] = []
        var source = "channels"
        if case .metadataValue(let key) = sort {
            values.append(.text(key))
            source = """
                (SELECT *, CASE WHEN metadata_value IS NULL THEN 1 ELSE 0 END AS metadata_rank
                 FROM (SELECT channel_url, created_at, last_message_created_at, name, json, members_known,
                              parley_text_order_key(
                                  (SELECT value FROM json_each(channels.json, '$.metadata') WHERE key = ?1 AND type = 'text'))
                              AS metadata_value
                       FROM channels))
                """
        }
        let ordered = columns
        var sql = "SELECT \(Self.channelColumns) FROM \(source)"
        if let after {
            let first = values.count + 1
            let placeholders = (first..<(first + after.count)).map { "?\($0)" }.joined(separator: ", ")
            sql += " WHERE (\(ordered.joined(separator: ", "))) > (\(placeholders))"
            values += after
        }
        sql += " ORDER BY \(ordered.joined(separator: ", ")) LIMIT ?\(values.count + 1)"
        values.append(.integer(Int64(limit)))
        var result: [CachedChannel] = []
        try database.statement(sql).rows(values) { row throws(ParleyError) in
            result.append(try self.readChannel(row, withMembers: withMembers))
        }
        return result
    }
}
