// Stateful list queries for applications that page through server lists themselves instead of
// using a collection: each `loadNextPage` asks the server for the page after the last one and
// remembers where it stopped. A query is a plain read: its pages are handed to the application
// and never written to the cache (the collections own what the cache holds and how continuous
// it is; a page written beside them would be one they cannot vouch for). Each kind is one
// operation of the catalog (Operations.swift), which builds the request.

/// What a query lists.
public enum QueryKind: Int32, Sendable, CaseIterable {
    /// A channel's messages, newest first page by page, older on each call.
    case previousMessages = 1
    /// The user's group channels (joined or invited), with a channel collection's options.
    case groupChannels = 2
    /// Public group channels.
    case publicGroupChannels = 3
    /// A channel's members.
    case members = 4
    /// A channel's operators.
    case operators = 5
    /// A channel's banned users (operators only).
    case bannedUsers = 6
    /// A channel's muted members (operators only).
    case mutedUsers = 7

    /// The catalog operation that reads one page.
    var operation: String {
        switch self {
        case .previousMessages: "list_messages"
        case .groupChannels: "list_my_group_channels"
        case .publicGroupChannels: "list_public_group_channels"
        case .members: "list_members"
        case .operators: "list_operators"
        case .bannedUsers: "list_banned_users"
        case .mutedUsers: "list_muted_users"
        }
    }

    /// The member of the server's answer that holds the page.
    var answerKey: String {
        switch self {
        case .previousMessages: WireField.messages
        case .groupChannels, .publicGroupChannels: WireField.channels
        case .members: "members"
        case .operators: "operators"
        case .bannedUsers: "banned_list"
        case .mutedUsers: "muted_list"
        }
    }
}

/// The options of a query, checked once at creation, as the catalog operation's parameters.
struct QueryOptions: Sendable {
    /// The parameters every page sends (filters, page size, the channel).
    var parameters: [String: JSONValue]
    /// Previous messages: where the first page ends (nil: the newest message) and whether
    /// messages created exactly then belong to it.
    var startingPoint: Int64?
    var isInclusive = false

    static let messageFields: Set<String> = [
        "channel_url", "limit", "reverse", "is_inclusive", "starting_point", "message_type_filter", "custom_types",
        "sender_user_ids", "reply_type", "include_thread_info", "include_parent_message_info", "include_reactions",
        "include_meta_array",
    ]
    static let publicChannelFields: Set<String> = [
        "order", "metadata_order_key", "include_empty", "include_frozen", "include_member_list", "include_metadata",
        "public_membership_filter", "super_channel_filter", "custom_types", "custom_type_starts_with",
        "channel_name_contains", "channel_urls", "limit",
    ]
    static let memberFields: Set<String> = [
        "channel_url", "limit", "order", "operator_filter", "member_state_filter", "muted_member_filter",
        "nickname_starts_with",
    ]
    static let userListFields: Set<String> = ["channel_url", "limit"]

    /// Reads the options of `kind` (field names: docs/C-API.md "Queries"); unknown fields,
    /// wrong types and values out of range are refused, naming the field.
    init(kind: QueryKind, json: JSONValue) throws(ParleyError) {
        switch kind {
        case .previousMessages: try self.init(messageOptions: json)
        case .groupChannels:
            let query = try GroupChannelListQuery(json: json)
            var fields = query.serverParameters
            fields[WireField.showMember] = .bool(query.includeMemberList)
            fields[WireField.showMetadata] = .bool(query.includeMetadata)
            fields[WireField.showMetacounter] = .bool(query.includeMetadata)
            fields["limit"] = .int(Int64(query.limit))
            self.init(parameters: fields)
        case .publicGroupChannels: try self.init(publicChannelOptions: json)
        case .members: try self.init(memberOptions: json)
        case .operators, .bannedUsers, .mutedUsers:
            let reader = try JSONReader(json, path: "options")
            try reader.rejectUnknownKeys(allowed: Self.userListFields)
            self.init(parameters: [
                WireField.channelURL: .string(try Self.channelURL(reader)),
                "limit": .int(try reader.int("limit", default: 20, in: 1...100)),
            ])
        }
    }

    private init(parameters: [String: JSONValue]) { self.parameters = parameters }

