// Values the chat cache takes and returns. Stored objects come back as their canonical
// JSON text (`json`), ready to hand to the C ABI, plus the columns that ordering needs.

/// The ordering key of a message: `(created_at, message_id)`, ascending. Messages with
/// equal `created_at` are kept apart by `message_id`. A key need not be a stored message
/// (e.g. `(ts, Int64.max)` stands for "everything up to and including ts").
public struct MessageKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var createdAt: Int64
    public var messageID: Int64

    public init(createdAt: Int64, messageID: Int64) {
        self.createdAt = createdAt
        self.messageID = messageID
    }

    /// Before every message.
    public static let oldest = MessageKey(createdAt: .min, messageID: .min)
    /// After every message.
    public static let newest = MessageKey(createdAt: .max, messageID: .max)

    public static func < (lhs: MessageKey, rhs: MessageKey) -> Bool {
        (lhs.createdAt, lhs.messageID) < (rhs.createdAt, rhs.messageID)
    }

    public var description: String { "(\(createdAt), \(messageID))" }
}

/// A message as stored: canonical JSON plus the columns the engine needs without parsing.
public struct CachedMessage: Sendable, Hashable {
    public var messageID: Int64
    public var channelURL: String
    public var createdAt: Int64
    public var updatedAt: Int64
    /// `""` when the server message carries none.
    public var reqID: String
    /// Canonical JSON text of the message object, exactly as stored.
    public var json: String {
        didSet { optionalMembers = nil }  // they describe the text they were read with
    }
    /// Where its optional members lie in `json`, as stored beside it (nil: not known).
    /// Derived from `json`: not part of equality.
    var optionalMembers: OptionalMemberSpans? = nil

    public static func == (lhs: CachedMessage, rhs: CachedMessage) -> Bool {
        lhs.messageID == rhs.messageID && lhs.channelURL == rhs.channelURL && lhs.createdAt == rhs.createdAt
            && lhs.updatedAt == rhs.updatedAt && lhs.reqID == rhs.reqID && lhs.json == rhs.json
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(messageID)
        hasher.combine(json)
    }

    public var key: MessageKey { MessageKey(createdAt: createdAt, messageID: messageID) }
}

/// The sending state of a message that exists only locally (not yet accepted by the server).
public enum LocalSendingStatus: String, Sendable, CaseIterable {
    case pending
    case failed
}

/// A pending or failed message. Its JSON has `message_id` 0 and `sending_status`.
public struct CachedLocalMessage: Sendable, Hashable {
    public var reqID: String
    public var channelURL: String
    public var createdAt: Int64
    public var status: LocalSendingStatus
    /// The failure's `ParleyErrorCode` raw value, 0 while pending.
    public var errorCode: Int32
    public var errorMessage: String
    public var json: String
}

/// What an upsert did with one incoming server message.
public enum MessageUpsertOutcome: Sendable, Hashable {
    /// New to the cache.
    case inserted
    /// The message replaced the pending/failed local message with this `req_id` (which is
    /// gone from the local list, together with its outbox row). Report it as an update
    /// of that pending message, never as a second message.
    case replacedLocal(reqID: String)
    /// An existing copy was replaced.
    case updated
    /// The stored copy was kept: it is as new (or newer), or identical.
    case unchanged
}

/// What an upsert did with one channel.
public enum ChannelUpsertOutcome: Sendable, Hashable {
    case inserted
    case updated
    /// The stored JSON was already identical.
    case unchanged
}

/// `message_type_filter` of the message list parameters.
public enum MessageTypeFilter: String, Sendable, CaseIterable {
    case all
    /// `MESG`
    case user
    /// `FILE`
    case file
    /// `ADMM`
    case admin

    /// The wire `type` value this filter keeps, nil for all.
    public var wireType: String? {
        switch self {
        case .all: nil
        case .user: "MESG"
        case .file: "FILE"
        case .admin: "ADMM"
        }
    }
}

/// `reply_type` of the message list parameters.
public enum ReplyTypeFilter: String, Sendable, CaseIterable {
    /// Every message, replies included.
    case all
    /// Top-level messages only (`parent_message_id` 0).
    case none
    /// Top-level messages and replies sent to the channel too (`is_reply_to_channel`).
    case onlyReplyToChannel = "only_reply_to_channel"
}

/// Which messages a cached page holds. The default keeps everything (no filter).
public struct MessageFilter: Sendable, Hashable {
    public var messageType: MessageTypeFilter
    /// Kept custom types; nil, empty or containing "*" means all.
    public var customTypes: [String]?
    /// Kept senders (`user.user_id`); nil or empty means all.
    public var senderUserIDs: [String]?
    public var replyType: ReplyTypeFilter

    public init(
        messageType: MessageTypeFilter = .all, customTypes: [String]? = nil,
        senderUserIDs: [String]? = nil, replyType: ReplyTypeFilter = .all
    ) {
        self.messageType = messageType
        self.customTypes = customTypes
        self.senderUserIDs = senderUserIDs
        self.replyType = replyType
    }

    /// The custom types that restrict the page, nil when all are kept.
    var effectiveCustomTypes: [String]? {
        guard let customTypes, !customTypes.isEmpty, !customTypes.contains("*") else { return nil }
        return customTypes
    }

    var effectiveSenderUserIDs: [String]? {
        guard let senderUserIDs, !senderUserIDs.isEmpty else { return nil }
        return senderUserIDs
    }

