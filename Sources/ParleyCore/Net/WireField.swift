// The names of the server's JSON fields and request parameters (docs/PROTOCOL.md), each
// written once. A parameter and a field that share a name (`channel_url`, `message_id`,
// `metadata`, ...) share the constant. The typed views that read them are in
// WireObjects.swift, WireEvent.swift and WireAnswers.swift; the paths are in Endpoints.swift.
//
// Not here: the fields the engine itself adds to local messages (`sending_status`,
// `error_code`, `error_message`, docs/C-API.md), and the keys of the application's own
// JSON (collection queries and options, configuration).

/// The field and parameter names of the wire protocol (docs/PROTOCOL.md).
enum WireField {
    // MARK: Users and members (§4.1, §4.3)

    static let userID = "user_id"
    static let nickname = "nickname"
    static let profileURL = "profile_url"
    /// A channel participant's role in a basic user: "operator" or "" (§4.1).
    static let role = "role"
    /// A member's read position (ms); it only grows while the membership lasts (§4.3).
    static let readTs = "read_ts"
    /// A member's delivery position (ms), like `readTs` (§4.3).
    static let deliveredTs = "delivered_ts"

    // MARK: Group channels (§4.2)

    static let channelURL = "channel_url"
    static let channelType = "channel_type"
    /// A channel's name; also a file's (§4.4 `file`).
    static let name = "name"
    static let customType = "custom_type"
    static let data = "data"
    static let createdAt = "created_at"
    static let updatedAt = "updated_at"
    static let isPublic = "is_public"
    static let isSuper = "is_super"
    /// Whether the channel is frozen; also the parameter of `PUT …/freeze` (§6.3).
    static let freeze = "freeze"
    /// Joined and invited members.
    static let memberCount = "member_count"
    static let joinedMemberCount = "joined_member_count"
    /// The newest visible message (§4.2: omitted when none is visible to the user).
    static let lastMessage = "last_message"
    /// The member list: only in renders with `show_member` (§4.2), not in a live message event's (§9.1).
    static let members = "members"
    static let metadata = "metadata"
    static let metacounter = "metacounter"
    static let operators = "operators"
    static let readReceipt = "read_receipt"
    static let deliveryReceipt = "delivery_receipt"
    static let pinnedMessageIDs = "pinned_message_ids"
    /// Per-user: "joined", "invited" or "none" (a render for a user who lost the channel, §9.1).
    static let memberState = "member_state"
    /// Per-user: "unhidden", "hidden_allow_auto_unhide" or "hidden_prevent_auto_unhide".
    static let hiddenState = "hidden_state"
    static let unreadMessageCount = "unread_message_count"
    static let unreadMentionCount = "unread_mention_count"
    /// Per-user history offset (ms): messages created at or before it are invisible (§4.2);
    /// also the answer of `reset_user_history` (§6.3).
    static let tsMessageOffset = "ts_message_offset"
    /// Only in the answer to creating a channel (§6.1): whether it was created now.
    static let isCreated = "is_created"

    // MARK: Messages (§4.4)

    static let messageID = "message_id"
    /// The message's type: "MESG", "FILE" or "ADMM"; also a file's MIME type (§4.4 `file`).
    static let type = "type"
    /// A message's text; also an error answer's text (§3).
    static let message = "message"
    /// The sender's request id, the key that deduplicates a send (§7.1).
    static let reqID = "req_id"
    /// The sender (a basic user with `role`); in events, the user the event is about (§9).
    static let user = "user"
    /// "users" (the default) or "channel" (§4.4).
    static let mentionType = "mention_type"
    static let mentionedUsers = "mentioned_users"
    /// The parent of a reply, 0 for a top-level message (§4.4).
    static let parentMessageID = "parent_message_id"
    /// A reply also shown in the channel's main list (§4.4); also a send parameter (§7.1).
    static let isReplyToChannel = "is_reply_to_channel"
    static let isPinned = "is_pinned"
    static let file = "file"
    /// A file's address (§4.4 `file`); also the send parameter of a file hosted elsewhere (§7.1).
    static let url = "url"
    static let size = "size"
    static let thumbnails = "thumbnails"
    static let sortedMetaarray = "sorted_metaarray"
    /// A message's reactions: `[{key, user_ids, updated_at}]` (§4.4).
    static let reactions = "reactions"
    /// A reaction's key (§4.4, §9).
    static let key = "key"
    static let userIDs = "user_ids"
    /// A thread parent's summary: `{reply_count, last_replied_at, updated_at, most_replies}` (§4.4).
    static let threadInfo = "thread_info"
    static let replyCount = "reply_count"
    /// A reply's copy of its parent: `{message_id, type, message, custom_type, ts, user}` (§4.4).
    static let parentMessageInfo = "parent_message_info"

    // MARK: Answers (§3, §6.2, §7.2, §8)