    private init(messageOptions json: JSONValue) throws(ParleyError) {
        let reader = try JSONReader(json, path: "options")
        try reader.rejectUnknownKeys(allowed: Self.messageFields)
        let messageType = try reader.enumeration("message_type_filter", default: MessageTypeFilter.all)
        let replyType = try reader.enumeration("reply_type", default: ReplyTypeFilter.none)
        var fields: [String: JSONValue] = [
            WireField.channelURL: .string(try Self.channelURL(reader)),
            WireField.prevLimit: .int(try reader.int("limit", default: 20, in: 1...100)),
            "next_limit": 0,
            WireField.reverse: .bool(try reader.bool("reverse", default: false)),
            "include_reply_type": .string(replyType.rawValue.uppercased()),
            "include_thread_info": .bool(try reader.bool("include_thread_info", default: false)),
            "include_parent_message_info": .bool(try reader.bool("include_parent_message_info", default: false)),
            "include_reactions": .bool(try reader.bool("include_reactions", default: false)),
            "with_sorted_meta_array": .bool(try reader.bool("include_meta_array", default: false)),
        ]
        if let type = messageType.wireType { fields["message_type"] = .string(type) }
        if let types = try Self.listOption(reader, "custom_types"), !types.isEmpty, !types.contains("*") {
            fields["custom_types"] = .array(types.map(JSONValue.string))
        }
        if let senders = try Self.listOption(reader, "sender_user_ids"), !senders.isEmpty {
            fields["sender_ids"] = .array(senders.map(JSONValue.string))
        }
        parameters = fields
        isInclusive = try reader.bool("is_inclusive", default: false)
        if reader.fields["starting_point"] != nil, reader.fields["starting_point"] != .null {
            startingPoint = try reader.int("starting_point", in: 0...Int64.max)
        }
    }

    private init(publicChannelOptions json: JSONValue) throws(ParleyError) {
        let reader = try JSONReader(json, path: "options")
        try reader.rejectUnknownKeys(allowed: Self.publicChannelFields)
        let order = try reader.enumeration("order", default: GroupChannelListOrder.chronological)
        guard order != .latestLastMessage else {
            throw .invalidArgument("options.order: a public channel list is ordered chronological, " +
                                   "channel_name_alphabetical or metadata_value_alphabetical, not latest_last_message")
        }
        let metadataOrderKey = try reader.optionalString("metadata_order_key")
        if order == .metadataValueAlphabetical, metadataOrderKey?.isEmpty ?? true {
            throw .invalidArgument("options.metadata_order_key: required with order metadata_value_alphabetical")
        }
        if order != .metadataValueAlphabetical, metadataOrderKey != nil {
            throw .invalidArgument("options.metadata_order_key: only with order metadata_value_alphabetical, not \(order.rawValue)")
        }
        let includeMetadata = try reader.bool("include_metadata", default: true)
        let membership = try reader.string("public_membership_filter", default: "all")
        guard ["all", "joined"].contains(membership) else {
            throw .invalidArgument("options.public_membership_filter: expected all or joined, got '\(membership)'")
        }
        var fields: [String: JSONValue] = [
            WireField.order: .string(order.rawValue),
            WireField.showEmpty: .bool(try reader.bool("include_empty", default: false)),
            WireField.showFrozen: .bool(try reader.bool("include_frozen", default: true)),
            WireField.showMember: .bool(try reader.bool("include_member_list", default: true)),
            WireField.showMetadata: .bool(includeMetadata), WireField.showMetacounter: .bool(includeMetadata),
            "public_membership_filter": .string(membership),
            WireField.superMode: .string(try reader.enumeration("super_channel_filter", default: SuperChannelFilter.all).rawValue),
            "limit": .int(try reader.int("limit", default: 20, in: 1...100)),
        ]
        if let metadataOrderKey { fields[WireField.metadataOrderKey] = .string(metadataOrderKey) }
        if let types = try Self.listOption(reader, "custom_types"), !types.isEmpty {
            fields[WireField.customTypes] = .array(types.map(JSONValue.string))
        }
        if let prefix = try reader.optionalString("custom_type_starts_with") { fields[WireField.customTypeStartsWith] = .string(prefix) }
        if let part = try reader.optionalString("channel_name_contains") { fields[WireField.nameContains] = .string(part) }
        if let urls = try Self.listOption(reader, "channel_urls"), !urls.isEmpty {
            fields[WireField.channelURLs] = .array(urls.map(JSONValue.string))
        }
        parameters = fields
    }

