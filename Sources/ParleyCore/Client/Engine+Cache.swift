import Glibc

// The engine's side of the cache: opening the per-user cache, writing operation results
// and real-time events into it. Everything here runs on the engine queue.

extension Engine {
    /// Opens the cache of `userID` (closing another user's). A cache that cannot be opened
    /// is never fatal: the engine logs why and continues with an in-memory cache.
    func openCache(userID: String, log: (LogLevel, String) -> Void) {
        assertOnQueue()
        if cache != nil, cacheUserID == userID { return }
        cache?.close()
        cache = nil
        lastTouched = [:]
        let limit = configuration.cacheSizeLimitBytes
        var location = SQLiteLocation.memory
        if configuration.cacheMode == .persistent {
            switch Self.cacheFilePath(configuration: configuration, userID: userID) {
            case .success(let path): location = .file(path: path)
            case .failure(let error): log(.error, "cache: \(error.message); using an in-memory cache")
            }
        }
        do {
            cache = try ChatCache(location: location, sizeLimitBytes: limit)
        } catch {
            log(.error, "cache: cannot open \(location): \(error); using an in-memory cache")
            cache = try? ChatCache(location: .memory, sizeLimitBytes: limit)
        }
        if let recovery = cache?.recovery {
            log(.warning, "cache: \(recovery); starting with an empty cache")
        }
        cacheUserID = userID
    }

    /// `<dir>/<server host>/<user id>.sqlite`, names percent-encoded so that any user id or
    /// server URL makes one safe file name; directories created with mode 0700.
    static func cacheFilePath(configuration: ClientConfiguration, userID: String) -> Result<String, ParleyError> {
        var directory: String
        if let configured = configuration.cacheDirectory {
            directory = configured
        } else if let xdg = getenv("XDG_CACHE_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            directory = xdg + "/parley"
        } else if let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty {
            directory = home + "/.cache/parley"
        } else {
            return .failure(.invalidState("no cache_dir configured and neither XDG_CACHE_HOME nor HOME is set"))
        }
        var server = configuration.serverURL ?? "no-server"
        for scheme in ["https://", "http://"] where server.hasPrefix(scheme) {
            server.removeFirst(scheme.count)
        }
        directory += "/" + URLEncoding.percentEncode(server)
        if let error = makeDirectories(directory) { return .failure(error) }
        return .success(directory + "/" + URLEncoding.percentEncode(userID) + ".sqlite")
    }

