// Typed read-only views over the server's objects (docs/PROTOCOL.md §4): each holds the
// JSON value as it came and reads a field on demand, so wrapping costs nothing and what
// is stored or handed on stays the value (or text) the server sent. An accessor is nil
// when the field is missing or of another type; the caller picks the default.

/// What every typed view over the server's JSON is: the value as it came (`json`), wrapped
/// without a copy by `init(_:)`, its fields read by the type's accessors.
protocol WireObject: Sendable {
    var json: JSONValue { get }
    /// The memberwise initializer of a struct whose one stored property is `json`.
    init(json: JSONValue)
}

extension WireObject {
    init(_ json: JSONValue) { self.init(json: json) }
}

/// A user, a basic user or a member (docs/PROTOCOL.md §4.1, §4.3).
struct WireUser: WireObject {
    let json: JSONValue

    var userID: String? { json[WireField.userID]?.stringValue }
}

/// A channel member (docs/PROTOCOL.md §4.3): a user with its membership's fields.
typealias WireMember = WireUser

/// A group channel (docs/PROTOCOL.md §4.2), usually rendered for the current user.
struct WireChannel: WireObject {
    let json: JSONValue

    var channelURL: String? { json[WireField.channelURL]?.stringValue }
    var name: String? { json[WireField.name]?.stringValue }
    var customType: String? { json[WireField.customType]?.stringValue }
    var createdAt: Int64? { json[WireField.createdAt]?.int64Value }
    var isPublic: Bool? { json[WireField.isPublic]?.boolValue }
    var isSuper: Bool? { json[WireField.isSuper]?.boolValue }
    var freeze: Bool? { json[WireField.freeze]?.boolValue }
    /// "joined", "invited" or "none"; nil in a render that is not for a user.
    var memberState: String? { json[WireField.memberState]?.stringValue }
    var hiddenState: String? { json[WireField.hiddenState]?.stringValue }
    var unreadMessageCount: Int64? { json[WireField.unreadMessageCount]?.int64Value }
    var tsMessageOffset: Int64? { json[WireField.tsMessageOffset]?.int64Value }

    /// The last message, nil when absent or not an object (none visible to the user).
    var lastMessage: WireMessage? {
        guard let value = json[WireField.lastMessage], case .object = value else { return nil }
        return WireMessage(value)
    }

    /// Whether the render carries `members` at all (whatever its value): a render with them
    /// is whole, one without (a live message event's, §9.1) says nothing about them.
    var hasMembers: Bool { json[WireField.members] != nil }

    var members: [JSONValue]? { json[WireField.members]?.arrayValue }

    /// The text value of a metadata key.
    func metadataValue(_ key: String) -> String? { json[WireField.metadata]?[key]?.stringValue }
}

/// A message (docs/PROTOCOL.md §4.4).
struct WireMessage: WireObject {
    let json: JSONValue

    var messageID: Int64? { json[WireField.messageID]?.int64Value }
    var createdAt: Int64? { json[WireField.createdAt]?.int64Value }
    var channelURL: String? { json[WireField.channelURL]?.stringValue }
    var reqID: String? { json[WireField.reqID]?.stringValue }
    /// The sender (absent for `ADMM`).
    var user: WireUser? { json[WireField.user].map(WireUser.init) }
    /// The sender's `user.user_id`.
    var senderID: String? { json[WireField.user]?[WireField.userID]?.stringValue }
    var mentionType: String? { json[WireField.mentionType]?.stringValue }
    var mentionedUsers: [WireUser]? { json[WireField.mentionedUsers]?.arrayValue?.map(WireUser.init) }
    /// 0 (or absent) for a top-level message.
    var parentMessageID: Int64? { json[WireField.parentMessageID]?.int64Value }
}

/// One entry of a message's `reactions` (docs/PROTOCOL.md §4.4): a key and who reacted with it.
struct WireMessageReaction: WireObject {
    let json: JSONValue

    var key: String? { json[WireField.key]?.stringValue }
    var userIDs: [JSONValue]? { json[WireField.userIDs]?.arrayValue }
}

/// A thread parent's `thread_info` (docs/PROTOCOL.md §4.4).
struct WireThreadInfo: WireObject {
    let json: JSONValue

    var replyCount: Int64? { json[WireField.replyCount]?.int64Value }
}
