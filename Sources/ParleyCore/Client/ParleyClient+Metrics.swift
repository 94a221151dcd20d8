// The client's metrics: what the engine, the cache, the views and the callback context are
// doing, for a service to export (docs/C-API.md "Metrics" lists every name). Counters are
// kept where the work happens (Sync/EngineMetrics.swift, CallbackDispatcher, the collection
// registry); asking reads them and the cache's sizes, which cost a pragma while the cache
// has not changed (Store/ChatCache+Statistics.swift).

/// One reading of the client's metrics. Names and units follow Prometheus: counters end in
/// `_total`, durations are in seconds, sizes in bytes.
public struct ClientMetrics: Sendable {
    public var connectionState: ConnectionState
    public var connectionStateSeconds: Double
    public var reconnects: Int
    public var reconnectFailures: Int
    public var eventsReceived: Int
    public var eventsApplied: Int
    public var catchUpPasses: Int
    public var catchUpSeconds: Double
    public var resyncs: Int
    public var sends: Int
    public var sendsRetried: Int
    public var sendsSucceeded: Int
    public var sendFailures: Int
    public var cache: CacheStatistics
    public var cacheSizeLimitBytes: Int64
    public var evictedChannels: Int
    public var evictedMessages: Int
    public var openViews: OpenViewCounts
    public var callbacks: CallbackStatistics

    /// Every metric by its name, in the order docs/C-API.md lists them: the one place the
    /// names are spelled (the JSON of `parley_client_metrics` is made from it).
    public var named: [(name: String, value: JSONValue)] {
        [
            ("connection_state", .string(connectionState.rawValue)),
            ("connection_state_seconds", .double(connectionStateSeconds)),
            ("reconnects_total", .int(Int64(reconnects))),
            ("reconnect_failures_total", .int(Int64(reconnectFailures))),
            ("events_received_total", .int(Int64(eventsReceived))),
            ("events_applied_total", .int(Int64(eventsApplied))),
            ("catch_up_passes_total", .int(Int64(catchUpPasses))),
            ("catch_up_seconds_total", .double(catchUpSeconds)),
            ("resyncs_total", .int(Int64(resyncs))),
            ("sends_total", .int(Int64(sends))),
            ("sends_retried_total", .int(Int64(sendsRetried))),
            ("sends_succeeded_total", .int(Int64(sendsSucceeded))),
            ("send_failures_total", .int(Int64(sendFailures))),
            ("outbox_pending_messages", .int(cache.pendingMessages)),
            ("outbox_failed_messages", .int(cache.failedMessages)),
            ("cache_size_bytes", .int(cache.sizeBytes)),
            ("cache_size_limit_bytes", .int(cacheSizeLimitBytes)),
            ("cache_messages", .int(cache.messages)),
            ("cache_channels", .int(cache.channels)),
            ("evicted_channels_total", .int(Int64(evictedChannels))),
            ("evicted_messages_total", .int(Int64(evictedMessages))),
            ("search_index_messages", .int(cache.searchIndexRows)),
            ("search_index_backlog_messages", .int(cache.searchIndexBacklog)),
            ("open_views", .int(Int64(openViews.total))),
            ("open_group_channel_collections", .int(Int64(openViews.groupChannelCollections))),
            ("open_message_collections", .int(Int64(openViews.messageCollections))),
            ("open_sync_views", .int(Int64(openViews.syncViews))),
            ("open_message_searches", .int(Int64(openViews.messageSearches))),
            ("callback_queue_depth", .int(Int64(callbacks.queueDepth))),
            ("callbacks_total", .int(Int64(callbacks.callbacksRun))),
            ("callback_slowest_seconds", .double(Double(callbacks.slowestCallbackNs) / 1e9)),
        ]
    }

    /// The metrics as one JSON object.
    public var json: JSONValue {
        .object(Dictionary(named.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first }))
    }
}

extension ParleyClient {
    /// Reads the metrics. Cheap enough to call every second: atomics and locks the work
    /// holds anyway, plus the cache's figures, read again only after a commit and their row
    /// counts at most every 100 times a count's duration (`CacheStatisticsKeeper`). A file
    /// cache is read beside the engine queue; an in-memory one waits for it.
    public func metrics() throws(ParleyError) -> ClientMetrics {
        let engine = self.engine
        let figures: CacheStatistics
        if let read = try engine.cacheReader.statistics() {
            figures = read
        } else {
            figures = try engine.sync { () throws(ParleyError) in try engine.cacheStatistics() }
        }
        let counters = engine.metrics
        let (state, seconds) = counters.connectionState()
        return ClientMetrics(
            connectionState: state, connectionStateSeconds: seconds,
            reconnects: counters.reconnects.value, reconnectFailures: counters.reconnectFailures.value,
            eventsReceived: counters.eventsReceived.value, eventsApplied: counters.eventsApplied.value,
            catchUpPasses: counters.catchUpPasses.value, catchUpSeconds: Double(counters.catchUpNanoseconds.value) / 1e9,
            resyncs: counters.resyncs.value,
            sends: counters.sends.value, sendsRetried: counters.sendsRetried.value,
            sendsSucceeded: counters.sendsSucceeded.value, sendFailures: counters.sendFailures.value,
            cache: figures, cacheSizeLimitBytes: configuration.cacheSizeLimitBytes,
            evictedChannels: counters.evictedChannels.value, evictedMessages: counters.evictedMessages.value,
            openViews: collections.openViews(), callbacks: dispatcher.statistics)
    }
}
