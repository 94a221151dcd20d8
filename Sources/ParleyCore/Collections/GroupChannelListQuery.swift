// The query of a group channel collection: which of the user's channels a list shows and in
// which order. One description serves three purposes that must agree exactly:
// - the server's listing (`GET /v3/users/{id}/my_group_channels`, docs/PROTOCOL.md §6.2);
// - the client-side filter (`matches`) for channels that change in real time or come from
//   the cache;
// - the sort key (`sortKey`), the same tuple the server pages by, ties broken by the URL.

/// The order of a channel list.
public enum GroupChannelListOrder: String, Sendable, CaseIterable {
    /// Newest created first.
    case chronological
    /// Channels with a last message by its time, newest first; then the others by creation, newest first.
    case latestLastMessage = "latest_last_message"
    /// By name (the UTF-8 bytes of its NFC form, PROTOCOL.md "Sort orders"), then URL.
    case channelNameAlphabetical = "channel_name_alphabetical"
    /// By the value of the metadata key `metadata_order_key`; channels without it last.
    case metadataValueAlphabetical = "metadata_value_alphabetical"
}

public enum MemberStateFilter: String, Sendable, CaseIterable {
    case all
    case joinedOnly = "joined_only"
    case invitedOnly = "invited_only"
    /// There are no friends on this server: matches nothing.
    case invitedByFriend = "invited_by_friend"
    /// Without friends, every invitation: the same as `invited_only`.
    case invitedByNonFriend = "invited_by_non_friend"
}

public enum HiddenStateFilter: String, Sendable, CaseIterable {
    case unhiddenOnly = "unhidden_only"
    case hiddenOnly = "hidden_only"
    case hiddenAllowAutoUnhide = "hidden_allow_auto_unhide"
    case hiddenPreventAutoUnhide = "hidden_prevent_auto_unhide"
    case all
}

public enum SuperChannelFilter: String, Sendable, CaseIterable {
    case all
    case superChannelOnly = "super"
    case nonsuperChannelOnly = "nonsuper"
}

public enum PublicChannelFilter: String, Sendable, CaseIterable {
    case all
    case publicOnly = "public"
    case privateOnly = "private"
}

public enum UnreadChannelFilter: String, Sendable, CaseIterable {
    case all
    case unreadMessage = "unread_message"
}

/// How `userIDsIncludeFilter` combines its ids.
public enum UserIDsQueryType: String, Sendable, CaseIterable {
    /// Every listed user is a member.
    case and
    /// At least one listed user is a member.
    case or
}

/// One element of a channel's sort key.
public enum ChannelSortElement: Sendable, Comparable {
    case int(Int64)
    case string(String)

    public static func < (lhs: ChannelSortElement, rhs: ChannelSortElement) -> Bool {
        switch (lhs, rhs) {
        case (.int(let a), .int(let b)): a < b
        case (.string(let a), .string(let b)): utf8Precedes(a, b)
        case (.int, .string): true
        case (.string, .int): false
        }
    }
}

/// A channel's position in a list: compared element by element, the last element being the URL.
public struct ChannelSortKey: Sendable, Comparable {
    public var elements: [ChannelSortElement]

    public static func < (lhs: ChannelSortKey, rhs: ChannelSortKey) -> Bool {
        lhs.elements.lexicographicallyPrecedes(rhs.elements)
    }
}

/// Which channels a group channel collection lists, and in which order. Defaults follow the
/// reference SDK's query: empty channels (no message yet) left out, frozen channels included,
/// members and metadata included, newest activity first, 20 channels a page.
public struct GroupChannelListQuery: Sendable, Equatable {
    public var order: GroupChannelListOrder = .latestLastMessage
    /// Required with `.metadataValueAlphabetical`, refused otherwise.
    public var metadataOrderKey: String?
    /// Channels without a message (for this user) are listed too. Off by default, as in the reference.
    public var includeEmpty = false
    public var includeFrozen = true
    /// The channels handed to the application carry `members` (the cache always keeps them).
    public var includeMemberList = true
    /// The channels handed to the application carry `metadata` and `metacounter`.
    public var includeMetadata = true
    public var memberStateFilter: MemberStateFilter = .all
    public var hiddenStateFilter: HiddenStateFilter = .unhiddenOnly
    /// Exact custom types (any of them); nil or empty: all.
    public var customTypes: [String]?
    public var customTypeStartsWith: String?
    /// Case-insensitive part of the name.
    public var channelNameContains: String?
    public var channelURLs: [String]?
    /// The member set (joined and invited) is exactly these users plus the current user.
    public var userIDsExactFilter: [String]?
    public var userIDsIncludeFilter: [String]?
    public var userIDsIncludeQueryType: UserIDsQueryType = .and
    public var superChannelFilter: SuperChannelFilter = .all
    public var publicChannelFilter: PublicChannelFilter = .all
    public var unreadChannelFilter: UnreadChannelFilter = .all
    /// Channels per page, 1–100.
    public var limit = 20

