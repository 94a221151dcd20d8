/// The catalog of REST operations a client can perform on the user's behalf: one entry
/// per group-channel and message operation of the protocol (docs/PROTOCOL.md). The
/// C ABI and the Python binding expose exactly these names, so the catalog is the
/// single list to extend. It is also the one description of the operations' parameters:
/// their names, wire types (`OperationCatalog.parameterTypes`) and defaults, which the C
/// reference (docs/C-REFERENCE.md) and the Python binding's typed methods are generated from.
///
/// Parameters arrive as one JSON object. Placeholders in `path` (`{channel_url}`,
/// `{message_id}`, ...) are taken out of it; `{user_id}` defaults to the connected user.
/// The rest goes to the query string (GET, DELETE) or the JSON body (POST, PUT); with a
/// local file given (`uploads`), the body is sent as `multipart/form-data` instead.
public struct OperationSpec: Sendable {
    public let name: String
    public let method: String
    public let path: String
    /// One line on what the operation does and answers (Markdown: `code` in backquotes).
    public let summary: String
    /// Parameters that must be present (checked before any network I/O).
    public let required: [String]
    /// The other parameters the operation takes (docs/PROTOCOL.md), in the order shown; the
    /// server's default applies when one is left out. `parameters` lists them all.
    public let optional: [String]
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
    /// Parameters naming a local file, each mapped to the form part that carries the file's
    /// bytes (e.g. `cover_file_path` → `cover_file`): given one, the call is a multipart upload.
    public let uploads: [String: String]

    /// `optional`: parameter names separated by spaces.
    init(_ name: String, _ method: String, _ path: String, summary: String, required: [String] = [],
         optional: String = "", fixed: [String: JSONValue] = [:], defaults: [String: JSONValue] = [:],
         valueNames: [String: [String: JSONValue]] = [:], uploads: [String: String] = [:], effect: CacheEffect = .none) {
        self.name = name
        self.method = method
        self.path = path
        self.summary = summary
        self.required = required
        self.optional = optional.split(separator: " ").map(String.init)
        self.fixed = fixed
        self.defaults = defaults
        self.valueNames = valueNames
        self.uploads = uploads
        self.effect = effect
    }

