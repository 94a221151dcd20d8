// Typed read-only views over the server's answers (docs/PROTOCOL.md §3, §6–§8), in the
// manner of WireObjects.swift: the value as it came, a field read on demand. The objects an
// answer lists stay JSON values: they are stored as they came.

/// An error answer's body (docs/PROTOCOL.md §3), also the data of the stream's `error` frame (§9).
struct WireError: WireObject {
    let json: JSONValue

    var code: Int64? { json[WireField.code]?.int64Value }
    var message: String? { json[WireField.message]?.stringValue }
}

/// A page of a channel listing (docs/PROTOCOL.md §6.2).
struct WireChannelListPage: WireObject {
    let json: JSONValue

    var channels: [JSONValue]? { json[WireField.channels]?.arrayValue }
    /// "" on the last page.
    var next: String? { json[WireField.next]?.stringValue }
}

/// The answer of `reset_user_history` (docs/PROTOCOL.md §6.3).
struct WireHistoryReset: WireObject {
    let json: JSONValue

    var tsMessageOffset: Int64? { json[WireField.tsMessageOffset]?.int64Value }
}

/// A page of a message listing (docs/PROTOCOL.md §7.2).
struct WireMessageList: WireObject {
    let json: JSONValue

    var messages: [JSONValue]? { json[WireField.messages]?.arrayValue }
    var hasPrev: Bool? { json[WireField.hasPrev]?.boolValue }
    var hasNext: Bool? { json[WireField.hasNext]?.boolValue }
}

/// A page of channel or message changelogs (docs/PROTOCOL.md §8.2, §8.3).
struct WireChangelogPage: WireObject {
    let json: JSONValue

    /// Channels (§8.3) or messages (§8.2).
    var updated: [JSONValue]? { json[WireField.updated]?.arrayValue }
    /// Channel URLs (§8.3) or `{message_id, deleted_at}` objects (§8.2).
    var deleted: [JSONValue]? { json[WireField.deleted]?.arrayValue }
    /// The message ids of a message changelog's `deleted` (entries without one skipped).
    var deletedMessageIDs: [Int64] { (deleted ?? []).compactMap { $0[WireField.messageID]?.int64Value } }
    var next: String? { json[WireField.next]?.stringValue }
    var hasMore: Bool? { json[WireField.hasMore]?.boolValue }
    /// Nothing to apply, and the token it hands back is `token` again (or none): the page
    /// changes nothing in a cache that holds `token`.
    func changesNothing(since token: String?) -> Bool {
        (updated ?? []).isEmpty && (deleted ?? []).isEmpty && (next == nil || next == "" || next == token)
    }
}

/// The answer of a gap check (docs/PROTOCOL.md §8.4); its messages are under `prev_messages`.
struct WireGapAnswer: WireObject {
    let json: JSONValue

    var isHugeGap: Bool? { json[WireField.isHugeGap]?.boolValue }
    var prevHasMore: Bool? { json[WireField.prevHasMore]?.boolValue }
}

/// A page of the server's message search (docs/PROTOCOL.md §7.7).
struct WireSearchPage: WireObject {
    let json: JSONValue

    var results: [WireSearchResult]? { json[WireField.results]?.arrayValue?.map(WireSearchResult.init) }
    var hasNext: Bool? { json[WireField.hasNext]?.boolValue }
    /// "" on the last page.
    var next: String? { json[WireField.next]?.stringValue }
}

/// One result of the server's message search: the message as listed, its snippet and score.
struct WireSearchResult: WireObject {
    let json: JSONValue

    var message: WireMessage? { json[WireField.message].map(WireMessage.init) }
    var snippet: String? { json[WireField.snippet]?.stringValue }
    var score: Double? { json[WireField.score]?.doubleValue }
}

