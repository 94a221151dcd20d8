// The typed changes the cache writer reports, and why each happened. A view (a collection,
// the application's event handler) learns everything it needs from these values: it never
// re-reads the cache to find out what changed.

/// Why a channel left the cache.
public enum ChannelRemovalReason: String, Sendable, CaseIterable {
    /// The channel was deleted on the server.
    case deleted
    /// The user left it.
    case left
    /// The user was banned from it.
    case banned
    /// The user declined the invitation to it.
    case invitationDeclined = "invitation_declined"
    /// A channel changelog listed it as no longer visible to the user (the reason is not told).
    case changelog
    /// The server refused to show the channel to the user any more (403 / 404).
    case accessLost = "access_lost"
}

/// The sending state of a message this client sent, as views show it.
public enum LocalMessageStatus: String, Sendable, CaseIterable {
    case pending
    case failed
    case canceled
    case succeeded
}

/// A channel as stored after a change, with its position before and after (the sort keys of
/// every list order live in `ChannelOrderKey`), so that a list view can move it.
public struct ChannelUpsert: Sendable {
    /// The channel as stored, `members` included when its member list is stored. When the
    /// write did not carry the list (a message event: PROTOCOL.md §9.1), the list is read
    /// from the cache the first time this is used while the batch is delivered (on the engine
    /// queue, where feed observers run): an observer that never looks at it pays nothing per
    /// member. Once the batch was delivered, a list nobody read is not read any more (the
    /// cache is not touched off the engine queue): the channel then comes without `members`.
    public var channel: JSONValue { stored.value }
    /// The same channel as canonical JSON text (read as stored, without parsing).
    public var channelText: JSONText { JSONText(stored.text) }
    /// The channel as stored without `members` (known at once, whatever the write carried).
    public var channelWithoutMembers: JSONValue
    let stored: StoredChannelValue
    public var url: String
    /// nil when the channel was not cached before.
    public var oldKey: ChannelOrderKey?
    public var newKey: ChannelOrderKey
}

/// A server message as stored after a change.
public struct MessageUpsert: Sendable {
    public var message: JSONValue
    public var channelURL: String
    public var key: MessageKey
    /// New to the cache (false: an existing copy was replaced).
    public var inserted: Bool
    /// A real-time message that extended (or already lay in) the continuous range reaching
    /// the newest end. A view at the newest end shows it; other views only learn there is more.
    public var extendedRange: Bool
    /// The pending/failed local message this one replaced (matched by `req_id`).
    public var replacedLocalReqID: String?
}

/// A message this client sent changed its sending state.
public struct LocalMessageChange: Sendable {
    public var reqID: String
    public var channelURL: String
    public var status: LocalMessageStatus
    /// The local message (pending, failed, canceled: `message_id` 0, `sending_status`), or
    /// the server's message when `status` is succeeded.
    public var message: JSONValue
    /// Why it failed (status failed).
    public var error: ParleyError?
    /// Status failed: the message was dropped with its failure (resend policy none), so it
    /// is gone from the cache rather than kept as failed.
    public var dropped = false
}

/// One change of the cache.
public enum CacheChange: Sendable {
    case channelUpserted(ChannelUpsert)
    case channelRemoved(url: String, reason: ChannelRemovalReason)
    case messageUpserted(MessageUpsert)
    case messageRemoved(channelURL: String, messageID: Int64)
    /// The user's history of the channel now starts after `through` (reset history, hide
    /// with previous messages): every cached message created at or before it was removed.
    case messagesTruncated(channelURL: String, through: Int64, removedCount: Int)
    case localMessageStatusChanged(LocalMessageChange)
    /// A continuous range of the channel's messages grew (or was recorded).
    case rangeExtended(MessageChunk)
    /// No range of the channel (of every channel when nil) is known to reach the newest end
    /// any more (the stream dropped: messages may arrive unseen).
    case newestEndUnknown(channelURL: String?)
    /// Eviction removed the channel's server messages and ranges (the channel stays).
    case channelMessagesEvicted(channelURL: String)
    /// Everything was removed (`clear_cached_data`).
    case cleared
}

/// A real-time event as the engine applied it.
public struct RealtimeEvent: Sendable {
    public var id: Int64
    /// nil for a category this engine does not know (it is still passed on to the app).
    public var category: EventCategory?
    /// The category's name as the server sent it.
    public var name: String
    public var data: JSONValue
    /// `data` as the server wrote it (`StreamEvent.dataText`).
    public var dataText: String? = nil
    public var channelURL: String
    /// The server's copy of a message this client sent itself: the app learns of it as
    /// `message_sent`, not as a received message.
    public var isOwnEcho: Bool
    /// `message_updated` for an edit this client made (`update_message`): applied, not
    /// reported to the app, as the reference reports an edit to every device but the editor's.
    public var isOwnEdit = false
    /// What the event means to this user when its category says less (collections report
    /// it as their source): `mention` for a received message that mentions the user,
    /// `channel_hidden` for the user's own read receipt of a hide with previous messages
    /// (the server sends it before `channel_hidden`, with the channel already hidden).
    public var reportedCategory: EventCategory? = nil
    /// A membership event about another user (joined, left, invited, declined, banned)
    /// that changed the channel's `member_count` or `joined_member_count`.
    public var changedMemberCount = false
    /// Part of the server's replay after a resume (it happened while the client was away):
    /// collections report it as the changelogs would (`message_changelog`, `channel_changelog`).
    public var isReplayed = false
}

