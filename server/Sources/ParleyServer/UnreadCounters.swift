// Unread counters per member, kept in the member rows instead of counted per render (a
// render happens for every recipient of every event). The definition, which
// MessageQueries.unread counts: a message is unread for a joined member when it is newer
// than both the member's read position and history start, not sent by the member, not
// silent, and not a reply kept in its thread; it is a mention when it mentions the channel
// or the member. Each change keeps the counters equal to that count:
// - a new message adds itself to the members it is unread for (`countNewMessage`);
// - a deleted one removes itself (`uncountMessage`), an edit of its mentions moves the
//   mention counts (`recountMentions`);
// - a member whose read position, history start or state changes is counted again by a
//   query (`ServerState.save(_: ChannelRecord)`).
// With PARLEY_VERIFY_COUNTERS=1 every request checks the counters of the channels it touched
// against the query and fails if they differ.

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

// Counting as messages come, go and change (the message service).
extension MessageRecords {
    func countNewMessage(_ m: MessageRecord, in c: inout ChannelRecord) {
        guard UnreadRule.isCountable(m) else { return }
        for (id, member) in c.members where UnreadRule.isUnread(m, for: member) {
            c.members[id]!.unreadCount += 1
            if UnreadRule.mentions(m, id) { c.members[id]!.unreadMentionCount += 1 }
        }
    }

    func uncountMessage(_ m: MessageRecord, in c: inout ChannelRecord) {
        guard UnreadRule.isCountable(m) else { return }
        for (id, member) in c.members where UnreadRule.isUnread(m, for: member) {
            c.members[id]!.unreadCount -= 1
            if UnreadRule.mentions(m, id) { c.members[id]!.unreadMentionCount -= 1 }
        }
    }

    /// After an edit that changed who the message mentions.
    func recountMentions(from old: MessageRecord, to new: MessageRecord, in c: inout ChannelRecord) {
        guard UnreadRule.isCountable(new) else { return }
        for (id, member) in c.members where UnreadRule.isUnread(new, for: member) {
            let delta = (UnreadRule.mentions(new, id) ? 1 : 0) - (UnreadRule.mentions(old, id) ? 1 : 0)
            c.members[id]!.unreadMentionCount += Int64(delta)
        }
    }
}

extension ServerState {
    func recountUnread(_ c: inout ChannelRecord, _ userId: String) async throws {
        guard let member = c.members[userId] else { return }
        guard member.state == "joined" else {
            c.members[userId]!.unreadCount = 0
            c.members[userId]!.unreadMentionCount = 0
            return
        }
        let (count, mentions) = try await MessageQueries.unread(
            db, channel: c.url, user: userId, floor: max(member.readTs, member.tsMessageOffset))
        c.members[userId]!.unreadCount = count
        c.members[userId]!.unreadMentionCount = mentions
    }

    func verifyUnreadCounters(_ urls: Set<String>) async throws {
        for url in urls.sorted() {
            guard let c = loadedChannels[url] else { continue }
            for member in c.members.values where member.state == "joined" {
                let (count, mentions) = try await MessageQueries.unread(
                    db, channel: url, user: member.userId, floor: max(member.readTs, member.tsMessageOffset))
                if count != member.unreadCount || mentions != member.unreadMentionCount {
                    throw APIError.internal("unread counters of \(member.userId) in \(url) are "
                        + "\(member.unreadCount)/\(member.unreadMentionCount), the messages say \(count)/\(mentions)")
                }
            }
        }
    }
}
