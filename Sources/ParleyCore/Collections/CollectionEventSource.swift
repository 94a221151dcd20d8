// Why a collection reported a change: one table for Swift, C (`PARLEY_SOURCE_*`, the code)
// and Python (`CollectionEventSource`, the name). Codes never change: a real-time source
// is 1 + its place among the server's categories (EventCategory only appends), the
// engine's own sources count from 100 (new ones are appended). The `PARLEY_SOURCE_*` block of
// include/parley/group_channel_collection.h and the Python Enum are generated from this table
// (CollectionEventSourceTableTests, docs/C-API.md): that test fails when they drift.

public enum CollectionEventSource: Sendable, Hashable {
    /// A real-time event of this category (the server's categories only).
    case realtime(EventCategory)
    /// The catch-up after (re)connecting: the net difference it made to the view.
    case channelChangelog
    case messageChangelog
    case messageFill
    /// An operation of this client (hide, leave, update, ...) whose answer changed the cache.
    case localOperation
    /// Sending: a message stored as pending, resent, confirmed, failed or canceled.
    case localSend
    /// The cache went over its size limit, or was cleared.
    case localCache
    /// A page read from the cache.
    case cacheLoad
    /// A page (or a refresh) from the server.
    case apiLoad
    /// A real-time category this version does not know.
    case unknownEvent
    /// The confirmation of this client's own send (the server's copy replaced the pending
    /// message), whatever brought it first: the send's answer, its echo on the stream, or a
    /// page or gap fill; also the channel change the echo carries.
    case messageSent
    /// Another user joined, left, was invited, declined or was banned: the channel's member
    /// counts changed (channel collections; a message view reports the event's category).
    case channelMemberCountChanged
    /// A message view refreshed its channel from the server (at start, after a reconnection).
    case channelRefresh
    /// The catch-up's poll changelog changed the poll a message carries.
    case pollChangelog

    /// Every source, in code order.
    public static let allCases: [CollectionEventSource] =
        EventCategory.allCases.filter { $0.source == "server" }.map(CollectionEventSource.realtime)
        + [.channelChangelog, .messageChangelog, .messageFill, .localOperation, .localSend, .localCache, .cacheLoad, .apiLoad, .unknownEvent,
           .messageSent, .channelMemberCountChanged, .channelRefresh, .pollChangelog]

    private static let codes: [CollectionEventSource: Int32] = {
        var table: [CollectionEventSource: Int32] = [:]
        var realtime: Int32 = 1
        var own: Int32 = 100
        for source in allCases {
            if case .realtime = source {
                table[source] = realtime
                realtime += 1
            } else {
                table[source] = own
                own += 1
            }
        }
        return table
    }()

    /// The stable number of the source (`PARLEY_SOURCE_*`).
    public var code: Int32 { Self.codes[self] ?? 0 }

    /// The name at the ABI and in Python.
    public var name: String {
        switch self {
        case .realtime(let category): category.name
        case .channelChangelog: "channel_changelog"
        case .messageChangelog: "message_changelog"
        case .messageFill: "message_fill"
        case .localOperation: "local_operation"
        case .localSend: "local_send"
        case .localCache: "local_cache"
        case .cacheLoad: "cache_load"
        case .apiLoad: "api_load"
        case .unknownEvent: "unknown_event"
        case .messageSent: "message_sent"
        case .channelMemberCountChanged: "channel_member_count_changed"
        case .channelRefresh: "channel_refresh"
        case .pollChangelog: "poll_changelog"
        }
    }

    /// How the changelogs would report what a replayed event changed: edits and deletions of
    /// messages as `message_changelog`, changes of the channel as `channel_changelog`; nil for
    /// what they do not report (new messages, mentions, typing, polls keep their own source).
    static func changelogSource(ofReplayed category: EventCategory?) -> CollectionEventSource? {
        switch category {
        case .messageUpdated?, .messageDeleted?, .reactionUpdated?, .threadInfoUpdated?:
            .messageChangelog
        case .readStatus?, .deliveryStatus?, .userMuted?, .userUnmuted?, .userBanned?, .userUnbanned?, .channelFrozen?,
             .channelUnfrozen?, .channelChanged?, .channelDeleted?, .channelHidden?, .metadataCreated?, .metadataUpdated?,
             .metadataDeleted?, .metacounterCreated?, .metacounterUpdated?, .metacounterDeleted?, .operatorUpdated?,
             .invitationReceived?, .invitationDeclined?, .userJoined?, .userLeft?, .pinnedMessageUpdated?:
            .channelChangelog
        default:
            nil
        }
    }

    /// The source of a batch of cache changes.
    init(_ cause: ChangeCause) {
        switch cause {
        case .realtime(let event):
            if event.isOwnEcho {
                self = .messageSent
            } else if event.isReplayed, let changelog = Self.changelogSource(ofReplayed: event.category) {
                self = changelog
            } else if let category = event.reportedCategory ?? event.category, category.source == "server" {
                self = .realtime(category)
            } else {
                self = .unknownEvent
            }
        case .channelChangelog, .catchUpStarted, .catchUpFinished, .resync: self = .channelChangelog
        case .messageChangelog: self = .messageChangelog
        case .pollChangelog: self = .pollChangelog
        case .send, .resend, .sendResult, .cancel: self = .localSend
        case .operation: self = .localOperation
        case .channelRefresh: self = .channelRefresh
        case .apiLoad, .pageLoad: self = .apiLoad
        case .connectionLost, .connectivityChanged, .eviction, .clear, .cacheUnavailable, .cacheRecovered: self = .localCache
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
