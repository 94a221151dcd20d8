// The parameters of a message collection: which messages of the channel the view shows,
// how many a page holds, and which optional parts each message carries. One description
// serves the server's listing (docs/PROTOCOL.md §7.2, §8.4), the cache's filter
// (`MessageFilter`, the same test as the server's) and what the application is handed
// (`presented`). Defaults follow the reference SDK's message list parameters.

public struct MessageListParams: Sendable, Equatable {
    /// Messages a page holds on the older side (and `load_previous` loads), 1–200.
    public var previousResultSize = 20
    /// Messages the first page holds after the starting point, 0–200; `load_next` loads this
    /// many, or `previousResultSize` when it is 0.
    public var nextResultSize = 0
    /// Messages created exactly at the starting point belong to the first page's older side;
    /// when false they belong to its newer side (the view never leaves them out).
    public var isInclusive = false
    /// The application sees the list newest first (events and pages too).
    public var reverse = false
    public var messageTypeFilter: MessageTypeFilter = .all
    /// Kept custom types; nil, empty or containing "*": all.
    public var customTypes: [String]?
    /// Kept senders; nil or empty: all.
    public var senderUserIDs: [String]?
    public var replyType: ReplyTypeFilter = .none
    public var includeThreadInfo = false
    public var includeParentMessageInfo = false
    public var includeReactions = false
    public var includeMetaArray = false
    /// More missing messages than this after a reconnection is a huge gap (the application
    /// recreates the view); fewer are filled in.
    public var hugeGapThreshold = 300

    public init() {}

    static let fieldNames: Set<String> = [
        "previous_result_size", "next_result_size", "is_inclusive", "reverse", "message_type_filter", "custom_types",
        "sender_user_ids", "reply_type", "include_thread_info", "include_parent_message_info", "include_reactions",
        "include_meta_array", "huge_gap_threshold",
    ]

    /// Reads the parameters from their JSON form (the C ABI's and Python's): the field names
    /// above, every one optional. Unknown fields and wrong types are refused, naming the field.
    public init(json: JSONValue) throws(ParleyError) {
        try self.init(json: json, path: "params")
    }

    /// `path` names the document in errors.
    init(json: JSONValue, path: String) throws(ParleyError) {
        let reader = try JSONReader(json, path: path)
        try reader.rejectUnknownKeys(allowed: Self.fieldNames)
        previousResultSize = Int(try reader.int("previous_result_size", default: Int64(previousResultSize), in: 1...200))
        nextResultSize = Int(try reader.int("next_result_size", default: Int64(nextResultSize), in: 0...200))
        isInclusive = try reader.bool("is_inclusive", default: isInclusive)
        reverse = try reader.bool("reverse", default: reverse)
        messageTypeFilter = try reader.enumeration("message_type_filter", default: messageTypeFilter)
        customTypes = try reader.optionalStrings("custom_types")
        senderUserIDs = try reader.optionalStrings("sender_user_ids")
        replyType = try reader.enumeration("reply_type", default: replyType)
        includeThreadInfo = try reader.bool("include_thread_info", default: includeThreadInfo)
        includeParentMessageInfo = try reader.bool("include_parent_message_info", default: includeParentMessageInfo)
        includeReactions = try reader.bool("include_reactions", default: includeReactions)
        includeMetaArray = try reader.bool("include_meta_array", default: includeMetaArray)
        hugeGapThreshold = Int(try reader.int("huge_gap_threshold", default: Int64(hugeGapThreshold), in: 1...1_000_000))
        try validate()
    }

    /// Refuses values the server cannot answer, naming the field.
    public func validate() throws(ParleyError) {
        guard (1...200).contains(previousResultSize) else {
            throw .invalidArgument("params.previous_result_size: must be 1 to 200, got \(previousResultSize)")
        }
        guard (0...200).contains(nextResultSize) else {
            throw .invalidArgument("params.next_result_size: must be 0 to 200, got \(nextResultSize)")
        }
        guard (1...1_000_000).contains(hugeGapThreshold) else {
            throw .invalidArgument("params.huge_gap_threshold: must be 1 to 1000000, got \(hugeGapThreshold)")
        }
        // Lists travel comma-separated in the listing's query string.
        for (name, list) in [("custom_types", customTypes), ("sender_user_ids", senderUserIDs)] {
            if let bad = list?.first(where: { $0.isEmpty || $0.utf8.contains(0x2C) }) {
                throw .invalidArgument("params.\(name): items must be non-empty and without commas, got '\(bad)'")
            }
        }
    }

    /// The parameters as JSON (the form `init(json:)` reads), defaults included.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "previous_result_size": .int(Int64(previousResultSize)), "next_result_size": .int(Int64(nextResultSize)),
            "is_inclusive": .bool(isInclusive), "reverse": .bool(reverse),
            "message_type_filter": .string(messageTypeFilter.rawValue), "reply_type": .string(replyType.rawValue),
            "include_thread_info": .bool(includeThreadInfo), "include_parent_message_info": .bool(includeParentMessageInfo),
            "include_reactions": .bool(includeReactions), "include_meta_array": .bool(includeMetaArray),
            "huge_gap_threshold": .int(Int64(hugeGapThreshold)),
        ]
        if let customTypes { fields["custom_types"] = .array(customTypes.map(JSONValue.string)) }
        if let senderUserIDs { fields["sender_user_ids"] = .array(senderUserIDs.map(JSONValue.string)) }
        return .object(fields)
    }

    /// The cache's (and the real-time re-check's) form of the filters.
    public var filter: MessageFilter {
        MessageFilter(messageType: messageTypeFilter, customTypes: customTypes, senderUserIDs: senderUserIDs, replyType: replyType)
    }

    /// How many messages `load_next` loads.
    var nextPageSize: Int { nextResultSize > 0 ? nextResultSize : previousResultSize }

    /// The filters as the server's query parameters (`&...`). The optional parts are always
    /// asked for: the cache keeps messages whole, `presented` leaves out what was not asked.
    var serverQuery: String {
        var query = "&" + Endpoints.fullMessageView
        let reply = switch replyType {
        case .all: "ALL"
        case .none: "NONE"
        case .onlyReplyToChannel: "ONLY_REPLY_TO_CHANNEL"
        }
        query += "&include_reply_type=" + reply
        if let type = messageTypeFilter.wireType { query += "&message_type=" + type }
        if let types = filter.effectiveCustomTypes { query += "&custom_types=" + types.map(URLEncoding.percentEncode).joined(separator: ",") }
        if let senders = filter.effectiveSenderUserIDs {
            query += "&sender_ids=" + senders.map(URLEncoding.percentEncode).joined(separator: ",")
        }
        return query
    }

    /// The top-level message members `presented` leaves out.
    var omittedMembers: OptionalMembers {
        var members: OptionalMembers = []
        if !includeReactions { members.insert(.reactions) }
        if !includeThreadInfo { members.insert(.threadInfo) }
        if !includeParentMessageInfo { members.insert(.parentMessageInfo) }
        if !includeMetaArray { members.insert(.sortedMetaarray) }
        return members
    }

    /// A message as the application is handed it: without the optional parts it did not ask for.
    func presented(_ message: JSONValue) -> JSONValue {
        guard case .object(var fields) = message else { return message }
        if !includeReactions { fields[WireField.reactions] = nil }
        if !includeThreadInfo { fields[WireField.threadInfo] = nil }
        if !includeParentMessageInfo { fields[WireField.parentMessageInfo] = nil }
        if !includeMetaArray { fields[WireField.sortedMetaarray] = nil }
        return .object(fields)
    }
}