    public init() {}

    static let fieldNames: Set<String> = [
        "order", "metadata_order_key", "include_empty", "include_frozen", "include_member_list", "include_metadata",
        "member_state_filter", "hidden_state_filter", "custom_types", "custom_type_starts_with",
        "channel_name_contains", "channel_urls", "user_ids_exact_filter", "user_ids_include_filter",
        "user_ids_include_query_type", "super_channel_filter", "public_channel_filter", "unread_channel_filter", "limit",
    ]

    /// Reads a query from its JSON form (the C ABI's and Python's): the field names above,
    /// every one optional. Unknown fields, wrong types and invalid combinations are refused
    /// with an error naming the field.
    public init(json: JSONValue) throws(ParleyError) {
        let reader = try JSONReader(json, path: "query")
        try reader.rejectUnknownKeys(allowed: Self.fieldNames)
        order = try reader.enumeration("order", default: order)
        metadataOrderKey = try reader.optionalString("metadata_order_key")
        includeEmpty = try reader.bool("include_empty", default: includeEmpty)
        includeFrozen = try reader.bool("include_frozen", default: includeFrozen)
        includeMemberList = try reader.bool("include_member_list", default: includeMemberList)
        includeMetadata = try reader.bool("include_metadata", default: includeMetadata)
        memberStateFilter = try reader.enumeration("member_state_filter", default: memberStateFilter)
        hiddenStateFilter = try reader.enumeration("hidden_state_filter", default: hiddenStateFilter)
        customTypes = try reader.optionalStrings("custom_types")
        customTypeStartsWith = try reader.optionalString("custom_type_starts_with")
        channelNameContains = try reader.optionalString("channel_name_contains")
        channelURLs = try reader.optionalStrings("channel_urls")
        userIDsExactFilter = try reader.optionalStrings("user_ids_exact_filter")
        userIDsIncludeFilter = try reader.optionalStrings("user_ids_include_filter")
        userIDsIncludeQueryType = try reader.enumeration("user_ids_include_query_type", default: userIDsIncludeQueryType)
        superChannelFilter = try reader.enumeration("super_channel_filter", default: superChannelFilter)
        publicChannelFilter = try reader.enumeration("public_channel_filter", default: publicChannelFilter)
        unreadChannelFilter = try reader.enumeration("unread_channel_filter", default: unreadChannelFilter)
        limit = Int(try reader.int("limit", default: Int64(limit), in: 1...100))
        try validate()
    }

    /// Refuses combinations the server cannot answer, naming the field.
    public func validate() throws(ParleyError) {
        guard (1...100).contains(limit) else { throw .invalidArgument("query.limit: must be 1 to 100, got \(limit)") }
        if order == .metadataValueAlphabetical {
            guard let key = metadataOrderKey, !key.isEmpty else {
                throw .invalidArgument("query.metadata_order_key: required with order metadata_value_alphabetical")
            }
        } else if metadataOrderKey != nil {
            throw .invalidArgument("query.metadata_order_key: only with order metadata_value_alphabetical, not \(order.rawValue)")
        }
        if userIDsExactFilter != nil && userIDsIncludeFilter != nil {
            throw .invalidArgument("query.user_ids_exact_filter: cannot be combined with user_ids_include_filter")
        }
        // Lists travel comma-separated in the listing's query string.
        let lists: [(String, [String]?)] = [
            ("custom_types", customTypes), ("channel_urls", channelURLs),
            ("user_ids_exact_filter", userIDsExactFilter), ("user_ids_include_filter", userIDsIncludeFilter),
        ]
        for (name, list) in lists {
            if let bad = list?.first(where: { $0.isEmpty || $0.utf8.contains(0x2C) }) {
                throw .invalidArgument("query.\(name): items must be non-empty and without commas, got '\(bad)'")
            }
        }
    }