/// Why a batch of changes was made.
public enum ChangeCause: Sendable {
    /// A real-time event (published even when it changed nothing, so every event is seen).
    case realtime(RealtimeEvent)
    /// The channel changelog catch-up.
    case channelChangelog
    /// The message changelog catch-up of one channel.
    case messageChangelog(channelURL: String)
    /// The poll changelog catch-up of one channel (the polls its cached messages carry).
    case pollChangelog(channelURL: String)
    /// The app sent a message (stored as pending).
    case send
    /// The app resent a failed message.
    case resend
    /// The server answered a send (or its echo confirmed it), or the send failed.
    case sendResult
    /// The app canceled a message, or removed failed messages.
    case cancel
    /// A catalog operation's answer (by operation name).
    case operation(String)
    /// Loaded from the server for the application (a channel's access time).
    case apiLoad
    /// A page of messages or channels a view asked for (Sync/Paging.swift), stored.
    case pageLoad(PageLoad)
    /// A channel was read again from the server: by a message view (at start, after a
    /// reconnection), or by the engine: a channel an event brought without the member list
    /// the cache lacks, or whose copy in an answer was set aside (`ChannelReadGuard`).
    case channelRefresh(channelURL: String)
    /// The real-time stream dropped.
    case connectionLost
    /// The cache went over its size limit.
    case eviction
    /// `clear_cached_data`.
    case clear
    /// A catch-up (replayed events, changelogs) began after the stream opened; an empty batch.
    /// Views may hold back what they report until `catchUpFinished` and then report the net
    /// difference, as the changelog's.
    case catchUpStarted
    /// The catch-up ended (also when it failed or the session ended); an empty batch.
    case catchUpFinished
    /// The event stream opened (the engine applied its `connected`; the catch-up it starts
    /// was announced just before) or dropped (also a disconnect); an empty batch. Views
    /// derive their freshness from it (Sync/ViewFreshness.swift).
    case connectivityChanged(streamOpen: Bool)
    /// The persistent cache could not be opened: the client runs on an in-memory cache
    /// (nothing survives the process, pending messages included); an empty batch.
    case cacheUnavailable(reason: String)
    /// The cache file was damaged and replaced by a fresh one; the unsent messages that read
    /// back whole were carried over (they are sent as usual), the others are listed. Its
    /// changes report each lost message as failed.
    case cacheRecovered(CacheSalvage)
    /// The real-time stream resumed past the server's retention: events were lost. The
    /// channel changelogs ran since; `channelURLs` are the channels they found changed or
    /// removed meanwhile (messages of theirs may have been missed). An empty batch.
    case resync(reason: String, channelURLs: [String])
}

/// Changes committed together, in commit order (`sequence` increases by one per batch).
public struct ChangeBatch: Sendable {
    public var sequence: UInt64
    public var cause: ChangeCause
    public var changes: [CacheChange]

    /// The channels a batch concerns, for observers of one channel (`ChangeFeed.subscribe`).
    enum ChannelScope {
        /// A change of every channel (`cleared`, the newest end of all), or no change at all:
        /// a cause alone (a catch-up's start or end) matters to every view.
        case all
        case channels(Set<String>)

        func contains(_ channelURL: String) -> Bool {
            switch self {
            case .all: true
            case .channels(let urls): urls.contains(channelURL)
            }
        }
    }

    var channelScope: ChannelScope {
        guard !changes.isEmpty else { return .all }
        var urls = Set<String>()
        for change in changes {
            guard let url = change.channelURL else { return .all }
            urls.insert(url)
        }
        return .channels(urls)
    }
}

extension CacheChange {
    /// The one channel the change is about; nil when it is about every channel.
    var channelURL: String? {
        switch self {
        case .channelUpserted(let upsert): upsert.url
        case .channelRemoved(let url, _): url
        case .messageUpserted(let upsert): upsert.channelURL
        case .messageRemoved(let url, _): url
        case .messagesTruncated(let url, _, _): url
        case .localMessageStatusChanged(let local): local.channelURL
        case .rangeExtended(let chunk): chunk.channelURL
        case .newestEndUnknown(let url): url
        case .channelMessagesEvicted(let url): url
        case .cleared: nil
        }
    }
}

/// A stored channel's value, either known at once or read from the cache on first use (then
/// kept: every observer of a batch sees the same value), as a value or as its text.
final class StoredChannelValue: Sendable {
    private struct State {
        var value: JSONValue?
        var text: String?
        var load: Loader?
        var fallback: JSONValue?
    }

    /// Boxed: `Locked` wants no bare closure in its value.
    private struct Loader: @unchecked Sendable {
        let read: () -> String
    }

    private let state: Locked<State>

    /// `text`, when given, is `value`'s canonical text (the one the cache wrote).
    init(_ value: JSONValue, text: String? = nil) { state = Locked(State(value: value, text: text)) }

    /// `read` (the stored channel's text) runs at most once, on the thread of the first use;
    /// `ChatCache` is not `Sendable`: the feed seals the value (`seal`) once its batch was
    /// delivered, after which `fallback` stands in for a text never read.
    init(reading read: @escaping () -> String, fallback: JSONValue) {
        state = Locked(State(load: Loader(read: read), fallback: fallback))
    }

    /// The batch was delivered: the loader is dropped (it must not run off the engine queue).
    func seal() {
        state.withLock { state in
            guard state.load != nil else { return }
            state.load = nil
            if state.text == nil && state.value == nil { state.value = state.fallback }
        }
    }

    var value: JSONValue {
        state.withLock { state in
            if let value = state.value { return value }
            let value = (try? JSONValue.parse(Self.text(&state))) ?? .null
            state.value = value
            return value
        }
    }

    var text: String { state.withLock { state in Self.text(&state) } }

    private static func text(_ state: inout State) -> String {
        if let text = state.text { return text }
        let text = state.value?.canonicalText ?? state.load?.read() ?? state.fallback?.canonicalText ?? "null"
        state.text = text
        state.load = nil
        return text
    }
}
