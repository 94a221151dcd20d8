// Unread counters, kept in the rows instead of counted per render (a render happens for
// every recipient of every event). The definition, which MessageQueries.unread counts: a
// message is unread for a joined member when it is newer than both the member's read
// position and history start, not sent by the member, not silent, and not a reply kept in
// its thread; it is a mention when it mentions the channel or the member.
//
// A new message must not write every member's row (a channel of 1,000 members would write
// 1,000 rows per message). So the channel keeps totals — countable messages, and those that
// mention the whole channel (`ChannelRecord.countedMessages`, `countedMentions`) — and each
// member a base: a joined member's unread count is the total less the base. Each change
// keeps that equal to the count:
// - a new message raises the totals; the members it is not unread for (its sender, a member
//   who read past it) raise their base with them, and members it mentions by name lower
//   their mention base (`countNewMessage`): usually one or two rows, not all;
// - a deleted message raises the base of the members it was unread for (`uncountMessage`),
//   an edit of its mentions moves mention bases (`recountMentions`);
// - a member whose read position, history start or state changes is counted again by a
//   query, which sets the bases from the totals (`ChannelStore.save(_: ChannelRecord)`).
// With PARLEY_VERIFY_COUNTERS=1 every request checks the counts of the channels it touched
// against the query and fails if they differ. The query scans a member's unread messages, so
// a count above 64 is checked by one request in (count / 32), chosen by the event sequence:
// a test sending thousands of messages nobody reads stays linear, not quadratic.

/// Who a message counts for (the definition above).
enum UnreadRule {
    static func isCountable(_ m: MessageRecord) -> Bool {
        !m.silent && (m.parentId == 0 || m.isReplyToChannel)
    }

    static func isUnread(_ m: MessageRecord, for member: MemberRecord) -> Bool {
        member.state == "joined" && m.senderId != member.userId
            && m.createdAt > max(member.readTs, member.tsMessageOffset)
    }

    static func mentions(_ m: MessageRecord, _ userId: String) -> Bool {
        m.mentionType == "channel" || m.mentionedUserIds.contains(userId)
    }
}

extension ChannelRecord {
    /// The member's unread messages and mentions (0 unless joined).
    func unreadCounts(of userId: String) -> (messages: Int64, mentions: Int64) {
        unreadCounts(of: members[userId])
    }

    /// The same for a member record of this channel (nil: not a member).
    func unreadCounts(of member: MemberRecord?) -> (messages: Int64, mentions: Int64) {
        guard let member, member.state == "joined" else { return (0, 0) }
        return (countedMessages - member.unreadBase, countedMentions - member.mentionBase)
    }

    /// Sets the member's bases so that its counts are the ones given (counted by a query).
    mutating func setUnreadCounts(of userId: String, messages: Int64, mentions: Int64) {
        members[userId]?.unreadBase = countedMessages - messages
        members[userId]?.mentionBase = countedMentions - mentions
    }
}

// Counting as messages come, go and change (the message service).
extension MessageRecords {
    func countNewMessage(_ m: MessageRecord, in c: inout ChannelRecord) {
        guard UnreadRule.isCountable(m) else { return }
        let wholeChannel = m.mentionType == "channel"
        c.countedMessages += 1
        if wholeChannel { c.countedMentions += 1 }
        // Every joined member's counts just rose with the totals; where the message does not
        // count (or counts as a mention without mentioning the whole channel), the base says so.
        for (id, member) in c.members where member.state == "joined" {
            let unread = UnreadRule.isUnread(m, for: member)
            if !unread { c.members[id]!.unreadBase += 1 }
            let mention: Int64 = unread && UnreadRule.mentions(m, id) ? 1 : 0
            let risen: Int64 = wholeChannel ? 1 : 0
            if mention != risen { c.members[id]!.mentionBase += risen - mention }
        }
    }

    func uncountMessage(_ m: MessageRecord, in c: inout ChannelRecord) {
        guard UnreadRule.isCountable(m) else { return }
        for (id, member) in c.members where UnreadRule.isUnread(m, for: member) {
            c.members[id]!.unreadBase += 1
            if UnreadRule.mentions(m, id) { c.members[id]!.mentionBase += 1 }
        }
    }

    /// After an edit that changed who the message mentions.
    func recountMentions(from old: MessageRecord, to new: MessageRecord, in c: inout ChannelRecord) {
        guard UnreadRule.isCountable(new) else { return }
        for (id, member) in c.members where UnreadRule.isUnread(new, for: member) {
            let delta = (UnreadRule.mentions(new, id) ? 1 : 0) - (UnreadRule.mentions(old, id) ? 1 : 0)
            c.members[id]!.mentionBase -= Int64(delta)
        }
    }
}

extension ChannelStore {
    /// `newestCountableAt`: the creation time of the channel's newest countable message (its
    /// last message; 0 without one), nil if not known. A member whose read position is at or
    /// past it has nothing unread, and needs no query: the common case, since sending a
    /// message and marking the channel read both move the reader past its last message.
    func recountUnread(_ c: inout ChannelRecord, _ userId: String, newestCountableAt: Int64? = nil) async throws {
        guard let member = c.members[userId] else { return }
        let floor = max(member.readTs, member.tsMessageOffset)
        if member.state != "joined" || newestCountableAt.map({ floor >= $0 }) == true {
            c.setUnreadCounts(of: userId, messages: 0, mentions: 0)
            return
        }
        let (count, mentions) = try await MessageQueries.unread(db, channel: c.url, user: userId, floor: floor)
        c.setUnreadCounts(of: userId, messages: count, mentions: mentions)
    }

    func verifyUnreadCounters(_ urls: Set<String>) async throws {
        for url in urls.sorted() {
            guard let c = loadedChannels[url] else { continue }
            try await Self.verifyUnreadCounters(of: c, db)
        }
    }

    /// The counters of `c`'s joined members against its messages in `db` (a few members of
    /// those with many unread, at random).
    static func verifyUnreadCounters(of c: ChannelRecord, _ db: any SQLSession) async throws {
        for member in c.members.values where member.state == "joined" {
            let kept = c.unreadCounts(of: member.userId)
            if kept.messages > 64, Int64.random(in: 0..<(kept.messages / 32)) != 0 { continue }
            let (count, mentions) = try await MessageQueries.unread(
                db, channel: c.url, user: member.userId, floor: max(member.readTs, member.tsMessageOffset))
            if count != kept.messages || mentions != kept.mentions {
                throw APIError.internal("unread counters of \(member.userId) in \(c.url) are "
                    + "\(kept.messages)/\(kept.mentions), the messages say \(count)/\(mentions)")
            }
        }
    }

    /// With verification on, a send in one round trip checks its channels' counters once
    /// committed, as stored, in a snapshot of their own (Writers/OneFlightSend.swift): its
    /// transaction had no room for the check's reads, and every committed snapshot keeps the
    /// counters equal to what the messages say.
    static func verifyStoredUnreadCounters(_ urls: [String], _ database: any SQLDatabase) async throws {
        try await database.read { db in
            for entry in try await ChannelQueries.channels(urls, db).channels { try await verifyUnreadCounters(of: entry.channel, db) }
        }
    }
}
