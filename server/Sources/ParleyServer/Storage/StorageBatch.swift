import Foundation

// What a request changed of the channels and users it loaded, written in its transaction
// before it commits (RequestState.handleWriting). The tables are the schema of Storage/Migrations.swift.

/// One entry of the global event log (drives SSE fan-out and `Last-Event-ID` resume).
struct StoredEvent: Sendable {
    let id: Int64
    let createdAt: Int64
    let category: String
    let recipients: [String]
    let data: String
    /// The object `data` was serialized from, kept while the event is delivered live so that
    /// the hub does not parse what the request has just written (nil when read back).
    var fields: JSONObject? = nil
    /// Where the value of `fields["channel"]` is in `data` (UTF-8 offsets), set with `fields`
    /// by the request that serialized them: the hub splices each recipient's channel there.
    var channelRange: Range<Int>? = nil

    /// The category of an event that no stream receives: it ends the streams of its
    /// recipients, with the `code` and `message` of its data, on every server (a user
    /// deactivated or deleted). Not a valid event name on the wire, so no client can mistake it.
    static let endStreamsCategory = "parley:end_streams"

    /// The event's data as an object (nil if it is not one).
    var parsedData: JSONObject? {
        if let fields { return fields }
        guard case .object(let fields)? = try? JSONParser.parse(data) else { return nil }
        return fields
    }
}

/// The tables of a channel beside its row.
struct ChannelParts: OptionSet, Sendable {
    let rawValue: Int
    static let operators = ChannelParts(rawValue: 1)
    static let restrictions = ChannelParts(rawValue: 2)
    static let metadata = ChannelParts(rawValue: 4)
    static let metacounters = ChannelParts(rawValue: 8)
    static let all: ChannelParts = [.operators, .restrictions, .metadata, .metacounters]

    /// What differs between two states of a channel.
    static func changed(from old: ChannelRecord, to new: ChannelRecord) -> ChannelParts {
        var parts: ChannelParts = []
        if old.operatorIds != new.operatorIds { parts.insert(.operators) }
        if old.bans != new.bans || old.mutes != new.mutes { parts.insert(.restrictions) }
        if old.metadata != new.metadata { parts.insert(.metadata) }
        if old.metacounters != new.metacounters { parts.insert(.metacounters) }
        return parts
    }
}

struct MemberKey: Hashable, Sendable {
    let channelUrl: String
    let userId: String
}

struct MembershipKey: Hashable, Sendable {
    let userId: String
    let channelUrl: String
}

/// What one request changed of the records kept in memory, written in the request's
/// transaction before it commits (messages are written as they change: they are not kept in
/// memory). A key mapped to nil is deleted.
struct StorageBatch: Sendable {
    var users: [String: UserRecord?] = [:]
    /// Channel rows with their operators, restrictions, metadata and counters; members apart.
    var channels: [String: ChannelRecord?] = [:]
    /// Which of a stored channel's tables changed (absent: all of them, e.g. a new channel).
    var channelParts: [String: ChannelParts] = [:]
    /// The creation time of each written channel's last message (its `last_message_at`).
    var lastMessageAt: [String: Int64] = [:]
    var members: [MemberKey: MemberRecord?] = [:]
    var membershipTombstones: [MembershipKey: MembershipTombstoneRecord?] = [:]
    var events: [StoredEvent] = []
    var counters: [String: Int64] = [:]
    /// Who started typing where, and when (nil: stopped).
    var typing: [MemberKey: Int64?] = [:]

    var isEmpty: Bool {
        users.isEmpty && channels.isEmpty && members.isEmpty
            && membershipTombstones.isEmpty
            && events.isEmpty && counters.isEmpty && typing.isEmpty
    }
}

/// Recipients of an event in one text column: each id between separators, so that "is
/// user X a recipient" is a substring test (user ids never contain U+0001).
let recipientSeparator = "\u{1}"
