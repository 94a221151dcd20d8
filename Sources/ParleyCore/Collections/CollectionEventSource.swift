// Why a collection reported a change: one table for Swift, C (`PARLEY_SOURCE_*`, the code)
// and Python (`CollectionEventSource`, the name). Codes are stable: append, never renumber.

public enum CollectionEventSource: String, Sendable, CaseIterable {
    // Real-time events (the server's categories, docs/PROTOCOL.md §9).
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
    // Sync.
    /// The catch-up after (re)connecting: the net difference it made to the view.
    case channelChangelog = "channel_changelog"
    case messageChangelog = "message_changelog"
    case messageFill = "message_fill"
    // Local.
    /// An operation of this client (hide, leave, update, ...) whose answer changed the cache.
    case localOperation = "local_operation"
    /// Sending: a message stored as pending, resent, confirmed, failed or canceled.
    case localSend = "local_send"
    /// The cache went over its size limit, or was cleared.
    case localCache = "local_cache"
    // Loads.
    /// A page read from the cache.
    case cacheLoad = "cache_load"
    /// A page (or a refresh) from the server.
    case apiLoad = "api_load"
    /// A real-time category this version does not know.
    case unknownEvent = "unknown_event"

    /// The stable number of the source (`PARLEY_SOURCE_*`).
    public var code: Int32 {
        Int32(Self.allCases.firstIndex(of: self)! + 1)
    }

    /// The source of a batch of cache changes.
    init(_ cause: ChangeCause) {
        switch cause {
        case .realtime(let event):
            self = event.category.flatMap { Self(rawValue: $0.rawValue) } ?? .unknownEvent
        case .channelChangelog, .catchUpStarted, .catchUpFinished: self = .channelChangelog
        case .messageChangelog: self = .messageChangelog
        case .send, .resend, .sendResult, .cancel: self = .localSend
        case .operation: self = .localOperation
        case .apiLoad: self = .apiLoad
        case .connectionLost, .eviction, .clear: self = .localCache
        }
    }
}

/// What a collection event says about its cause.
public struct CollectionEventContext: Sendable {
    public var source: CollectionEventSource
    /// The real-time event's category as the server named it, or the operation's name
    /// (`local_operation`); "" otherwise.
    public var detail: String
}
