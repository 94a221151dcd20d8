// Persisted records. Stored as JSON documents (Codable) by the storage backend; the wire
// format is produced separately (Render.swift) so storage can evolve independently.

struct UserRecord: Codable, Sendable {
    var userId: String
    var nickname: String
    var profileUrl: String
    var isActive: Bool
    var createdAt: Int64
    var lastSeenAt: Int64
    var hasEverLoggedIn: Bool
    var metadata: [String: String]
    var discoveryKeys: [String]
    var preferredLanguages: [String]
    var autoAccept: Bool
}

struct SessionRecord: Codable, Sendable {
    var token: String
    var userId: String
    var expiresAt: Int64  // 0 = never
    var createdAt: Int64
}

struct MemberRecord: Codable, Sendable, Equatable {
    var userId: String
    var state: String  // "joined" | "invited"
    var invitedAt: Int64
    var inviterId: String?
    var joinedAt: Int64
    var readTs: Int64
    var deliveredTs: Int64
    var hiddenState: String  // unhidden | hidden_allow_auto_unhide | hidden_prevent_auto_unhide
    var tsMessageOffset: Int64
    /// Position in the global change sequence of the last per-user change (channel changelogs).
    var changeSeq: Int64
    var changedAt: Int64
    /// What the channel's message and mention totals (`ChannelRecord.countedMessages` and
    /// `countedMentions`) exceed this member's unread counts by (UnreadCounters.swift): a
    /// new message moves the channel's totals, not every member's row.
    var unreadBase: Int64 = 0
    var mentionBase: Int64 = 0

    init(userId: String, state: String, invitedAt: Int64, inviterId: String?, joinedAt: Int64, readTs: Int64,
         deliveredTs: Int64, hiddenState: String, tsMessageOffset: Int64, changeSeq: Int64, changedAt: Int64,
         unreadBase: Int64 = 0, mentionBase: Int64 = 0) {
        self.userId = userId
        self.state = state
        self.invitedAt = invitedAt
        self.inviterId = inviterId
        self.joinedAt = joinedAt
        self.readTs = readTs
        self.deliveredTs = deliveredTs
        self.hiddenState = hiddenState
        self.tsMessageOffset = tsMessageOffset
        self.changeSeq = changeSeq
        self.changedAt = changedAt
        self.unreadBase = unreadBase
        self.mentionBase = mentionBase
    }

    private enum CodingKeys: String, CodingKey {
        case userId, state, invitedAt, inviterId, joinedAt, readTs, deliveredTs, hiddenState, tsMessageOffset
        case changeSeq, changedAt
    }

    // Records of the old layout (LegacyImport.swift) have no counters: they are counted after
    // the import.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            userId: try c.decode(String.self, forKey: .userId), state: try c.decode(String.self, forKey: .state),
            invitedAt: try c.decode(Int64.self, forKey: .invitedAt),
            inviterId: try c.decodeIfPresent(String.self, forKey: .inviterId),
            joinedAt: try c.decode(Int64.self, forKey: .joinedAt), readTs: try c.decode(Int64.self, forKey: .readTs),
            deliveredTs: try c.decode(Int64.self, forKey: .deliveredTs),
            hiddenState: try c.decode(String.self, forKey: .hiddenState),
            tsMessageOffset: try c.decode(Int64.self, forKey: .tsMessageOffset),
            changeSeq: try c.decode(Int64.self, forKey: .changeSeq), changedAt: try c.decode(Int64.self, forKey: .changedAt))
    }
}

struct RestrictionRecord: Codable, Sendable, Equatable {
    var userId: String
    var startAt: Int64
    var endAt: Int64  // -1 = indefinitely
    var description: String

    func isActive(at now: Int64) -> Bool { endAt < 0 || endAt > now }
}

struct ChannelRecord: Codable, Sendable {
    var url: String
    var name: String
    var coverUrl: String
    var customType: String
    var data: String
    var createdAt: Int64
    var updatedAt: Int64
    var createdBy: String?
    var isDistinct: Bool
    var isSuper: Bool
    var isPublic: Bool
    var isEphemeral: Bool
    var freeze: Bool
    /// Persisted as `member` records, one per member; the stored channel record has none
    /// (an empty object; a database of an earlier version has them here and is migrated).
    var members: [String: MemberRecord]
    var operatorIds: [String]
    var bans: [String: RestrictionRecord]
    var mutes: [String: RestrictionRecord]
    var metadata: [String: String]
    var metacounters: [String: Int64]
    var pinnedMessageIds: [Int64]
    var lastMessageId: Int64
    var changeSeq: Int64
    var changedAt: Int64
    /// Countable messages (UnreadRule) ever sent in the channel, and those of them that
    /// mention the whole channel: a joined member's unread counts are these less the
    /// member's bases (UnreadCounters.swift).
    var countedMessages: Int64 = 0
    var countedMentions: Int64 = 0

    // Records of the old layout (LegacyImport.swift) have no totals: their members are
    // counted after the import, against totals of 0.
    private enum CodingKeys: String, CodingKey {
        case url, name, coverUrl, customType, data, createdAt, updatedAt, createdBy, isDistinct, isSuper, isPublic
        case isEphemeral, freeze, members, operatorIds, bans, mutes, metadata, metacounters, pinnedMessageIds
        case lastMessageId, changeSeq, changedAt
    }