    /// The query as JSON (the form `init(json:)` reads), defaults included.
    public var json: JSONValue {
        var fields: [String: JSONValue] = [
            "order": .string(order.rawValue), "include_empty": .bool(includeEmpty), "include_frozen": .bool(includeFrozen),
            "include_member_list": .bool(includeMemberList), "include_metadata": .bool(includeMetadata),
            "member_state_filter": .string(memberStateFilter.rawValue), "hidden_state_filter": .string(hiddenStateFilter.rawValue),
            "user_ids_include_query_type": .string(userIDsIncludeQueryType.rawValue),
            "super_channel_filter": .string(superChannelFilter.rawValue),
            "public_channel_filter": .string(publicChannelFilter.rawValue),
            "unread_channel_filter": .string(unreadChannelFilter.rawValue), "limit": .int(Int64(limit)),
        ]
        let strings: [(String, String?)] = [
            ("metadata_order_key", metadataOrderKey), ("custom_type_starts_with", customTypeStartsWith),
            ("channel_name_contains", channelNameContains),
        ]
        for (name, value) in strings { if let value { fields[name] = .string(value) } }
        let lists: [(String, [String]?)] = [
            ("custom_types", customTypes), ("channel_urls", channelURLs),
            ("user_ids_exact_filter", userIDsExactFilter), ("user_ids_include_filter", userIDsIncludeFilter),
        ]
        for (name, value) in lists { if let value { fields[name] = .array(value.map(JSONValue.string)) } }
        return .object(fields)
    }

    /// What identifies the set of channels the query selects (the page size does not):
    /// the cache records per identity whether it holds all of them.
    var identity: String {
        guard case .object(var fields) = json else { return "" }
        for key in ["limit", "include_member_list", "include_metadata"] { fields[key] = nil }
        return JSONValue.object(fields).canonicalText
    }

    /// The listing's query string (without `token` and `limit`): the server's names for the
    /// same filters, and the full render the cache keeps.
    var serverQuery: String {
        // Only strings, booleans and string lists: encoding cannot fail.
        (try? URLEncoding.queryString(serverParameters, operation: "channel list")) ?? ""
    }

    /// The listing's parameters (without `token` and `limit`) by their wire names; members,
    /// metadata and metacounters always asked for (the cache keeps channels whole).
    var serverParameters: [String: JSONValue] {
        var fields: [String: JSONValue] = [
            WireField.order: .string(order.rawValue), WireField.showEmpty: .bool(includeEmpty),
            WireField.showFrozen: .bool(includeFrozen), WireField.memberStateFilter: .string(memberStateFilter.rawValue),
            WireField.hiddenMode: .string(hiddenStateFilter.rawValue), WireField.superMode: .string(superChannelFilter.rawValue),
            WireField.publicMode: .string(publicChannelFilter.rawValue), WireField.unreadFilter: .string(unreadChannelFilter.rawValue),
            WireField.showMember: .bool(true), WireField.showMetadata: .bool(true), WireField.showMetacounter: .bool(true),
        ]
        if let metadataOrderKey { fields[WireField.metadataOrderKey] = .string(metadataOrderKey) }
        if let customTypes, !customTypes.isEmpty { fields[WireField.customTypes] = .array(customTypes.map(JSONValue.string)) }
        if let customTypeStartsWith { fields[WireField.customTypeStartsWith] = .string(customTypeStartsWith) }
        if let channelNameContains { fields[WireField.nameContains] = .string(channelNameContains) }
        if let channelURLs, !channelURLs.isEmpty { fields[WireField.channelURLs] = .array(channelURLs.map(JSONValue.string)) }
        if let userIDsExactFilter { fields[WireField.membersExactlyIn] = .array(userIDsExactFilter.map(JSONValue.string)) }
        if let userIDsIncludeFilter, !userIDsIncludeFilter.isEmpty {
            fields[WireField.membersIncludeIn] = .array(userIDsIncludeFilter.map(JSONValue.string))
            fields[WireField.queryType] = .string(userIDsIncludeQueryType == .and ? "AND" : "OR")
        }
        return fields
    }

    // MARK: Client-side evaluation (must agree with the server's listing)

