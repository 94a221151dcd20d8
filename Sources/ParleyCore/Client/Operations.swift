/// The catalog of REST operations a client can perform on the user's behalf: one entry
/// per group-channel and message operation of the protocol (docs/PROTOCOL.md). The
/// C ABI and the Python binding expose exactly these names, so the catalog is the
/// single list to extend.
///
/// Parameters arrive as one JSON object. Placeholders in `path` (`{channel_url}`,
/// `{message_id}`, ...) are taken out of it; `{user_id}` defaults to the connected user.
/// The rest goes to the query string (GET, DELETE) or the JSON body (POST, PUT).
public struct OperationSpec: Sendable {
    public let name: String
    public let method: String
    public let path: String
    /// Parameters that must be present (checked before any network I/O).
    public let required: [String]
    /// Parameters fixed by the operation itself (e.g. `freeze: true`).
    public let fixed: [String: JSONValue]
    /// Values used when the caller does not give the parameter: the reference SDK's defaults
    /// where they differ from the server's (e.g. `include: false` for message lists).
    public let defaults: [String: JSONValue]
    /// Names the caller may use for a parameter's values, mapped to the server's (`.null`:
    /// leave the parameter out), e.g. the SDK's message types `user` / `file` / `admin`.
    public let valueNames: [String: [String: JSONValue]]
    /// What a successful answer writes to (or removes from) the cache.
    public let effect: CacheEffect

    init(_ name: String, _ method: String, _ path: String, required: [String] = [], fixed: [String: JSONValue] = [:],
         defaults: [String: JSONValue] = [:], valueNames: [String: [String: JSONValue]] = [:], effect: CacheEffect = .none) {
        self.name = name
        self.method = method
        self.path = path
        self.required = required
        self.fixed = fixed
        self.defaults = defaults
        self.valueNames = valueNames
        self.effect = effect
    }

