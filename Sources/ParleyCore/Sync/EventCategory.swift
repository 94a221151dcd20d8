/// Every category of event the engine knows: the server's real-time categories
/// (docs/PROTOCOL.md §9) and the engine's own (sending, changelogs). One table: the raw
/// value is the name the C ABI and Python see; inside the engine only the enum is used.
public enum EventCategory: String, Sendable, CaseIterable {
    // Real-time, from the server's event stream.
    case messageReceived = "message_received"
    case messageUpdated = "message_updated"
    case messageDeleted = "message_deleted"
    case mention
    case reactionUpdated = "reaction_updated"
    case threadInfoUpdated = "thread_info_updated"
    case readStatus = "read_status"
    case deliveryStatus = "delivery_status"
    case typingStatus = "typing_status"
    case userMuted = "user_muted"
    case userUnmuted = "user_unmuted"
    case userBanned = "user_banned"
    case userUnbanned = "user_unbanned"
    case channelFrozen = "channel_frozen"
    case channelUnfrozen = "channel_unfrozen"
    case channelChanged = "channel_changed"
    case channelDeleted = "channel_deleted"
    case channelHidden = "channel_hidden"
    case metadataCreated = "metadata_created"
    case metadataUpdated = "metadata_updated"
    case metadataDeleted = "metadata_deleted"
    case metacounterCreated = "metacounter_created"
    case metacounterUpdated = "metacounter_updated"
    case metacounterDeleted = "metacounter_deleted"
    case operatorUpdated = "operator_updated"
    case invitationReceived = "invitation_received"
    case invitationDeclined = "invitation_declined"
    case userJoined = "user_joined"
    case userLeft = "user_left"
    case pinnedMessageUpdated = "pinned_message_updated"
    /// A poll changed (edits, options, close), or a user voted; each recipient's copy carries
    /// that recipient's own votes. `poll_deleted` names the poll only.
    case pollUpdated = "poll_updated"
    case pollVoted = "poll_voted"
    case pollDeleted = "poll_deleted"

    // Sending (local).
    case messagePending = "message_pending"
    case messageSent = "message_sent"
    case messageFailed = "message_failed"
    case messageCanceled = "message_canceled"
    case messageResendStarted = "message_resend_started"
    /// The cache file could not be opened; the client works on an in-memory cache.
    case cacheUnavailable = "cache_unavailable"
    /// The cache file was damaged and replaced; unsent messages were carried over where possible.
    case cacheRecovered = "cache_recovered"

    // Catch-up.
    case channelChangelog = "channel_changelog"
    case channelChangelogDeleted = "channel_changelog_deleted"
    case messageChangelog = "message_changelog"
    case messageChangelogDeleted = "message_changelog_deleted"
    /// A cached message's poll as the poll changelog found it changed (payload: the message).
    case pollChangelog = "poll_changelog"
    /// The stream resumed past the server's retention: events were lost (see `ChangeCause.resync`).
    case resync = "resync"

    /// The name at the ABI.
    public var name: String { rawValue }

    /// Where events of this category come from: "server" (the real-time stream), "sync"
    /// (the changelog catch-up) or "local" (sending).
    public var source: String {
        switch self {
        case .messagePending, .messageSent, .messageFailed, .messageCanceled, .messageResendStarted, .cacheUnavailable, .cacheRecovered: "local"
        case .channelChangelog, .channelChangelogDeleted, .messageChangelog, .messageChangelogDeleted, .pollChangelog, .resync: "sync"
        default: "server"
        }
    }
}
