// Typed read-only views over the event stream's data (docs/PROTOCOL.md §9), in the manner
// of WireObjects.swift: the value as it came, a field read on demand.

/// The `data` of an event (docs/PROTOCOL.md §9): `category`, `channel_url`, the channel
/// rendered for the recipient (§9.1) and the category's own fields.
struct WireEventData: WireObject {
    let json: JSONValue

    var category: String? { json[WireField.category]?.stringValue }
    var channelURL: String? { json[WireField.channelURL]?.stringValue }
    /// Absent from `channel_deleted`, and from a replayed event after its channel's first (§9.1).
    var channel: WireChannel? { json[WireField.channel].map(WireChannel.init) }
    /// As sent (an array of members, §9.1); whoever applies the event checks its type.
    var changedMembers: JSONValue? { json[WireField.changedMembers] }
    /// `message_received`, `message_updated`, `mention`.
    var message: WireMessage? { json[WireField.message].map(WireMessage.init) }
    /// `message_deleted`.
    var messageID: Int64? { json[WireField.messageID]?.int64Value }
    /// `reaction_updated`.
    var reaction: WireReaction? { json[WireField.reaction].map(WireReaction.init) }
    /// `poll_updated`, `poll_voted`: the poll as the recipient sees it.
    var poll: WirePoll? { json[WireField.poll].map(WirePoll.init) }
    /// `poll_deleted`.
    var pollID: Int64? { json[WireField.pollID]?.int64Value }
    /// `thread_info_updated`: the parent and its new `thread_info`.
    var parentMessageID: Int64? { json[WireField.parentMessageID]?.int64Value }
    var threadInfo: WireThreadInfo? { json[WireField.threadInfo].map(WireThreadInfo.init) }
    /// The user the event is about (`read_status`, `user_left`, `user_banned`, ...).
    var user: WireUser? { json[WireField.user].map(WireUser.init) }
    /// `invitation_declined`: who declined.
    var invitee: WireUser? { json[WireField.invitee].map(WireUser.init) }
    /// `user_joined`: who joined.
    var users: [WireUser]? { json[WireField.users]?.arrayValue?.map(WireUser.init) }
    /// `invitation_received`: who was invited now.
    var invitees: [WireUser]? { json[WireField.invitees]?.arrayValue?.map(WireUser.init) }
    /// `typing_status`: the current typers, as sent (handed on as text).
    var typingUsers: JSONValue? { json[WireField.typingUsers] }
}

/// The change of a `reaction_updated` event (docs/PROTOCOL.md §9):
/// `{message_id, key, user_id, operation, updated_at}`.
struct WireReaction: WireObject {
    let json: JSONValue

    var messageID: Int64? { json[WireField.messageID]?.int64Value }
    var key: String? { json[WireField.key]?.stringValue }
    var userID: String? { json[WireField.userID]?.stringValue }
    /// The operation is "DELETE"; anything else (or none) adds.
    var isDeletion: Bool { json[WireField.operation]?.stringValue == "DELETE" }
    /// As sent: copied into the message's reaction entry untouched.
    var updatedAt: JSONValue? { json[WireField.updatedAt] }
}

/// A poll (docs/PROTOCOL.md §7.6): in events, in a message's `poll`, in poll changelogs and
/// in the answers of the poll operations. Kept whole as it came.
struct WirePoll: WireObject {
    let json: JSONValue

    var id: Int64? { json[WireField.id]?.int64Value }
    /// The message that carries it; 0 while none does.
    var messageID: Int64? { json[WireField.messageID]?.int64Value }
    var channelURL: String? { json[WireField.channelURL]?.stringValue }
    /// Present when the poll was rendered for a user (absent from a message event's copy).
    var votedOptionIDs: JSONValue? { json[WireField.votedOptionIDs] }
}

/// The data of the stream's own frames `connected` and `resync` (docs/PROTOCOL.md §9).
/// Its `error` frame carries an error body (`WireError`).
struct WireStreamNotice: WireObject {
    let json: JSONValue

    var lastEventID: Int64? { json[WireField.lastEventID]?.int64Value }
    var reason: String? { json[WireField.reason]?.stringValue }
}