    /// True when nothing is filtered out.
    public var keepsEverything: Bool {
        messageType == .all && effectiveCustomTypes == nil && effectiveSenderUserIDs == nil && replyType == .all
    }

    /// The chunk scope of ranges loaded under this filter: the server's continuity flags
    /// hold "under the filters", so a range loaded with a filter is continuous only for
    /// that filter. `""` for no filter (such a range is continuous for every filter).
    /// Equal filters give equal scopes (lists are sorted and deduplicated).
    public var continuityScope: String {
        if keepsEverything { return "" }
        var parts: [String] = []
        if let type = messageType.wireType { parts.append("type=\(type)") }
        if let types = effectiveCustomTypes {
            parts.append("custom_types=" + JSONValue.array(Set(types).sorted(by: utf8Precedes).map { .string($0) }).canonicalText)
        }
        if let senders = effectiveSenderUserIDs {
            parts.append("sender_ids=" + JSONValue.array(Set(senders).sorted(by: utf8Precedes).map { .string($0) }).canonicalText)
        }
        if replyType != .all { parts.append("reply=\(replyType.rawValue)") }
        return parts.joined(separator: ";")
    }

    /// The same test as the cache's SQL, for a message object in hand (real-time events).
    public func matches(_ message: JSONValue) -> Bool {
        if let type = messageType.wireType, message["type"]?.stringValue != type { return false }
        if let types = effectiveCustomTypes, !types.contains(message["custom_type"]?.stringValue ?? "") { return false }
        if let senders = effectiveSenderUserIDs, !senders.contains(message["user"]?["user_id"]?.stringValue ?? "") {
            return false
        }
        let isReply = (message["parent_message_id"]?.int64Value ?? 0) != 0
        switch replyType {
        case .all: return true
        case .none: return !isReply
        case .onlyReplyToChannel: return !isReply || message["is_reply_to_channel"]?.boolValue == true
        }
    }
}

/// The channel list orders the cache can page through (tie-break `channel_url` ascending,
/// the server's rule).
public enum ChannelListOrder: String, Sendable, CaseIterable {
    /// `created_at` newest first.
    case chronological
    /// Channels with a last message by `last_message.created_at`, newest first; then the
    /// others by `created_at`, newest first.
    case latestLastMessage = "latest_last_message"
    /// `name` ascending by its order key (the UTF-8 bytes of its NFC form), then URL.
    case channelNameAlphabetical = "channel_name_alphabetical"
}

/// What a channel's position in every list order depends on. Take it from the last
/// channel of a page (`CachedChannel.orderKey`) to ask for the next page.
public struct ChannelOrderKey: Sendable, Hashable {
    public var channelURL: String
    public var createdAt: Int64
    /// `last_message.created_at`, nil when the channel has no last message.
    public var lastMessageCreatedAt: Int64?
    public var name: String

    public init(channelURL: String, createdAt: Int64, lastMessageCreatedAt: Int64?, name: String) {
        self.channelURL = channelURL
        self.createdAt = createdAt
        self.lastMessageCreatedAt = lastMessageCreatedAt
        self.name = name
    }
}

/// A channel as stored.
public struct CachedChannel: Sendable, Hashable {
    public var orderKey: ChannelOrderKey
    /// Canonical JSON text of the channel object.
    public var json: String

    public var channelURL: String { orderKey.channelURL }
}

/// A continuous range of a channel's messages: the cache holds every message (matching
/// the chunk's scope) whose key lies in `start...end`.
public struct MessageChunk: Sendable, Hashable {
    public var channelURL: String
    /// `""` for unfiltered; else `MessageFilter.continuityScope`.
    public var scope: String
    public var start: MessageKey
    public var end: MessageKey
    /// No message older than `start` exists on the server.
    public var reachesOldest: Bool
    /// No message newer than `end` exists (as far as the real-time stream tells).
    public var reachesNewest: Bool

    public func contains(_ key: MessageKey) -> Bool { start <= key && key <= end }
}

/// One queued request of the outbox.
public struct OutboxEntry: Sendable, Hashable {
    /// Position in send order (strictly increasing, never reused).
    public var sequence: Int64
    public var reqID: String
    public var channelURL: String
    /// What to send, e.g. "user_message" / "file_message" (the engine's vocabulary).
    public var kind: String
    /// The request body to send (JSON text as given).
    public var requestJSON: String
    /// Send attempts so far (`recordOutboxAttempt`).
    public var attempts: Int
    /// False after a failure that resending cannot fix (auto-resend skips it).
    public var retryable: Bool
    /// `ParleyErrorCode` raw value of the last failure, 0 if none.
    public var lastErrorCode: Int32
    public var lastErrorMessage: String
}

/// What a request to send looks like when queued with its pending message.
public struct OutboxRequest: Sendable, Hashable {
    public var kind: String
    public var requestJSON: String
    /// Attempts counted when the request is stored: 1 when the sender counts its first
    /// attempt in the transaction that stores the message (Sync/Engine+Outbox.swift).
    public var attempts: Int

    public init(kind: String, requestJSON: String, attempts: Int = 0) {
        self.kind = kind
        self.requestJSON = requestJSON
        self.attempts = attempts
    }
}

/// What `evictIfNeeded` removed.
public struct EvictionReport: Sendable, Hashable {
    /// Channels whose succeeded messages, chunks and message token were removed, in the
    /// order evicted (least recently accessed first).
    public var evictedChannelURLs: [String]
    public var removedMessageCount: Int
    public var usedBytesBefore: Int64
    public var usedBytesAfter: Int64
}