    /// Whether the channel, as rendered for `userID`, belongs in the list.
    public func matches(_ channel: JSONValue, userID: String) -> Bool {
        guard case .object = channel else { return false }
        let channel = WireChannel(channel)
        let memberState = channel.memberState ?? "none"
        // my_group_channels lists the channels where the user is joined or invited.
        guard memberState == "joined" || memberState == "invited" else { return false }
        if !includeEmpty && channel.lastMessage == nil { return false }
        if !includeFrozen && channel.freeze == true { return false }
        let isPublic = channel.isPublic == true
        let isSuper = channel.isSuper == true
        switch publicChannelFilter {
        case .all: break
        case .publicOnly: if !isPublic { return false }
        case .privateOnly: if isPublic { return false }
        }
        switch superChannelFilter {
        case .all: break
        case .superChannelOnly: if !isSuper { return false }
        case .nonsuperChannelOnly: if isSuper { return false }
        }
        switch memberStateFilter {
        case .all: break
        case .joinedOnly: if memberState != "joined" { return false }
        case .invitedOnly, .invitedByNonFriend: if memberState != "invited" { return false }
        case .invitedByFriend: return false
        }
        let hiddenState = channel.hiddenState ?? "unhidden"
        switch hiddenStateFilter {
        case .all: break
        case .unhiddenOnly: if hiddenState != "unhidden" { return false }
        case .hiddenOnly: if hiddenState == "unhidden" { return false }
        case .hiddenAllowAutoUnhide, .hiddenPreventAutoUnhide: if hiddenState != hiddenStateFilter.rawValue { return false }
        }
        if unreadChannelFilter == .unreadMessage && (channel.unreadMessageCount ?? 0) == 0 { return false }
        let customType = channel.customType ?? ""
        if let customTypes, !customTypes.isEmpty, !customTypes.contains(customType) { return false }
        if let prefix = customTypeStartsWith, !customType.hasPrefix(prefix) { return false }
        if let channelURLs, !channelURLs.isEmpty, !channelURLs.contains(channel.channelURL ?? "") { return false }
        if let part = channelNameContains, !part.isEmpty,
            !(channel.name ?? "").lowercased().contains(part.lowercased())
        {
            return false
        }
        if userIDsExactFilter != nil || userIDsIncludeFilter.map({ !$0.isEmpty }) == true {
            let members = Set((channel.members ?? []).compactMap { WireMember($0).userID })
            if let exact = userIDsExactFilter, members != Set(exact).union([userID]) { return false }
            if let include = userIDsIncludeFilter, !include.isEmpty {
                let present = include.filter(members.contains).count
                if userIDsIncludeQueryType == .and ? present != include.count : present == 0 { return false }
            }
        }
        return true
    }

    /// The channel's position in this query's order: the tuple the server sorts by.
    public func sortKey(_ channel: JSONValue) -> ChannelSortKey {
        let channel = WireChannel(channel)
        let url = ChannelSortElement.string(channel.channelURL ?? "")
        let createdAt = channel.createdAt ?? 0
        switch order {
        case .chronological:
            return ChannelSortKey(elements: [.int(-createdAt), url])
        case .latestLastMessage:
            if let last = channel.lastMessage {
                return ChannelSortKey(elements: [.int(0), .int(-(last.createdAt ?? 0)), .int(-createdAt), url])
            }
            return ChannelSortKey(elements: [.int(1), .int(-createdAt), .int(-createdAt), url])
        case .channelNameAlphabetical:
            return ChannelSortKey(elements: [.string(nameOrderKey(channel.name ?? "")), url])
        case .metadataValueAlphabetical:
            if let key = metadataOrderKey, let value = channel.metadataValue(key) {
                return ChannelSortKey(elements: [.int(0), .string(textOrderKey(value)), url])
            }
            return ChannelSortKey(elements: [.int(1), .string(""), url])
        }
    }

    /// Whether the query filters by members: only then does the view keep (and read) the
    /// member lists of the channels it matches.
    var filtersByMembers: Bool { userIDsExactFilter != nil || userIDsIncludeFilter != nil }

    /// The channel as the view keeps it to match and sort (without `members` unless the
    /// query filters by them).
    func kept(_ channel: JSONValue) -> JSONValue {
        guard !filtersByMembers, case .object(var fields) = channel, fields[WireField.members] != nil else { return channel }
        fields[WireField.members] = nil
        return .object(fields)
    }

    /// The names (UTF-8) of the channel fields this query does not hand out.
    private var omittedChannelKeys: [[UInt8]] {
        (includeMemberList ? [] : [WireField.members]).map { Array($0.utf8) }
            + (includeMetadata ? [] : [WireField.metadata, WireField.metacounter]).map { Array($0.utf8) }
    }

    /// A stored channel's text as this query hands it to the application (cut as `presented`
    /// cuts the value, without a parse).
    func presented(text: String) -> JSONText {
        let omitted = omittedChannelKeys
        return JSONText(omitted.isEmpty ? text : CanonicalObjectText.removingMembers(omitted, from: text))
    }

    /// The channel as this query hands it to the application (without `members` or
    /// `metadata` / `metacounter` when they are not asked for).
    func presented(_ channel: JSONValue) -> JSONValue {
        guard !includeMemberList || !includeMetadata, case .object(var fields) = channel else { return channel }
        if !includeMemberList { fields[WireField.members] = nil }
        if !includeMetadata {
            fields[WireField.metadata] = nil
            fields[WireField.metacounter] = nil
        }
        return .object(fields)
    }
}