    private init(memberOptions json: JSONValue) throws(ParleyError) {
        let reader = try JSONReader(json, path: "options")
        try reader.rejectUnknownKeys(allowed: Self.memberFields)
        var fields: [String: JSONValue] = [
            WireField.channelURL: .string(try Self.channelURL(reader)),
            "limit": .int(try reader.int("limit", default: 20, in: 1...100)),
        ]
        let choices: [(String, [String])] = [
            ("order", ["member_nickname_alphabetical", "operator_then_member_alphabetical"]),
            ("operator_filter", ["all", "operator", "nonoperator"]),
            ("member_state_filter", ["all", "joined_only", "invited_only"]),
            ("muted_member_filter", ["all", "muted", "unmuted"]),
        ]
        for (name, values) in choices {
            guard let value = try reader.optionalString(name) else { continue }
            guard values.contains(value) else {
                throw .invalidArgument("options.\(name): expected one of \(values.joined(separator: ", ")), got '\(value)'")
            }
            fields[name] = .string(value)
        }
        if let prefix = try reader.optionalString("nickname_starts_with") { fields["nickname_startswith"] = .string(prefix) }
        parameters = fields
    }

    private static func channelURL(_ reader: JSONReader) throws(ParleyError) -> String {
        let url = try reader.string("channel_url")
        guard !url.isEmpty else { throw .invalidArgument("options.channel_url: must not be empty") }
        return url
    }

    /// A list option; its items travel comma-separated in the query string.
    private static func listOption(_ reader: JSONReader, _ name: String) throws(ParleyError) -> [String]? {
        let list = try reader.optionalStrings(name)
        if let bad = list?.first(where: { $0.isEmpty || $0.utf8.contains(0x2C) }) {
            throw .invalidArgument("options.\(name): items must be non-empty and without commas, got '\(bad)'")
        }
        return list
    }
}

/// A stateful list query (`QueryKind`): `loadNextPage` gives the next page of the server's
/// listing each time, `hasNext` says whether there is one. Loads run one at a time: a load
/// asked while one is running is refused (`.invalidState`, "query in progress").
///
/// - list kinds keep the server's `next` token;
/// - previous messages keep the key (`created_at`, `message_id`) of the oldest message handed
///   out so far and ask for the messages strictly before it (docs/PROTOCOL.md §7.2: an anchor
///   by `message_ts` + `message_id`), so messages sharing a millisecond are neither skipped
///   nor repeated; `hasNext` is the server's `has_prev`.
///
/// The state (`hasNext`, the token or anchor) changes on the callback context, right before
/// the page's completion runs, so it always agrees with the pages already delivered.
public final class Query: Sendable {
    public let kind: QueryKind
    private let client: ParleyClient
    private let options: QueryOptions

    private struct State {
        var loading = false
        var hasNext = true
        var token: String?
        var anchor: MessageKey?
        var disposed = false
        var operationID: UInt64?
    }

    private let state = Locked(State())

    /// `options` as described for each kind in docs/C-API.md "Queries".
    public init(client: ParleyClient, kind: QueryKind, options: JSONValue = .object([:])) throws(ParleyError) {
        guard !client.isClosed else { throw .invalidState("the client is closed") }
        self.kind = kind
        self.client = client
        self.options = try QueryOptions(kind: kind, json: options)
    }

    /// Whether another page may follow: true until a page's answer said it was the last.
    public var hasNext: Bool { state.withLock { $0.hasNext } }

    /// Whether a load is running (its completion has not run yet).
    public var isLoading: Bool { state.withLock { $0.loading } }

    /// Loads the next page and completes with its items (messages, channels, members or users,
    /// as the server gives them; `[]` once `hasNext` is false), exactly once, on the callback
    /// context. Needs a connected session, as the operations do. Returns the operation id
    /// (`ParleyClient.cancel(operation:)`; a cancelled load changes nothing and may be asked again).
    @discardableResult
    public func loadNextPage(completion: @escaping @Sendable (Result<[JSONValue], ParleyError>) -> Void) throws(ParleyError) -> UInt64 {
        let position: (token: String?, anchor: MessageKey?, hasNext: Bool)? = try state.withLock { state throws(ParleyError) in
            guard !state.disposed else { throw .invalidState("the query is disposed") }
            guard !state.loading else {
                throw .invalidState("query in progress: wait for the previous load_next_page to complete")
            }
            state.loading = true
            return (state.token, state.anchor, state.hasNext)
        }
        guard let position else { return 0 }
        let kind = self.kind
        let finishLoad: @Sendable (Result<JSONValue, ParleyError>) -> Void = { [state] outcome in
            // Disposed before the completion ran: the answer may be in already (the cancel came
            // too late to stop it), but the query is gone, so the load is reported cancelled.
            let disposed = state.withLock { $0.disposed }
            let page = disposed ? .failure(ParleyError(.cancelled, "the query was disposed")) : Self.page(outcome, kind: kind)
            state.withLock { state in
                state.loading = false
                guard case .success(let page) = page else { return }
                if let token = page.token { state.token = token }
                if let anchor = page.anchor { state.anchor = anchor }
                state.hasNext = page.hasNext
            }
            completion(page.map(\.items))
        }
        do {
            let id: UInt64
            if !position.hasNext {
                // Past the end: an empty page, as the reference's queries give.
                id = try client.startOperation(finishLoad) { _, finish in finish(.success(.object([:]))) }
            } else {
                let parameters = pageParameters(token: position.token, anchor: position.anchor)
                id = try client.startRead(kind.operation, params: .object(parameters), completion: finishLoad)
            }
            state.withLock { $0.operationID = id }
            return id
        } catch {
            state.withLock { $0.loading = false }
            throw error
        }
    }

