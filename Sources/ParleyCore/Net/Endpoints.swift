// Every path of the server's REST API that the engine builds itself (docs/PROTOCOL.md), and
// the one percent-encoder. The operation catalog (Client/Operations.swift) fills its own
// path templates with the same encoder; nothing else writes "/v3/..." or encodes by hand.

/// The paths the engine calls, each with its query. Values are encoded here.
enum Endpoints {
    /// The render options of a channel that carry everything the cache keeps.
    static let fullChannelView = "show_member=true&show_metadata=true&show_metacounter=true"

    /// The options of a message render that carry everything the cache keeps.
    static let fullMessageView = "include_reactions=true&include_thread_info=true&include_parent_message_info=true&with_sorted_meta_array=true"

    static func user(_ userID: String) -> String {
        "/v3/users/" + URLEncoding.encodePathSegment(userID)
    }

    /// The user's real-time event stream (docs/PROTOCOL.md §9).
    static func eventStream(userID: String) -> String {
        user(userID) + "/events"
    }

    /// One channel rendered whole for the current user.
    static func channel(_ channelURL: String) -> String {
        channelBase(channelURL) + "?" + fullChannelView
    }

    /// Where a message is sent (POST).
    static func sendMessage(channelURL: String) -> String {
        channelBase(channelURL) + "/messages"
    }

    /// A page of the user's channel list: `query` is the list's own filters and order.
    static func myChannels(userID: String, query: String, limit: Int, token: String?) -> String {
        var path = user(userID) + "/my_group_channels?" + query + "&limit=\(limit)"
        if let token { path += "&token=" + URLEncoding.percentEncode(token) }
        return path
    }

    /// A page of channel changelogs from `token` (nil: from the beginning).
    /// `withMembers` false: the channels without their member lists (`Engine.changelogsMayOmitMembers`).
    static func channelChangelogs(userID: String, token: String?, limit: Int, withMembers: Bool = true) -> String {
        user(userID) + "/my_group_channels/changelogs?" + changelogPosition(token) + "&limit=\(limit)&"
            + (withMembers ? fullChannelView : "show_member=false&show_metadata=true&show_metacounter=true")
    }

    /// A page of a channel's message changelogs from `token` (nil: from the beginning).
    static func messageChangelogs(channelURL: String, token: String?, limit: Int) -> String {
        channelBase(channelURL) + "/messages/changelogs?" + changelogPosition(token) + "&limit=\(limit)&" + fullMessageView
    }

    /// A page of the server's message search (§7.7) from `token` (nil: the first).
    static func searchMessages(userID: String, _ search: ServerSearchQuery, token: String?) -> String {
        var path = "/v3/search/messages?user_id=" + URLEncoding.percentEncode(userID) + "&query=" + URLEncoding.percentEncode(search.query)
        path += "&limit=\(search.limit)&sort_field=" + (search.byRelevance ? "score" : "ts") + "&" + fullMessageView
        let lists = [("channel_urls", search.filter.channelURLs), ("custom_types", search.filter.customTypes), ("sender_ids", search.filter.senderIDs)]
        for (name, list) in lists where !list.isEmpty {
            path += "&\(name)=" + list.map(URLEncoding.percentEncode).joined(separator: ",")
        }
        if let from = search.filter.createdFrom { path += "&message_ts_from=\(from)" }
        if let to = search.filter.createdTo { path += "&message_ts_to=\(to)" }
        path += "&highlight_start=" + URLEncoding.percentEncode(search.filter.highlightStart)
        path += "&highlight_end=" + URLEncoding.percentEncode(search.filter.highlightEnd)
        if let token { path += "&token=" + URLEncoding.percentEncode(token) }
        return path
    }

    /// A page of a channel's poll changelogs from `token` (nil: from the beginning; §7.6).
    static func pollChangelogs(channelURL: String, token: String?, limit: Int) -> String {
        channelBase(channelURL) + "/polls/changelogs?" + changelogPosition(token) + "&limit=\(limit)"
    }

    /// Where a message listing is anchored (docs/PROTOCOL.md §7.2).
    enum MessageListAnchor: Equatable {
        /// The newest end.
        case now
        /// `message_ts` (`include=true`): the older side holds the messages before it, the
        /// messages created at it come besides, counted in neither limit.
        case time(Int64)
        /// The older side holds `created_at <= T`, counted in its limit (`message_ts=T`,
        /// `message_id` the largest, `include=false`).
        case upTo(Int64)
        /// Strictly before / after one message (`message_ts`, `message_id`, `include=false`).
        case message(createdAt: Int64, messageID: Int64)
    }