    /// Placeholder names in `path`, in order.
    public var pathParameters: [String] {
        var names: [String] = []
        var rest = path[...]
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            names.append(String(rest[rest.index(after: open)..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }
}

public enum OperationCatalog {
    private static let channel = "/v3/group_channels/{channel_url}"
    private static let message = "/v3/group_channels/{channel_url}/messages/{message_id}"
    private static let me = "/v3/users/{user_id}"
    /// Message lists as the reference SDK's params: the anchor's own messages only when asked
    /// (`include`, the SDK's `is_inclusive`), message types also by the collections' names.
    private static let messageListDefaults: [String: JSONValue] = [WireField.include: false]
    private static let messageTypeNames: [String: [String: JSONValue]] = [
        WireField.messageType: ["all": .null, "user": "MESG", "file": "FILE", "admin": "ADMM"]
    ]

    public static let all: [OperationSpec] = [
        // The current user
        OperationSpec("get_current_user", "GET", me),
        OperationSpec("update_current_user", "PUT", me),
        OperationSpec("get_unread_message_count", "GET", me + "/unread_message_count"),
        OperationSpec("get_unread_channel_count", "GET", me + "/unread_channel_count"),
        OperationSpec("mark_all_as_read", "PUT", me + "/mark_as_read_all"),
        OperationSpec("get_channel_invitation_preference", "GET", me + "/channel_invitation_preference"),
        OperationSpec("set_channel_invitation_preference", "PUT", me + "/channel_invitation_preference", required: [WireField.autoAccept]),
        // Users
        OperationSpec("list_users", "GET", "/v3/users"),
        // Channel lists
        OperationSpec("list_my_group_channels", "GET", me + "/my_group_channels", effect: .storeChannels(key: WireField.channels)),
        OperationSpec("list_group_channels", "GET", "/v3/group_channels", effect: .storeChannels(key: WireField.channels)),
        // The reference's public channel list: public channels only, without empty ones unless
        // `show_empty`; `public_membership_filter` all (default) or joined.
        OperationSpec("list_public_group_channels", "GET", "/v3/group_channels", fixed: [WireField.publicMode: "public"],
                      defaults: [WireField.showEmpty: false], effect: .storeChannels(key: WireField.channels)),
        OperationSpec("list_channel_changelogs", "GET", me + "/my_group_channels/changelogs", effect: .channelChangelog),
        // One channel
        OperationSpec("create_group_channel", "POST", "/v3/group_channels", effect: .storeChannel),
        OperationSpec("get_group_channel", "GET", channel, effect: .storeChannel),
        OperationSpec("update_group_channel", "PUT", channel, effect: .storeChannel),
        OperationSpec("delete_group_channel", "DELETE", channel, effect: .removeChannel(.deleted)),
        OperationSpec("invite_users", "POST", channel + "/invite", required: [WireField.userIDs], effect: .storeChannel),
        OperationSpec("accept_invitation", "PUT", channel + "/accept", effect: .storeChannel),
        OperationSpec("decline_invitation", "PUT", channel + "/decline", effect: .removeChannel(.invitationDeclined)),
        OperationSpec("join_channel", "PUT", channel + "/join", effect: .storeChannel),
        OperationSpec("leave_channel", "PUT", channel + "/leave", effect: .removeChannel(.left)),
        OperationSpec("freeze_channel", "PUT", channel + "/freeze", fixed: [WireField.freeze: true], effect: .storeChannel),
        OperationSpec("unfreeze_channel", "PUT", channel + "/freeze", fixed: [WireField.freeze: false], effect: .storeChannel),
        OperationSpec("hide_channel", "PUT", channel + "/hide"),
        OperationSpec("unhide_channel", "DELETE", channel + "/hide"),
        OperationSpec("reset_my_history", "PUT", channel + "/reset_user_history", effect: .truncateHistory),
        OperationSpec("start_typing", "POST", channel + "/typing"),
        OperationSpec("end_typing", "DELETE", channel + "/typing"),
        OperationSpec("mark_as_read", "PUT", channel + "/messages/mark_as_read"),
        OperationSpec("mark_as_delivered", "PUT", channel + "/messages/mark_as_delivered"),
        // Members and moderation
        OperationSpec("list_members", "GET", channel + "/members"),
        OperationSpec("get_member_state", "GET", channel + "/members/{member_id}"),
        OperationSpec("list_operators", "GET", channel + "/operators"),
        OperationSpec("add_operators", "POST", channel + "/operators", required: [WireField.operatorIDs]),
        OperationSpec("remove_operators", "DELETE", channel + "/operators", required: [WireField.operatorIDs]),
        OperationSpec("remove_all_operators", "DELETE", channel + "/operators", fixed: [WireField.deleteAll: true]),
        OperationSpec("ban_user", "POST", channel + "/ban", required: [WireField.userID]),
        OperationSpec("unban_user", "DELETE", channel + "/ban/{target_user_id}"),
        OperationSpec("get_ban", "GET", channel + "/ban/{target_user_id}"),
        OperationSpec("list_banned_users", "GET", channel + "/ban"),
        OperationSpec("mute_user", "POST", channel + "/mute", required: [WireField.userID]),
        OperationSpec("unmute_user", "DELETE", channel + "/mute/{target_user_id}"),
        OperationSpec("get_mute", "GET", channel + "/mute/{target_user_id}"),
        OperationSpec("list_muted_users", "GET", channel + "/mute"),
        // Reports
        OperationSpec("report_channel", "POST", "/v3/report/group_channels/{channel_url}", required: [WireField.reportCategory]),
        OperationSpec("report_message", "POST", "/v3/report/group_channels/{channel_url}/messages/{message_id}",
                      required: [WireField.reportCategory]),
        OperationSpec("report_user", "POST", "/v3/report/users/{offending_user_id}", required: [WireField.reportCategory]),
        // Metadata and metacounters
        OperationSpec("get_metadata", "GET", channel + "/metadata"),
        OperationSpec("create_metadata", "POST", channel + "/metadata", required: [WireField.metadata]),
        OperationSpec("update_metadata", "PUT", channel + "/metadata", required: [WireField.metadata]),
        OperationSpec("delete_metadata", "DELETE", channel + "/metadata/{key}"),
        OperationSpec("delete_all_metadata", "DELETE", channel + "/metadata"),
        OperationSpec("get_metacounters", "GET", channel + "/metacounter"),
        OperationSpec("create_metacounters", "POST", channel + "/metacounter", required: [WireField.metacounter]),
        OperationSpec("update_metacounters", "PUT", channel + "/metacounter", required: [WireField.metacounter]),
        OperationSpec("delete_metacounter", "DELETE", channel + "/metacounter/{key}"),
        OperationSpec("delete_all_metacounters", "DELETE", channel + "/metacounter"),
        // Messages
        OperationSpec("list_messages", "GET", channel + "/messages", defaults: messageListDefaults, valueNames: messageTypeNames,
                      effect: .storeMessages(key: WireField.messages)),
        OperationSpec("list_thread_replies", "GET", channel + "/messages", required: [WireField.parentMessageID],
                      defaults: messageListDefaults, valueNames: messageTypeNames, effect: .storeMessages(key: WireField.messages)),
        OperationSpec("get_total_message_count", "GET", channel + "/messages/total_count"),
        OperationSpec("list_message_changelogs", "GET", channel + "/messages/changelogs", effect: .messageChangelog),
        OperationSpec("get_message", "GET", message, effect: .storeMessage),
        OperationSpec("update_message", "PUT", message, effect: .storeMessage),
        OperationSpec("delete_message", "DELETE", message, effect: .removeMessage),
        OperationSpec("copy_message", "POST", message + "/copy", required: [WireField.destChannelURL], effect: .storeMessage),
        OperationSpec("add_reaction", "POST", message + "/reactions", required: [WireField.reaction]),
        OperationSpec("remove_reaction", "DELETE", message + "/reactions", required: [WireField.reaction]),
        OperationSpec("list_reactions", "GET", message + "/reactions"),
        OperationSpec("pin_message", "POST", message + "/pin"),
        OperationSpec("unpin_message", "DELETE", message + "/pin"),
        OperationSpec("add_message_meta_array", "POST", message + "/sorted_metaarray", required: [WireField.sortedMetaarray],
                      effect: .storeMessage),
        OperationSpec("update_message_meta_array", "PUT", message + "/sorted_metaarray", required: [WireField.sortedMetaarray],
                      effect: .storeMessage),
    ]

    private static let byName: [String: OperationSpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func spec(named name: String) -> OperationSpec? { byName[name] }
}

/// A REST call ready to send: the path with its query string, and the JSON body.
public struct PreparedCall: Sendable, Equatable {
    public var method: String
    public var pathAndQuery: String
    public var body: JSONValue?
}

extension OperationSpec {
    /// Checks the parameters and builds the call. `currentUserID` fills `{user_id}`.
    public func prepare(params: JSONValue, currentUserID: String) throws(ParleyError) -> PreparedCall {
        guard case .object(var fields) = params else {
            throw .invalidArgument("\(name): params must be a JSON object, got \(params.typeName)")
        }
        var path = ""
        var rest = self.path[...]
        while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
            path += rest[..<open]
            let key = String(rest[rest.index(after: open)..<close])
            let value: String
            switch fields.removeValue(forKey: key) {
            case .string(let text) where !text.isEmpty: value = text
            case .int(let number) where number >= 0: value = String(number)
            case nil where key == WireField.userID: value = currentUserID
            case nil: throw .invalidArgument("\(name): \(key) is required")
            case let other?: throw .invalidArgument("\(name): \(key) must be a non-empty string or a non-negative integer, got \(other.typeName == "string" ? "an empty string" : other.typeName)")
            }
            path += URLEncoding.encodePathSegment(value)
            rest = rest[rest.index(after: close)...]
        }
        path += rest
        for key in required where fields[key] == nil || fields[key] == .null {
            throw .invalidArgument("\(name): \(key) is required")
        }
        for (key, value) in defaults where fields[key] == nil || fields[key] == .null { fields[key] = value }
        for (key, names) in valueNames {
            if case .string(let given)? = fields[key], let value = names[given] { fields[key] = value == .null ? nil : value }
        }
        for (key, value) in fixed { fields[key] = value }
        if method == "GET" || method == "DELETE" {
            let query = try URLEncoding.queryString(fields, operation: name)
            return PreparedCall(method: method, pathAndQuery: query.isEmpty ? path : path + "?" + query, body: nil)
        }
        return PreparedCall(method: method, pathAndQuery: path, body: .object(fields))
    }
}
