// Reading the cache directly (what the app can show without the network), and clearing it.
// Results are JSON array texts assembled from the stored canonical texts, never re-encoded.

extension ParleyClient {
    /// Up to `limit` cached channels in `order` ("chronological", "latest_last_message",
    /// "channel_name_alphabetical"), as a JSON array. Works offline and after `disconnect`.
    public func cachedChannels(order: String = "latest_last_message", limit: Int = 100) throws(ParleyError) -> String {
        guard let listOrder = ChannelListOrder(rawValue: order) else {
            throw .invalidArgument("order: expected chronological, latest_last_message or channel_name_alphabetical; got '\(order)'")
        }
        guard (1...1000).contains(limit) else { throw .invalidArgument("limit: expected 1...1000, got \(limit)") }
        return try readCache { cache throws(ParleyError) -> String in
            "[" + (try cache.channels(order: listOrder, limit: limit)).map(\.json).joined(separator: ",") + "]"
        }
    }

    /// The cached channel with `channelURL` as JSON, nil when not cached.
    public func cachedChannel(url channelURL: String) throws(ParleyError) -> String? {
        try readCache { cache throws(ParleyError) -> String? in try cache.channel(url: channelURL)?.json }
    }

    /// The newest `limit` cached messages of the channel created before `beforeTs` (nil:
    /// the newest), oldest first, followed by the channel's pending and failed messages
    /// when `beforeTs` is nil (they always sort after succeeded ones). A JSON array. It
    /// shows what is cached, holes included: `cachedMessagePage` says whether the page is
    /// known to be continuous.
    public func cachedMessages(channelURL: String, beforeTs: Int64? = nil, limit: Int = 30) throws(ParleyError) -> String {
        String(decoding: try cachedMessagesJSON(channelURL: channelURL, beforeTs: beforeTs, limit: limit), as: UTF8.self)
    }

    /// `cachedMessages` as the UTF-8 bytes of the JSON array, assembled straight from the
    /// stored texts (what the C ABI copies out).
    public func cachedMessagesJSON(channelURL: String, beforeTs: Int64? = nil, limit: Int = 30) throws(ParleyError) -> [UInt8] {
        try cachedMessagesJSON(channelURL: channelURL, beforeTs: beforeTs, limit: limit, marked: false)
    }

    /// `cachedMessages` as a JSON object `{"messages": [...], "continuous": bool}`.
    /// `continuous` is true only when the cache knows that no message of the channel is
    /// missing between the page's first message and its last one (and, with `beforeTs`, up
    /// to just before `beforeTs`, so that it joins the page after it): ranges loaded from
    /// the server (a message collection without filters, or `list_messages` with
    /// `include_reply_type` "ALL" and no filters) and extended by the stream while it stays
    /// up. False: the page may span a hole (e.g. after a `resync`, or messages only ever
    /// received live); load that range from the server to close it.
    public func cachedMessagePage(channelURL: String, beforeTs: Int64? = nil, limit: Int = 30) throws(ParleyError) -> String {
        String(decoding: try cachedMessagePageJSON(channelURL: channelURL, beforeTs: beforeTs, limit: limit), as: UTF8.self)
    }

    /// `cachedMessagePage` as UTF-8 bytes (what the C ABI copies out).
    public func cachedMessagePageJSON(channelURL: String, beforeTs: Int64? = nil, limit: Int = 30) throws(ParleyError) -> [UInt8] {
        try cachedMessagesJSON(channelURL: channelURL, beforeTs: beforeTs, limit: limit, marked: true)
    }

    private func cachedMessagesJSON(channelURL: String, beforeTs: Int64?, limit: Int, marked: Bool) throws(ParleyError) -> [UInt8] {
        guard !channelURL.isEmpty else { throw .invalidArgument("channel_url must not be empty") }
        guard (1...1000).contains(limit) else { throw .invalidArgument("limit: expected 1...1000, got \(limit)") }
        let json = try readCache { cache throws(ParleyError) -> [UInt8] in
            let key = beforeTs.map { MessageKey(createdAt: $0, messageID: .min) } ?? .newest
            var json: [UInt8] = Array((marked ? "{\"messages\":[" : "[").utf8)
            json.reserveCapacity(limit * 512)
            var continuous = true
            // One read transaction: the messages, the local ones and the ranges from the same commit.
            try cache.transactionForReading { () throws(ParleyError) in
                try cache.appendMessageTexts(channelURL: channelURL, before: key, limit: limit, to: &json)
                if beforeTs == nil {
                    try cache.appendLocalMessageTexts(channelURL: channelURL, to: &json)
                }
                if marked {
                    continuous = try cache.messagePageIsContinuous(
                        channelURL: channelURL, before: key, limit: limit, anchored: beforeTs != nil)
                }
            }
            json.append(UInt8(ascii: "]"))
            if marked { json += Array(",\"continuous\":\(continuous)}".utf8) }
            return json
        }
        // Access times order eviction; minute precision is plenty and spares a write per read.
        // Written on the engine queue, without making the read wait for it.
        let engine = self.engine
        let now = Self.nowMs()
        engine.queue.async { engine.recordAccess(channelURL: channelURL, at: now) }
        return json
    }

    /// Runs a read of the cache: on the cache's read-only connection when it is a file (the
    /// read does not wait for the engine queue), else on the engine queue.
    private func readCache<T>(_ body: (ChatCache) throws(ParleyError) -> T) throws(ParleyError) -> T {
        let engine = self.engine
        if let result = try engine.cacheReader.read(body) { return result }
        return try engine.sync { () throws(ParleyError) -> T in
            try engine.readOpenCache(body)
        }
    }

    /// Removes everything cached for the current user — channels, messages, tokens, and the
    /// pending/failed messages with their outbox — and compacts the file. The cache stays
    /// usable; the next catch-up refills it.
    public func clearCachedData() throws(ParleyError) {
        let engine = self.engine
        try engine.sync { () throws(ParleyError) in try engine.clearCache() }
    }

    /// `rekey_cache`: encrypts the current user's cache file with another key, given as
    /// `{"cache_key": ...}` or `{"cache_passphrase": ...}` (with `cache_passphrase_iterations`,
    /// `cache_passphrase_memory_mb`), or removes its encryption (`{}`); the client uses that
    /// key from then on. The file is rewritten beside itself and renamed over the old one: a
    /// crash leaves it whole under one key or the other. Blocks while the file is rewritten.
    public func rekeyCache(json: String) throws(ParleyError) {
        let reader = try JSONReader(try JSONValue.parse(json.isEmpty ? "{}" : json), path: "key")
        try reader.rejectUnknownKeys(allowed: ["cache_key", "cache_passphrase", "cache_passphrase_iterations", "cache_passphrase_memory_mb"])
        let secret = try ClientConfiguration.cacheSecret(reader)
        try rekeyCache(secret: secret)
    }

    /// `rekeyCache(json:)` with the secret itself (nil: no encryption).
    public func rekeyCache(secret: CacheSecret?) throws(ParleyError) {
        let engine = self.engine
        try engine.sync { () throws(ParleyError) in try engine.rekeyCache(to: secret) }
    }
}
