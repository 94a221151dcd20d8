// What a catalog operation's answer does to the cache (Client/Operations.swift names it per
// operation; Engine+Events.swift, `applyOperationResult`, applies it).

/// How an operation's answer changes the cache.
public enum CacheEffect: Sendable, Equatable {
    case none
    /// The answer is a channel: store it.
    case storeChannel
    /// The answer holds channels under this key: store them.
    case storeChannels(key: String)
    /// The channel of `channel_url` is gone for this user: remove it and its messages.
    case removeChannel(ChannelRemovalReason)
    /// The answer is a message: store it.
    case storeMessage
    /// The answer is a changed message, rendered without the reader's poll votes (an edit's
    /// answer, docs/PROTOCOL.md): it changes the cached copy only, as the change's event does.
    case updateCachedMessage
    /// The answer holds messages under this key: store them (continuity is recorded by the collections).
    case storeMessages(key: String)
    /// The message of `message_id` in `channel_url` was deleted: remove it.
    case removeMessage
    /// The user's history was reset: cached messages up to the answer's `ts_message_offset` are invisible now.
    case truncateHistory
    /// A channel changelog page: store `updated`, remove `deleted`.
    case channelChangelog
    /// A message changelog page: update the cached messages of `updated`, remove `deleted`.
    case messageChangelog
    /// The answer is a poll: the cached message carrying it shows it.
    case storePoll
    /// Poll `poll_id` of `channel_url` was deleted: the cached message carrying it shows none.
    case removePoll
    /// A poll changelog page of `channel_url`: cached messages show the polls of `updated`,
    /// none of `deleted`.
    case pollChangelog
    /// The answer is empty; the user's hidden state of `channel_url` becomes `hiddenState`
    /// (`allow_auto_unhide` false: `hidden_prevent_auto_unhide`): the completion waits until
    /// the stream's event shows it in the cache (Sync/Engine+HiddenState.swift).
    case hiddenState(String)
}