    var joinedCount: Int { members.values.filter { $0.state == "joined" }.count }
    func isJoined(_ userId: String) -> Bool { members[userId]?.state == "joined" }
    func isOperator(_ userId: String) -> Bool { operatorIds.contains(userId) }
}

struct ThumbnailRecord: Codable, Sendable, Equatable {
    var url: String
    var width: Int64
    var height: Int64
    var realWidth: Int64
    var realHeight: Int64
    /// The stored file of a thumbnail the server made (Images.swift), deleted with the message.
    var fileId: String? = nil
}

struct FileInfoRecord: Codable, Sendable {
    var url: String  // absolute URL, or a server path ("/v3/files/...") for uploads
    var name: String
    var size: Int64
    var type: String
    var fileId: String?
}

struct ReactionRecord: Codable, Sendable {
    var key: String
    var userIds: [String]
    var updatedAt: Int64
}

struct MetaArrayItem: Codable, Sendable, Equatable {
    var key: String
    var value: [String]
}

struct MessageRecord: Codable, Sendable {
    var id: Int64
    var channelUrl: String
    var type: String  // MESG | FILE | ADMM
    var message: String
    var senderId: String?
    var reqId: String
    var customType: String
    var data: String
    var createdAt: Int64
    var updatedAt: Int64
    var mentionType: String
    var mentionedUserIds: [String]
    var isOpMsg: Bool
    var silent: Bool
    var parentId: Int64
    var isReplyToChannel: Bool
    var file: FileInfoRecord?
    var thumbnails: [ThumbnailRecord]
    var sortedMetaarray: [MetaArrayItem]
    var reactions: [ReactionRecord]
    var replyCount: Int64
    var lastRepliedAt: Int64
    var threadUpdatedAt: Int64
    var recentReplierIds: [String]
    var changeSeq: Int64
    var changedAt: Int64
    /// The poll the message carries (Services/Polls.swift); nil or 0: none. Optional so that
    /// records of the old layout (LegacyImport.swift), which have no poll, still decode.
    var pollId: Int64? = nil
    /// Translations of `message` by language tag (OutgoingCalls/Translation.swift); nil: none.
    var translations: [String: String]? = nil
}

struct MessageTombstoneRecord: Codable, Sendable {
    var messageId: Int64
    var channelUrl: String
    var deletedAt: Int64
    var seq: Int64
    /// The deleted message's sender and request id: a send that repeats them was carried out
    /// already and must not store the message again (Services/Messages.swift `send`).
    var senderId: String? = nil
    var reqId: String? = nil
}

/// What became of an earlier send with a request id (`MessageQueries.earlierSend`).
enum EarlierSend: Sendable, Equatable {
    /// Its message, by id.
    case stored(Int64)
    /// Its message was deleted since.
    case deleted(Int64)
}

struct MembershipTombstoneRecord: Codable, Sendable {
    var userId: String
    var channelUrl: String
    var at: Int64
    var seq: Int64
}

struct FileRecord: Codable, Sendable {
    var id: String
    var channelUrl: String
    var messageId: Int64
    var name: String
    var type: String
    var size: Int64
}

struct ReportRecord: Codable, Sendable {
    var id: Int64
    var reportType: String
    var category: String
    var reportingUserId: String?
    var offendingUserId: String?
    var channelUrl: String?
    var messageId: Int64?
    var description: String
    var createdAt: Int64
}

/// A poll of a group channel with its options (docs/PROTOCOL.md §7.6). Votes are rows of their
/// own (`poll_votes`), counted when the poll is shown.
struct PollRecord: Sendable, Equatable {
    var id: Int64
    var channelUrl: String
    /// The message that carries the poll (0 until one is sent with `poll_id`).
    var messageId: Int64
    var title: String
    var allowUserSuggestion: Bool
    var allowMultipleVotes: Bool
    /// When the poll closes by itself (ms); -1: never.
    var closeAt: Int64
    /// Closed by a request (`close`); a poll whose `closeAt` has passed is closed as well.
    var isClosed: Bool
    var createdBy: String?
    var createdAt: Int64
    var updatedAt: Int64
    /// The id the next option gets: option ids are never reused within a poll.
    var nextOptionId: Int64
    var changeSeq: Int64
    var changedAt: Int64
    var options: [PollOptionRecord]

    func isOpen(at now: Int64) -> Bool { !isClosed && (closeAt < 0 || closeAt > now) }
}

struct PollOptionRecord: Sendable, Equatable {
    var id: Int64
    var text: String
    var createdBy: String?
    var createdAt: Int64
    var updatedAt: Int64
}

struct PollTombstoneRecord: Sendable {
    var pollId: Int64
    var channelUrl: String
    var deletedAt: Int64
    var seq: Int64
}

/// What the votes of a poll add up to.
struct PollTally: Sendable {
    /// Votes per option id (options without votes are absent).
    var counts: [Int64: Int64] = [:]
    /// Users with at least one vote.
    var voterCount: Int64 = 0
}