    /// Stops the query: a load in flight completes with `.cancelled`; later loads are refused.
    /// Idempotent.
    public func dispose() {
        let running = state.withLock { state -> UInt64? in
            state.disposed = true
            return state.loading ? state.operationID : nil
        }
        if let running { client.cancel(operation: running) }
    }

    /// The parameters of the next page's request.
    private func pageParameters(token: String?, anchor: MessageKey?) -> [String: JSONValue] {
        var parameters = options.parameters
        guard kind == .previousMessages else {
            if let token { parameters["token"] = .string(token) }
            return parameters
        }
        if let anchor {
            // Strictly before the oldest message handed out: ties at its millisecond come by id.
            parameters[WireField.messageTs] = .int(anchor.createdAt)
            parameters[WireField.messageID] = .int(anchor.messageID)
            parameters[WireField.include] = false
        } else if let start = options.startingPoint {
            parameters[WireField.messageTs] = .int(start)
            parameters[WireField.include] = .bool(options.isInclusive)
        } else {
            // The newest end: every message up to now, also those of the current millisecond.
            parameters[WireField.include] = true
        }
        return parameters
    }

    private struct Page {
        var items: [JSONValue]
        var hasNext: Bool
        var token: String?
        var anchor: MessageKey?
    }

    /// Reads one answer: the items, and where the next page starts.
    private static func page(_ outcome: Result<JSONValue, ParleyError>, kind: QueryKind) -> Result<Page, ParleyError> {
        let answer: JSONValue
        switch outcome {
        case .failure(let error): return .failure(error)
        case .success(let value): answer = value
        }
        guard case .object(let fields) = answer else { return .failure(ParleyError(.protocolViolation, "\(kind.operation): the answer is not an object")) }
        // The empty page given past the end carries nothing.
        if fields.isEmpty { return .success(Page(items: [], hasNext: false)) }
        guard let items = fields[kind.answerKey]?.arrayValue else {
            return .failure(ParleyError(.protocolViolation, "\(kind.operation): the answer has no \(kind.answerKey) array"))
        }
        guard kind == .previousMessages else {
            let next = fields[WireField.next]?.stringValue ?? ""
            return .success(Page(items: items, hasNext: !next.isEmpty, token: next.isEmpty ? nil : next))
        }
        var oldest: MessageKey?
        for item in items {
            guard let createdAt = item[WireField.createdAt]?.int64Value, let id = item[WireField.messageID]?.int64Value else {
                return .failure(ParleyError(.protocolViolation, "\(kind.operation): a message without created_at or message_id"))
            }
            let key = MessageKey(createdAt: createdAt, messageID: id)
            if oldest.map({ key < $0 }) ?? true { oldest = key }
        }
        let hasPrevious = fields[WireField.hasPrev]?.boolValue ?? false
        return .success(Page(items: items, hasNext: hasPrevious && !items.isEmpty, anchor: oldest))
    }
}

extension ParleyClient {
    /// Sends one catalog operation's request as the connected user and completes with the
    /// answer, without the operation's cache effect: the queries' plain reads.
    func startRead(
        _ operation: String, params: JSONValue, completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        guard let spec = OperationCatalog.spec(named: operation) else {
            throw ParleyError(.internalError, "no catalog operation '\(operation)'")
        }
        let engine = self.engine
        let transport = self.transport
        return try startOperation(completion) { id, finish in
            engine.queue.async {
                guard let call = Self.preparedCall(spec, params: params, engine: engine, finish: finish) else { return }
                guard let credential = engine.sessionCredential else {
                    finish(.failure(.invalidState("\(operation): not connected (call connect first)")))
                    return
                }
                transport.send(
                    operation: id, method: call.method, pathAndQuery: call.pathAndQuery, body: call.body, credential: credential,
                    finish: finish)
            }
        }
    }
}