    private static func makeDirectories(_ path: String) -> ParleyError? {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                return .invalidState("cannot create the cache directory '\(prefix)': \(String(cString: strerror(errno)))")
            }
            prefix += "/"
        }
        return nil
    }

    /// Runs `body` with the cache; a cache error is logged, never passed on (the cache is
    /// a copy of the server's state, and the operation that fed it already succeeded).
    func withCache(_ what: String, log: (LogLevel, String) -> Void, _ body: (ChatCache) throws(ParleyError) -> Void) {
        assertOnQueue()
        guard let cache else { return }
        do {
            try body(cache)
        } catch {
            log(.warning, "cache: \(what): \(error)")
        }
    }

    /// Applies an operation's effect to the cache.
    func applyToCache(_ effect: CacheEffect, params: JSONValue, answer: JSONValue, log: (LogLevel, String) -> Void) {
        withCache("storing an operation's result", log: log) { cache throws(ParleyError) in
            switch effect {
            case .none:
                break
            case .storeChannel:
                try storeChannelMerged(answer, in: cache)
            case .storeChannels(let key):
                for channel in answer[key]?.arrayValue ?? [] {
                    try storeChannelMerged(channel, in: cache)
                }
            case .removeChannel:
                if let url = params["channel_url"]?.stringValue { try cache.deleteChannel(url: url) }
            case .storeMessage:
                try cache.upsertMessage(answer)
            case .storeMessages(let key):
                try cache.upsertMessages(answer[key]?.arrayValue ?? [])
                try evictIfNeeded(cache, log: log)
            case .removeMessage:
                if let id = params["message_id"]?.int64Value ?? params["message_id"]?.stringValue.flatMap({ Int64($0) }) {
                    try cache.deleteMessage(messageID: id)
                }
            case .truncateHistory:
                if let url = params["channel_url"]?.stringValue, let offset = answer["ts_message_offset"]?.int64Value {
                    try cache.deleteMessages(channelURL: url, createdAtOrBefore: offset)
                }
            }
        }
    }

    /// Keeps the cache under its size limit (whole channels, least recently read first;
    /// never pending or failed messages).
    func evictIfNeeded(_ cache: ChatCache, log: (LogLevel, String) -> Void) throws(ParleyError) {
        let report = try cache.evictIfNeeded()
        if !report.evictedChannelURLs.isEmpty {
            log(.info, "cache: over its size limit (\(report.usedBytesBefore) bytes): evicted the messages of "
                + "\(report.evictedChannelURLs.count) channel(s), now \(report.usedBytesAfter) bytes")
        }
    }

    /// Stores a channel, keeping per-user fields the cached copy has and the new one lacks
    /// (event payloads carry the channel without them).
    func storeChannelMerged(_ channel: JSONValue, in cache: ChatCache) throws(ParleyError) {
        guard case .object(let incoming) = channel, let url = incoming["channel_url"]?.stringValue else {
            throw ParleyError(.protocolViolation, "channel: expected an object with channel_url")
        }
        var merged = incoming
        if let stored = try cache.channel(url: url), case .object(let old)? = try? JSONValue.parse(stored.json) {
            for (key, value) in old where merged[key] == nil && key != "last_message" {
                merged[key] = value
            }
            if merged["last_message"] == nil, let last = old["last_message"] { merged["last_message"] = last }
        }
        try cache.upsertChannel(.object(merged))
    }

    /// Applies one real-time event to the cache. Returns the channel URL the event is about.
    func applyEvent(_ event: StreamEvent, log: (LogLevel, String) -> Void) {
        let data = event.data
        let url = data["channel_url"]?.stringValue ?? ""
        let me = session?.userID
        withCache("applying event \(event.id) (\(event.category))", log: log) { cache throws(ParleyError) in
            try cache.transaction { () throws(ParleyError) in
                let removesMe: Bool =
                    switch event.category {
                    case "channel_deleted": true
                    case "user_left", "user_banned": data["user"]?["user_id"]?.stringValue == me
                    case "invitation_declined": data["invitee"]?["user_id"]?.stringValue == me
                    default: false
                    }
                if removesMe {
                    if !url.isEmpty { try cache.deleteChannel(url: url) }
                    return
                }
                if let channel = data["channel"], case .object = channel {
                    try storeChannelMerged(channel, in: cache)
                }
                switch event.category {
                case "message_received":
                    if let message = data["message"] { try cache.appendRealtimeMessage(message) }
                case "message_updated":
                    if let message = data["message"] { try cache.upsertMessage(message) }
                case "message_deleted":
                    if let id = data["message_id"]?.int64Value { try cache.deleteMessage(messageID: id) }
                case "reaction_updated":
                    if let reaction = data["reaction"] { try applyReaction(reaction, in: cache) }
                case "thread_info_updated":
                    if let parent = data["parent_message_id"]?.int64Value, let info = data["thread_info"] {
                        try patchMessage(parent, in: cache) { $0["thread_info"] = info }
                    }
                default:
                    break
                }
            }
            cache.touchLastEvent(event.id)
            if event.category == "message_received" { try evictIfNeeded(cache, log: log) }
        }
    }

    private func applyReaction(_ reaction: JSONValue, in cache: ChatCache) throws(ParleyError) {
        guard let messageID = reaction["message_id"]?.int64Value, let key = reaction["key"]?.stringValue,
            let user = reaction["user_id"]?.stringValue
        else { throw ParleyError(.protocolViolation, "reaction_updated: reaction needs message_id, key and user_id") }
        let adding = reaction["operation"]?.stringValue != "DELETE"
        let updatedAt = reaction["updated_at"] ?? .int(0)
        try patchMessage(messageID, in: cache) { fields in
            var reactions = fields["reactions"]?.arrayValue ?? []
            let index = reactions.firstIndex { $0["key"]?.stringValue == key }
            var users = index.flatMap { reactions[$0]["user_ids"]?.arrayValue } ?? []
            users.removeAll { $0.stringValue == user }
            if adding { users.append(.string(user)) }
            let entry: JSONValue = .object(["key": .string(key), "user_ids": .array(users), "updated_at": updatedAt])
            switch (index, users.isEmpty) {
            case (let at?, true): reactions.remove(at: at)
            case (let at?, false): reactions[at] = entry
            case (nil, false): reactions.append(entry)
            case (nil, true): break
            }
            fields["reactions"] = .array(reactions)
        }
    }

    /// Rewrites a cached message (when held) through `change`.
    private func patchMessage(_ messageID: Int64, in cache: ChatCache, _ change: (inout [String: JSONValue]) -> Void) throws(ParleyError) {
        guard let stored = try cache.message(id: messageID),
            case .object(var fields) = try JSONValue.parse(stored.json)
        else { return }
        change(&fields)
        try cache.upsertMessage(.object(fields), force: true)
    }
}

extension ChatCache {
    /// Records the newest applied event id, the stream's resume point across restarts.
    func touchLastEvent(_ id: Int64) {
        try? setMetaValue(String(id), forKey: "last_event_id")
    }

    /// Removes the channel's server messages created at or before `offset` (reset history).
    @discardableResult
    public func deleteMessages(channelURL: String, createdAtOrBefore offset: Int64) throws(ParleyError) -> Int {
        try database.statement("DELETE FROM messages WHERE channel_url = ?1 AND created_at <= ?2")
            .run([.text(channelURL), .integer(offset)])
    }
}