    /// A page of a channel's messages around `anchor`, oldest first; `filter` is the
    /// listing's own query (starting with "&", or empty).
    static func messageList(channelURL: String, anchor: MessageListAnchor, previous: Int, next: Int, filter: String) -> String {
        var path = channelBase(channelURL) + "/messages?prev_limit=\(previous)&next_limit=\(next)&reverse=false" + filter
        switch anchor {
        case .now: break
        case .time(let ms): path += "&message_ts=\(max(0, ms))&include=true"
        case .upTo(let ms): path += "&message_ts=\(max(0, ms))&message_id=\(Int64.max)&include=false"
        case .message(let createdAt, let messageID): path += "&message_ts=\(createdAt)&message_id=\(messageID)&include=false"
        }
        return path
    }

    /// The messages after a view's shown range (docs/PROTOCOL.md, `messages_gap`): the range
    /// is its first and last message and how many it shows.
    static func messageGap(
        channelURL: String, first: (createdAt: Int64, messageID: Int64), last: (createdAt: Int64, messageID: Int64),
        shownCount: Int, hugeGapThreshold: Int, limit: Int, filter: String
    ) -> String {
        channelBase(channelURL) + "/messages_gap?prev_start_ts=\(first.createdAt)&prev_start_id=\(first.messageID)"
            + "&prev_end_ts=\(last.createdAt)&prev_end_id=\(last.messageID)&prev_cache_count=\(shownCount)"
            + "&huge_gap_threshold=\(hugeGapThreshold)&prev_limit=\(limit)&next_limit=0" + filter
    }

    private static func channelBase(_ channelURL: String) -> String {
        "/v3/group_channels/" + URLEncoding.encodePathSegment(channelURL)
    }

    private static func changelogPosition(_ token: String?) -> String {
        token.map { "token=" + URLEncoding.percentEncode($0) } ?? "change_ts=0"
    }
}

/// Percent-encoding for paths and query strings (RFC 3986 unreserved characters stay).
public enum URLEncoding {
    static func isUnreserved(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
            || byte == 0x2D || byte == 0x2E || byte == 0x5F || byte == 0x7E
    }

    /// A path segment that cannot change the route: besides percent-encoding, "." and ".."
    /// have their dots encoded (%2E), which URL normalization leaves alone.
    public static func encodePathSegment(_ text: String) -> String {
        if text == "." || text == ".." { return String(repeating: "%2E", count: text.count) }
        return percentEncode(text)
    }

    public static func percentEncode(_ text: String) -> String {
        let hex: [UInt8] = Array("0123456789ABCDEF".utf8)
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            if isUnreserved(byte) {
                output.append(byte)
            } else {
                output += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Encodes query parameters: lists comma-separated, booleans `true`/`false`,
    /// objects as JSON text. Keys are sorted so the same call gives the same URL.
    public static func queryString(_ fields: [String: JSONValue], operation: String) throws(ParleyError) -> String {
        var parts: [String] = []
        for key in fields.keys.sorted() {
            guard let value = fields[key] else { continue }
            let text: String
            switch value {
            case .null: continue
            case .array(let items):
                var rendered: [String] = []
                for item in items {
                    guard let scalar = scalarText(item) else {
                        throw .invalidArgument("\(operation): \(key) must be a list of strings, numbers or booleans")
                    }
                    rendered.append(percentEncode(scalar))
                }
                parts.append(percentEncode(key) + "=" + rendered.joined(separator: ","))
                continue
            case .object: text = value.canonicalText
            default: text = scalarText(value) ?? ""
            }
            parts.append(percentEncode(key) + "=" + percentEncode(text))
        }
        return parts.joined(separator: "&")
    }

    private static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): text
        case .int(let number): String(number)
        case .double(let number): number == number.rounded() && abs(number) < 9e15 ? String(Int64(number)) : "\(number)"
        case .bool(let flag): flag ? "true" : "false"
        default: nil
        }
    }
}

/// What the server's message search is asked (docs/PROTOCOL.md §7.7).
struct ServerSearchQuery: Sendable, Equatable {
    var query: String
    var filter: MessageSearchFilter
    var byRelevance: Bool
    var limit: Int
}