    /// Every parameter the caller may give, in the order shown: the required ones (path
    /// placeholders but `{user_id}`, then `required`), then the optional ones (`{user_id}`,
    /// `optional`, then the parameters with a default, by name). A name the type table
    /// lacks is typed `any` (a test keeps the table complete).
    public var parameters: [OperationParameter] {
        var requiredNames = pathParameters.filter { $0 != WireField.userID }
        for name in required where !requiredNames.contains(name) { requiredNames.append(name) }
        var optionalNames = pathParameters.contains(WireField.userID) && !requiredNames.contains(WireField.userID)
            ? [WireField.userID] : []
        for name in optional + defaults.keys.sorted() where !(requiredNames + optionalNames).contains(name) {
            optionalNames.append(name)
        }
        let type = { (name: String) in OperationCatalog.parameterTypes[name] ?? .any }
        return requiredNames.map { OperationParameter(name: $0, type: type($0), required: true, default: nil) }
            + optionalNames.map { OperationParameter(name: $0, type: type($0), required: false, default: defaults[$0]) }
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

/// One parameter of an operation as the catalog describes it.
public struct OperationParameter: Sendable, Equatable {
    public let name: String
    public let type: ParameterType
    public let required: Bool
    /// The value the library sends when the caller leaves the parameter out (`OperationSpec.defaults`).
    public let `default`: JSONValue?
}

/// A parameter's JSON type on the wire, in docs/PROTOCOL.md's terms.
public enum ParameterType: String, Sendable, CaseIterable {
    case string
    case integer
    case boolean
    /// An array of strings.
    case stringArray = "string[]"
    /// An object of string values (`metadata`: string → string).
    case object
    /// An object of integer values (`metacounter`: string → integer).
    case integerObject = "object<integer>"
    /// An array of objects (`sorted_metaarray`: `{"key", "value": [string]}` items).
    case objectArray = "object[]"
    /// An array of integers (`option_ids`).
    case integerArray = "integer[]"
    /// Any JSON value.
    case any
}

public enum OperationCatalog {
    private static let channel = "/v3/group_channels/{channel_url}"
    private static let message = "/v3/group_channels/{channel_url}/messages/{message_id}"
    private static let me = "/v3/users/{user_id}"
    private static let poll = "/v3/group_channels/{channel_url}/polls/{poll_id}"
    /// Message lists as the reference SDK's params: the anchor's own messages only when asked
    /// (`include`, the SDK's `is_inclusive`), message types also by the collections' names.
    private static let messageListDefaults: [String: JSONValue] = [WireField.include: false]
    private static let messageTypeNames: [String: [String: JSONValue]] = [
        WireField.messageType: ["all": .null, "user": "MESG", "file": "FILE", "admin": "ADMM"]
    ]
    /// Optional parameters shared by operations: the channel lists' and the message lists'
    /// (docs/PROTOCOL.md §6.2, §7.2).
    private static let channelList = "token limit order metadata_order_key show_empty show_frozen show_member " +
        "show_metadata show_metacounter show_read_receipt show_delivery_receipt distinct_mode super_mode " +
        "member_state_filter custom_types custom_type_startswith channel_urls name name_contains name_startswith " +
        "members_exactly_in members_include_in query_type created_after created_before metadata_key metadata_values " +
        "metadata_value_startswith"
    private static let messageFilters = "message_type custom_types sender_ids include_reply_type include_reactions " +
        "include_thread_info include_parent_message_info with_sorted_meta_array include_meta_array"
    private static let messageList = "message_ts message_id prev_limit next_limit include reverse " + messageFilters

    /// Every parameter's wire type by name (docs/PROTOCOL.md): one name has one type in every operation.
    public static let parameterTypes: [String: ParameterType] = {
        let names: [(ParameterType, String)] = [
            (.string, "channel_url user_id member_id target_user_id offending_user_id dest_channel_url key token " +
                "nickname nickname_startswith active_mode metadatakey super_mode profile_url name cover_url " +
                "custom_type data inviter_id order metadata_order_key distinct_mode public_mode " +
                "public_membership_filter member_state_filter hidden_mode unread_filter custom_type_startswith name_contains name_startswith " +
                "query_type metadata_key metadata_value_startswith operator_filter muted_member_filter description " +
                "agent_id mode report_category reporting_user_id report_description message_type include_reply_type " +
                "message mention_type url reaction title text cover_file_path token_type push_trigger_option timezone"),
            (.integer, "message_id limit change_ts last_seen_at created_after created_before seconds message_ts " +
                "prev_limit next_limit parent_message_id poll_id option_id close_at start_hour start_min end_hour end_min " +
                "snooze_start_ts snooze_end_ts"),
            (.boolean, "include_unread_count is_active auto_accept is_distinct is_super is_public is_ephemeral " +
                "strict show_empty show_frozen show_member show_metadata show_metacounter show_read_receipt " +
                "show_delivery_receipt should_leave_all hide_previous_messages allow_auto_unhide should_hide_all " +
                "should_unhide_all reset_all include_ts upsert include reverse include_reactions include_thread_info " +
                "include_parent_message_info with_sorted_meta_array include_meta_array allow_user_suggestion " +
                "allow_multiple_votes do_not_disturb snooze_enabled"),
            (.stringArray, "user_ids keys metadatavalues_in discovery_keys preferred_languages channel_urls " +
                "operator_ids custom_types members_exactly_in members_include_in metadata_values sender_ids " +
                "mentioned_user_ids options target_languages"),
            (.object, "metadata"),
            (.integerObject, "metacounter"),
            (.objectArray, "sorted_metaarray"),
            (.integerArray, "option_ids"),
        ]
        var table: [String: ParameterType] = [:]
        for (type, list) in names {
            for name in list.split(separator: " ") { table[String(name)] = type }
        }
        return table
    }()

    public static let all: [OperationSpec] = [
        // The current user
        OperationSpec("get_current_user", "GET", me,
                      summary: "The connected user's profile, or with `user_id` another user's.",
                      optional: "include_unread_count custom_types super_mode"),
        OperationSpec("update_current_user", "PUT", me,
                      summary: "Changes the connected user's profile; answers the user.",
                      optional: "nickname profile_url is_active metadata discovery_keys preferred_languages " +
                                "last_seen_at"),
        OperationSpec("get_unread_message_count", "GET", me + "/unread_message_count",
                      summary: "The messages the user has not read: `{\"unread_count\"}`.",
                      optional: "custom_types super_mode"),
        OperationSpec("get_unread_channel_count", "GET", me + "/unread_channel_count",
                      summary: "The channels with messages the user has not read: `{\"unread_count\"}`.",
                      optional: "custom_types super_mode"),
        OperationSpec("mark_all_as_read", "PUT", me + "/mark_as_read_all",
                      summary: "Marks every joined channel (or those of `channel_urls`) read.",
                      optional: "channel_urls"),
        OperationSpec("get_channel_invitation_preference", "GET", me + "/channel_invitation_preference",
                      summary: "Whether the user joins the channels they are invited to at once: `{\"auto_accept\"}`."),
        OperationSpec("set_channel_invitation_preference", "PUT", me + "/channel_invitation_preference",
                      summary: "Sets whether the user joins the channels they are invited to at once: " +
                               "`{\"auto_accept\"}`.",
                      required: [WireField.autoAccept]),
        // Push notifications (docs/PROTOCOL.md §5.1): the devices and when to notify.
        OperationSpec("register_push_token", "POST", me + "/push/{token_type}",
                      summary: "Registers a device token of the user: `token_type` `gcm` (FCM), `apns` or `huawei` " +
                               "(HMS); answers `{\"token\", \"type\", \"user\"}`.",
                      required: ["token"]),
        OperationSpec("unregister_push_token", "DELETE", me + "/push/{token_type}/{token}",
                      summary: "Unregisters one device token: `{\"token\": [removed]}`."),
        OperationSpec("unregister_all_push_tokens", "DELETE", me + "/push",
                      summary: "Unregisters every device token of the user: `{\"token\": [removed]}`."),
        OperationSpec("list_push_tokens", "GET", me + "/push/{token_type}",
                      summary: "The user's device tokens of a type, oldest first: `{\"tokens\", \"type\"}`."),
        OperationSpec("get_push_preference", "GET", me + "/push_preference",
                      summary: "When the user is notified: `push_trigger_option` (all, mention_only, off), do not " +
                               "disturb (`start_hour`... in `timezone`) and snooze (`snooze_start_ts`, `snooze_end_ts`)."),
        OperationSpec("set_push_preference", "PUT", me + "/push_preference",
                      summary: "Changes the fields given of the user's push preference; answers all of them.",
                      optional: "push_trigger_option do_not_disturb start_hour start_min end_hour end_min timezone " +
                                "snooze_enabled snooze_start_ts snooze_end_ts"),
        OperationSpec("get_channel_push_preference", "GET", me + "/push_preference/{channel_url}",
                      summary: "The user's push trigger option for one channel: `{\"push_trigger_option\"}`, " +
                               "`default` following their own."),
        OperationSpec("set_channel_push_preference", "PUT", me + "/push_preference/{channel_url}",
                      summary: "Sets the user's push trigger option for one channel: default, all, mention_only or off.",
                      required: ["push_trigger_option"]),
        // Users
        OperationSpec("list_users", "GET", "/v3/users",
                      summary: "One page of users in `user_id` order, without their private fields.",
                      optional: "token limit user_ids nickname nickname_startswith active_mode metadatakey " +
                                "metadatavalues_in"),
        // Channel lists
        OperationSpec("list_my_group_channels", "GET", me + "/my_group_channels",
                      summary: "One page of the channels the user joined or is invited to; the cache stores them.",
                      optional: channelList + " public_mode hidden_mode unread_filter",
                      effect: .storeChannels(key: WireField.channels)),
        OperationSpec("list_group_channels", "GET", "/v3/group_channels",
                      summary: "One page of the channels the user may see (public ones and their own); the cache " +
                               "stores them.",
                      optional: channelList + " public_mode public_membership_filter",
                      effect: .storeChannels(key: WireField.channels)),
        // The reference's public channel list: public channels only, without empty ones unless
        // `show_empty`; `public_membership_filter` all (default) or joined.
        OperationSpec("list_public_group_channels", "GET", "/v3/group_channels",
                      summary: "One page of public channels, as the reference SDK's public channel list: empty ones " +
                               "only with `show_empty=true`, `public_membership_filter=\"joined\"` for those the " +
                               "user joined; the cache stores them.",
                      optional: channelList + " public_membership_filter", fixed: [WireField.publicMode: "public"],
                      defaults: [WireField.showEmpty: false], effect: .storeChannels(key: WireField.channels)),
        OperationSpec("list_channel_changelogs", "GET", me + "/my_group_channels/changelogs",
                      summary: "The user's channels changed or gone since `token` (or `change_ts`), applied to the " +
                               "cache like the engine's own catch-up.",
                      optional: "token change_ts limit show_member show_metadata show_metacounter show_read_receipt " +
                                "show_delivery_receipt show_empty show_frozen custom_types",
                      effect: .channelChangelog),
        // One channel
        OperationSpec("create_group_channel", "POST", "/v3/group_channels",
                      summary: "Creates a channel with the user and `user_ids` as members; answers it, with " +
                               "`is_created`. `cover_file_path`: a local image uploaded as the channel's cover " +
                               "(its `cover_url` is then the server's copy).",
                      optional: "user_ids name cover_url cover_file_path custom_type data channel_url is_distinct " +
                                "is_super is_public is_ephemeral operator_ids inviter_id strict",
                      uploads: [WireField.coverFilePath: WireField.coverFile], effect: .storeChannel),
        OperationSpec("get_group_channel", "GET", channel,
                      summary: "One channel as the user sees it; the cache stores it.",
                      optional: "show_member show_read_receipt show_delivery_receipt show_metadata show_metacounter",
                      effect: .storeChannel),
        OperationSpec("update_group_channel", "PUT", channel,
                      summary: "Changes the channel's settings (operators only); `operator_ids` are added. " +
                               "`cover_file_path`: a local image uploaded as the new cover, replacing the old one.",
                      optional: "name cover_url cover_file_path custom_type data is_public is_distinct operator_ids",
                      uploads: [WireField.coverFilePath: WireField.coverFile], effect: .storeChannel),
        OperationSpec("delete_group_channel", "DELETE", channel,
                      summary: "Deletes the channel (operators only); it leaves the cache.",
                      effect: .removeChannel(.deleted)),
        OperationSpec("invite_users", "POST", channel + "/invite",
                      summary: "Invites users; those who accept invitations automatically join at once.",
                      required: [WireField.userIDs], optional: "inviter_id", effect: .storeChannel),
        OperationSpec("accept_invitation", "PUT", channel + "/accept",
                      summary: "Accepts the user's invitation to the channel.", optional: "user_id",
                      effect: .storeChannel),
        OperationSpec("decline_invitation", "PUT", channel + "/decline",
                      summary: "Declines the user's invitation; the channel leaves the cache.", optional: "user_id",
                      effect: .removeChannel(.invitationDeclined)),
        OperationSpec("join_channel", "PUT", channel + "/join", summary: "Joins a public channel.", optional: "user_id",
                      effect: .storeChannel),
        OperationSpec("leave_channel", "PUT", channel + "/leave", summary: "Leaves the channel; it leaves the cache.",
                      optional: "user_ids should_leave_all", effect: .removeChannel(.left)),
        OperationSpec("freeze_channel", "PUT", channel + "/freeze",
                      summary: "Freezes the channel: only operators may send then (operators only).",
                      fixed: [WireField.freeze: true], effect: .storeChannel),
        OperationSpec("unfreeze_channel", "PUT", channel + "/freeze",
                      summary: "Unfreezes the channel (operators only).", fixed: [WireField.freeze: false],
                      effect: .storeChannel),
        OperationSpec("hide_channel", "PUT", channel + "/hide",
                      summary: "Hides the channel from the user's list, with `hide_previous_messages` also its " +
                               "messages so far.",
                      optional: "user_id hide_previous_messages allow_auto_unhide should_hide_all",
                      effect: .hiddenState("hidden_allow_auto_unhide")),
        OperationSpec("unhide_channel", "DELETE", channel + "/hide", summary: "Shows the hidden channel again.",
                      optional: "user_id should_unhide_all", effect: .hiddenState("unhidden")),
        OperationSpec("reset_my_history", "PUT", channel + "/reset_user_history",
                      summary: "Hides the channel's messages so far from the user: `{\"ts_message_offset\"}`.",
                      optional: "user_id reset_all", effect: .truncateHistory),
        OperationSpec("start_typing", "POST", channel + "/typing", summary: "Tells the channel the user is typing.",
                      optional: "user_ids"),
        OperationSpec("end_typing", "DELETE", channel + "/typing",
                      summary: "Tells the channel the user stopped typing.", optional: "user_ids"),
        OperationSpec("mark_as_read", "PUT", channel + "/messages/mark_as_read",
                      summary: "Marks the channel read up to now: `{\"ts\"}`.", optional: "user_id"),
        OperationSpec("mark_as_delivered", "PUT", channel + "/messages/mark_as_delivered",
                      summary: "Marks the channel's messages delivered: `{\"ts\"}`.", optional: "user_id"),
        // Members and moderation
        OperationSpec("list_members", "GET", channel + "/members", summary: "One page of the channel's members.",
                      optional: "token limit order operator_filter member_state_filter muted_member_filter " +
                                "nickname_startswith"),
        OperationSpec("get_member_state", "GET", channel + "/members/{member_id}",
                      summary: "Whether `member_id` is a member: `{\"is_member\", \"state\"}`."),
        OperationSpec("list_operators", "GET", channel + "/operators",
                      summary: "One page of the channel's operators: `{\"operators\", \"next\"}`.",
                      optional: "token limit"),
        OperationSpec("add_operators", "POST", channel + "/operators",
                      summary: "Makes joined members operators (operators only).", required: [WireField.operatorIDs]),
        OperationSpec("remove_operators", "DELETE", channel + "/operators",
                      summary: "Takes the operator role from users (operators only).",
                      required: [WireField.operatorIDs]),
        OperationSpec("remove_all_operators", "DELETE", channel + "/operators",
                      summary: "Takes the operator role from every operator (operators only).",
                      fixed: [WireField.deleteAll: true]),
        OperationSpec("ban_user", "POST", channel + "/ban",
                      summary: "Bans `user_id` from the channel for `seconds` (-1, the default: for good); a member " +
                               "is removed (operators only).",
                      required: [WireField.userID], optional: "seconds description agent_id"),
        OperationSpec("unban_user", "DELETE", channel + "/ban/{target_user_id}",
                      summary: "Lifts the ban of `target_user_id` (operators only)."),
        OperationSpec("get_ban", "GET", channel + "/ban/{target_user_id}",
                      summary: "Whether `target_user_id` is banned: `{\"is_banned\", ...}`."),
        OperationSpec("list_banned_users", "GET", channel + "/ban",
                      summary: "One page of the channel's bans (operators only): `{\"banned_list\", \"next\"}`.",
                      optional: "token limit"),
        OperationSpec("mute_user", "POST", channel + "/mute",
                      summary: "Mutes the member `user_id` for `seconds` (-1, the default: until unmuted) " +
                               "(operators only).",
                      required: [WireField.userID], optional: "seconds description"),
        OperationSpec("unmute_user", "DELETE", channel + "/mute/{target_user_id}",
                      summary: "Lifts the mute of `target_user_id` (operators only)."),
        OperationSpec("get_mute", "GET", channel + "/mute/{target_user_id}",
                      summary: "Whether `target_user_id` is muted: `{\"is_muted\", ...}`."),
        OperationSpec("list_muted_users", "GET", channel + "/mute",
                      summary: "One page of the channel's mutes (operators only): `{\"muted_list\", \"next\"}`.",
                      optional: "token limit"),
        // Reports
        OperationSpec("report_channel", "POST", "/v3/report/group_channels/{channel_url}",
                      summary: "Reports the channel; `report_category`: suspicious, harassing, inappropriate or spam.",
                      required: [WireField.reportCategory], optional: "reporting_user_id report_description"),
        OperationSpec("report_message", "POST", "/v3/report/group_channels/{channel_url}/messages/{message_id}",
                      summary: "Reports a message; `report_category`: suspicious, harassing, inappropriate or spam.",
                      required: [WireField.reportCategory], optional: "reporting_user_id report_description"),
        OperationSpec("report_user", "POST", "/v3/report/users/{offending_user_id}",
                      summary: "Reports a user, in the channel `channel_url` if given; `report_category`: " +
                               "suspicious, harassing, inappropriate or spam.",
                      required: [WireField.reportCategory],
                      optional: "channel_url reporting_user_id report_description"),
        // Metadata and metacounters
        OperationSpec("get_metadata", "GET", channel + "/metadata",
                      summary: "The channel's metadata (all of it, or `keys`).", optional: "keys"),
        OperationSpec("create_metadata", "POST", channel + "/metadata",
                      summary: "Adds metadata keys (a key that exists is an error); answers them.",
                      required: [WireField.metadata], optional: "include_ts"),
        OperationSpec("update_metadata", "PUT", channel + "/metadata",
                      summary: "Changes metadata values (`upsert` adds missing keys); answers them.",
                      required: [WireField.metadata], optional: "upsert"),
        OperationSpec("delete_metadata", "DELETE", channel + "/metadata/{key}",
                      summary: "Removes the metadata key `key`."),
        OperationSpec("delete_all_metadata", "DELETE", channel + "/metadata", summary: "Removes every metadata key."),
        OperationSpec("get_metacounters", "GET", channel + "/metacounter",
                      summary: "The channel's metacounters (all of them, or `keys`).", optional: "keys"),
        OperationSpec("create_metacounters", "POST", channel + "/metacounter",
                      summary: "Adds metacounters (a key that exists is an error); answers them.",
                      required: [WireField.metacounter]),
        OperationSpec("update_metacounters", "PUT", channel + "/metacounter",
                      summary: "Sets, increases or decreases metacounters (`mode`: set, increase, decrease); " +
                               "answers them.",
                      required: [WireField.metacounter], optional: "mode upsert"),
        OperationSpec("delete_metacounter", "DELETE", channel + "/metacounter/{key}",
                      summary: "Removes the metacounter `key`."),
        OperationSpec("delete_all_metacounters", "DELETE", channel + "/metacounter",
                      summary: "Removes every metacounter."),
        // Messages
        OperationSpec("list_messages", "GET", channel + "/messages",
                      summary: "Messages around an anchor (`message_ts` or `message_id`; the newest end without " +
                               "one); the cache stores them. As the reference SDK: the anchor's own messages only " +
                               "with `include=true`, and `message_type` also by the collections' names \"all\", " +
                               "\"user\", \"file\", \"admin\".",
                      optional: "message_ts message_id prev_limit next_limit include reverse " + messageFilters,
                      defaults: messageListDefaults, valueNames: messageTypeNames,
                      effect: .storeMessages(key: WireField.messages)),
        OperationSpec("list_thread_replies", "GET", channel + "/messages",
                      summary: "The replies to `parent_message_id` around an anchor, as `list_messages`.",
                      required: [WireField.parentMessageID],
                      optional: "message_ts message_id prev_limit next_limit include reverse " + messageFilters,
                      defaults: messageListDefaults, valueNames: messageTypeNames,
                      effect: .storeMessages(key: WireField.messages)),
        OperationSpec("get_total_message_count", "GET", channel + "/messages/total_count",
                      summary: "How many messages the channel holds: `{\"total\"}`."),
        OperationSpec("list_message_changelogs", "GET", channel + "/messages/changelogs",
                      summary: "The channel's messages changed or deleted since `token` (or `change_ts`), applied " +
                               "to the cache.",
                      optional: "token change_ts limit " + messageFilters, effect: .messageChangelog),
        OperationSpec("get_message", "GET", message, summary: "One message; the cache stores it.",
                      effect: .storeMessage),
        OperationSpec("update_message", "PUT", message, summary: "Edits a message (its sender or an operator).",
                      optional: "message_type message custom_type data mention_type mentioned_user_ids " +
                                "sorted_metaarray url",
                      effect: .updateCachedMessage),
        OperationSpec("delete_message", "DELETE", message,
                      summary: "Deletes a message (its sender or an operator); it leaves the cache.",
                      effect: .removeMessage),
        OperationSpec("copy_message", "POST", message + "/copy",
                      summary: "Copies a message (its sender only) into `dest_channel_url`; answers the copy.",
                      required: [WireField.destChannelURL], effect: .storeMessage),
        OperationSpec("add_reaction", "POST", message + "/reactions",
                      summary: "Adds the user's `reaction` to a message.", required: [WireField.reaction],
                      optional: "user_id"),
        OperationSpec("remove_reaction", "DELETE", message + "/reactions",
                      summary: "Removes the user's `reaction` from a message.", required: [WireField.reaction],
                      optional: "user_id"),
        OperationSpec("list_reactions", "GET", message + "/reactions",
                      summary: "The reactions to a message: `{\"reactions\"}`."),
        OperationSpec("translate_message", "POST", message + "/translation",
                      summary: "Translates a user message into `target_languages` (default: the user's preferred " +
                               "languages) through the server's translator; answers the message with its " +
                               "`translations`, which a cached copy takes.",
                      optional: "target_languages", effect: .updateCachedMessage),
        OperationSpec("pin_message", "POST", message + "/pin", summary: "Pins a message to the channel."),
        OperationSpec("unpin_message", "DELETE", message + "/pin", summary: "Unpins a message."),
        OperationSpec("add_message_meta_array", "POST", message + "/sorted_metaarray",
                      summary: "Adds keys to a message's sorted meta array, or values to its keys; answers the " +
                               "message.",
                      required: [WireField.sortedMetaarray], effect: .updateCachedMessage),
        OperationSpec("update_message_meta_array", "PUT", message + "/sorted_metaarray",
                      summary: "Adds or removes (`mode`) values of a message's sorted meta array; answers the message.",
                      required: [WireField.sortedMetaarray], optional: "mode upsert", effect: .updateCachedMessage),
        // Polls (docs/PROTOCOL.md §7.6): the cached message carrying a poll shows it as answered.
        OperationSpec("create_poll", "POST", channel + "/polls",
                      summary: "Creates a poll in the channel; send a message with its `poll_id` to show it.",
                      required: ["title", "options"], optional: "allow_user_suggestion allow_multiple_votes close_at user_id",
                      effect: .storePoll),
        OperationSpec("list_polls", "GET", channel + "/polls", summary: "The channel's polls, newest first: `{\"polls\", \"next\"}`.",
                      optional: "token limit"),
        OperationSpec("get_poll", "GET", poll, summary: "One poll, with the user's votes.", effect: .storePoll),
        OperationSpec("update_poll", "PUT", poll, summary: "Changes a poll's title, options' rules or closing time (its creator or an operator).",
                      optional: "title allow_user_suggestion allow_multiple_votes close_at", effect: .storePoll),
        OperationSpec("delete_poll", "DELETE", poll, summary: "Deletes a poll (its creator or an operator); its message stays.",
                      effect: .removePoll),
        OperationSpec("close_poll", "PUT", poll + "/close", summary: "Closes a poll: it takes no more votes.", effect: .storePoll),
        OperationSpec("add_poll_option", "POST", poll + "/options", summary: "Adds an option to a poll.",
                      required: ["text"], optional: "user_id", effect: .storePoll),
        OperationSpec("update_poll_option", "PUT", poll + "/options/{option_id}", summary: "Changes an option's text.",
                      required: ["text"], effect: .storePoll),
        OperationSpec("delete_poll_option", "DELETE", poll + "/options/{option_id}", summary: "Deletes an option and its votes.",
                      effect: .storePoll),
        OperationSpec("vote_poll", "PUT", poll + "/vote",
                      summary: "Replaces the user's votes of a poll with `option_ids` (`[]` retracts them).",
                      required: ["option_ids"], optional: "user_id", effect: .storePoll),
        OperationSpec("list_poll_voters", "GET", poll + "/options/{option_id}/voters",
                      summary: "Who voted for an option: `{\"vote_count\", \"voters\", \"next\"}`.", optional: "token limit"),
        OperationSpec("list_poll_changelogs", "GET", channel + "/polls/changelogs",
                      summary: "The channel's polls changed or deleted since `token` (or `change_ts`), applied to the cache.",
                      optional: "token change_ts limit", effect: .pollChangelog),
    ]

    private static let byName: [String: OperationSpec] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    public static func spec(named name: String) -> OperationSpec? { byName[name] }
}

/// A REST call ready to send: the path with its query string, and the JSON body.
public struct PreparedCall: Sendable, Equatable {
    public var method: String
    public var pathAndQuery: String
    public var body: JSONValue?
    /// A local file to upload (`OperationSpec.uploads`): the body's fields then go as form fields.
    public var upload: FileUpload? = nil

    public struct FileUpload: Sendable, Equatable {
        /// The form part that carries the file.
        public var part: String
        public var path: String
    }

    /// The body as form fields (`[HTTPBodyPart].formFields`) beside the file.
    public var multipartBody: [HTTPBodyPart]? {
        guard let upload, case .object(let fields)? = body else { return nil }
        return .formFields(fields) + [.file(name: upload.part, path: upload.path, fileName: nil, contentType: nil)]
    }
}

extension OperationSpec {
    /// Checks the parameters and builds the call. `currentUserID` fills `{user_id}`.
    public func prepare(params: JSONValue, currentUserID: String) throws(ParleyError) -> PreparedCall {
        guard case .object(var fields) = params else {
            throw .invalidArgument("\(name): params must be a JSON object, got \(params.typeName)")
        }
        try UnsupportedFeatures.reject(fields, in: "\(name): params", accepted: Set(parameters.map(\.name)))
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
        var upload: PreparedCall.FileUpload? = nil
        for (key, part) in uploads.sorted(by: { $0.key < $1.key }) {
            switch fields.removeValue(forKey: key) {
            case nil, .null?: continue
            case .string(let path)? where !path.isEmpty && !path.utf8.contains(0):
                if upload != nil { throw .invalidArgument("\(name): give one file to upload at a time") }
                upload = PreparedCall.FileUpload(part: part, path: path)
            case let other?:
                throw .invalidArgument("\(name): \(key) must be the path of a local file, got \(other.typeName == "string" ? "an empty string or one with NUL" : other.typeName)")
            }
        }
        if method == "GET" || method == "DELETE" {
            let query = try URLEncoding.queryString(fields, operation: name)
            return PreparedCall(method: method, pathAndQuery: query.isEmpty ? path : path + "?" + query, body: nil)
        }
        return PreparedCall(method: method, pathAndQuery: path, body: .object(fields), upload: upload)
    }
}