    /// An error answer's server code (§3).
    static let code = "code"
    static let channels = "channels"
    /// The token of the next page; "" on a channel list's last page (§6.2), never "" in a changelog (§8).
    static let next = "next"
    static let messages = "messages"
    /// Whether more messages match beyond the listing's older side (§7.2).
    static let hasPrev = "has_prev"
    static let hasNext = "has_next"
    /// A changelog's changed objects (§8.2, §8.3).
    static let updated = "updated"
    /// A changelog's deletions: channel URLs (§8.3) or `{message_id, deleted_at}` (§8.2).
    static let deleted = "deleted"
    static let hasMore = "has_more"
    /// The server's message search (§7.7): its results, and each one's snippet and score.
    static let results = "results"
    static let snippet = "snippet"
    static let score = "score"
    /// More messages are missing than `huge_gap_threshold` (§8.4).
    static let isHugeGap = "is_huge_gap"
    static let prevMessages = "prev_messages"
    /// Messages remain between the gap answer's two lists (§8.4).
    static let prevHasMore = "prev_has_more"

    // MARK: Events (§9)

    static let category = "category"
    static let channel = "channel"
    /// The poll a message carries, and the poll of `poll_updated` / `poll_voted` (§7.6, §9).
    static let poll = "poll"
    /// A poll's id (§7.6), also `poll_deleted`'s field and a send's parameter (§7.1).
    static let pollID = "poll_id"
    /// A poll's own `id` (§7.6).
    static let id = "id"
    /// The viewer's own votes of a poll (§7.6).
    static let votedOptionIDs = "voted_option_ids"
    /// A poll changelog's deleted polls (§7.6).
    static let deletedAt = "deleted_at"
    /// `reaction_updated`'s change (§9); also the parameter of adding or removing a reaction (§7.4).
    static let reaction = "reaction"
    /// A reaction change's "ADD" or "DELETE" (§9).
    static let operation = "operation"
    static let users = "users"
    static let invitee = "invitee"
    static let invitees = "invitees"
    /// The members a live event without `members` changed (§9.1).
    static let changedMembers = "changed_members"
    static let typingUsers = "typing_users"
    /// The stream's newest event id, in `connected` and `resync` (§9).
    static let lastEventID = "last_event_id"
    /// Why the stream asks for a resync: "retention", "unknown_id" or "lagged" (§9).
    static let reason = "reason"

    // MARK: Send parameters (§7.1)

    static let messageType = "message_type"
    static let mentionedUserIDs = "mentioned_user_ids"
    static let isSilent = "is_silent"
    static let markAsRead = "mark_as_read"
    static let fileName = "file_name"
    static let fileSize = "file_size"
    static let fileType = "file_type"
    /// The reference SDK's spelling of `file_type`.
    static let mimeType = "mime_type"
    static let targetLanguages = "target_languages"
    static let translations = "translations"
    static let pushNotificationDeliveryOption = "push_notification_delivery_option"
    static let appleCriticalAlertOptions = "apple_critical_alert_options"
    /// Boxes the server makes thumbnails of an upload for: `[{max_width, max_height}]`.
    static let thumbnailSizes = "thumbnail_sizes"

    // MARK: Channel cover upload (§6.1)

    /// The form part carrying an uploaded cover image.
    static let coverFile = "cover_file"
    /// The catalog parameter naming the local file to upload as `cover_file` (not sent).
    static let coverFilePath = "cover_file_path"

    // MARK: Channel list parameters (§6.2)

    static let order = "order"
    static let showEmpty = "show_empty"
    static let showFrozen = "show_frozen"
    static let showMember = "show_member"
    static let showMetadata = "show_metadata"
    static let showMetacounter = "show_metacounter"
    static let publicMode = "public_mode"
    static let superMode = "super_mode"
    static let hiddenMode = "hidden_mode"
    static let unreadFilter = "unread_filter"
    static let memberStateFilter = "member_state_filter"
    static let customTypes = "custom_types"
    static let customTypeStartsWith = "custom_type_startswith"
    static let nameContains = "name_contains"
    static let channelURLs = "channel_urls"
    static let membersExactlyIn = "members_exactly_in"
    static let membersIncludeIn = "members_include_in"
    /// How `members_include_in` combines: "AND" or "OR".
    static let queryType = "query_type"
    static let metadataOrderKey = "metadata_order_key"

    // MARK: Message list parameters (§7.2)

    static let messageTs = "message_ts"
    static let prevLimit = "prev_limit"
    static let nextLimit = "next_limit"
    /// Whether the listing includes the messages at its anchor.
    static let include = "include"
    static let reverse = "reverse"
    /// "NONE", "ALL" or "ONLY_REPLY_TO_CHANNEL": which replies a listing holds.
    static let includeReplyType = "include_reply_type"
    static let includeReactions = "include_reactions"
    static let includeThreadInfo = "include_thread_info"
    static let includeParentMessageInfo = "include_parent_message_info"
    static let withSortedMetaArray = "with_sorted_meta_array"
    /// The alias of `with_sorted_meta_array` (§7.2).
    static let includeMetaArray = "include_meta_array"
    /// A reference SDK option the listing accepts; it shapes messages, not which are listed.
    static let includePollDetails = "include_poll_details"

    // MARK: Other operations' parameters (§5–§7)

    static let autoAccept = "auto_accept"
    static let operatorIDs = "operator_ids"
    /// With `DELETE …/operators`: every operator (§6.3).
    static let deleteAll = "delete_all"
    static let reportCategory = "report_category"
    static let destChannelURL = "dest_channel_url"
}
