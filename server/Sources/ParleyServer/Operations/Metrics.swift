// GET /metrics: Prometheus text (docs/SERVER.md "Metrics"), kept in swift-prometheus's
// registry. One registry per process: the counters are the process's, whatever the number of
// servers on a database (a scraper sums them over servers).
import Foundation
import Prometheus
import Synchronization

final class ServerMetrics: Sendable {
    static let shared = ServerMetrics()

    let registry = PrometheusCollectorRegistry()
    private let startSeconds = Double(nowMillis()) / 1000

    /// From 0.5 ms to 10 s: a request on a quiet server takes about a millisecond, a commit
    /// waiting for a busy disk tens of them.
    private static let buckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .seconds(2.5), .seconds(10),
    ]

    /// From 0.1 ms to 1 s: the steps of a delivery of other servers' events take tenths of a
    /// millisecond each on a quiet server.
    private static let stepBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(100), .seconds(1),
    ]

    private static func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "parley", metricName: metric, unitName: unit, helpText: help)
    }

    // Computed: the descriptor type is not Sendable, so it cannot be a stored static.
    private static var requests: MetricNameDescriptor { name("http_requests", "total", "HTTP requests answered, by method, route template and status.") }
    private static var requestDuration: MetricNameDescriptor {
        name("http_request_duration", "seconds", "Time to the response head, by method and route template.")
    }
    private static var transactionDuration: MetricNameDescriptor {
        name("db_transaction_duration", "seconds", "Database transactions, from asking for a connection to the end, by kind.")
    }
    private static var transactionFailures: MetricNameDescriptor {
        name("db_transaction_failures", "total", "Database transactions that failed, by kind.")
    }
    private let transactionsInFlight: Gauge
    private let streamsOpen: Gauge
    private let framesSent: Counter
    private let eventsDelivered: Counter
    private let logReads: Counter
    private let logReadWait: DurationHistogram
    private let logReadDuration: DurationHistogram
    private let logReadDelivery: DurationHistogram
    private let messagesStored: Counter
    private let channelLoads: Counter
    private let channelLoadsFromCopies: Counter
    private let lagResyncs: Counter
    private let announcementsSent: Counter
    private let writesRetried: Counter
    private let writesBatched: Counter
    private let writesInOneFlight: Counter
    private let oneFlightFallbacks: Counter
    private let logFirstId: Gauge
    private let logLastId: Gauge
    private let deliveredId: Gauge
    private let started: Gauge
    private let hookQueueDepth: Gauge
    private static var hookDeliveries: MetricNameDescriptor {
        name("hook_deliveries", "total", "Webhook delivery attempts by endpoint and outcome: delivered, retried (failed, tried again later), failed (given up).")
    }

    private init() {
        transactionsInFlight = registry.makeGauge(descriptor: Self.name(
            "db_transactions_in_flight", "", "Database transactions running (on PostgreSQL, connections leased from the pool)."))
        streamsOpen = registry.makeGauge(descriptor: Self.name("event_streams_open", "", "Event streams open on this server."))
        framesSent = registry.makeCounter(descriptor: Self.name(
            "event_frames", "total", "Event frames queued to this server's streams (one per event and stream)."))
        eventsDelivered = registry.makeCounter(descriptor: Self.name(
            "events_delivered", "total", "Events this server delivered to its streams, its own and other servers'."))
        logReads = registry.makeCounter(descriptor: Self.name(
            "event_log_reads", "total",
            "Reads of other servers' events from the log (PostgreSQL): one per delivery that needs them, while this server has streams."))
        logReadWait = registry.makeDurationHistogram(descriptor: Self.name(
            "event_log_read_wait", "seconds",
            "PostgreSQL: from an announcement of another server's commit to the start of the read it asked for."),
            buckets: Self.stepBuckets)
        logReadDuration = registry.makeDurationHistogram(descriptor: Self.name(
            "event_log_read_duration", "seconds",
            "PostgreSQL: reads of other servers' events, from asking for a connection to the events and their channels in memory."),
            buckets: Self.stepBuckets)
        logReadDelivery = registry.makeDurationHistogram(descriptor: Self.name(
            "event_log_read_delivery_duration", "seconds",
            "PostgreSQL: after a read of other servers' events, rendering its batch and queuing the frames to the streams."),
            buckets: Self.stepBuckets)
        messagesStored = registry.makeCounter(descriptor: Self.name(
            "messages_stored", "total", "Messages this server stored (sent and copied)."))
        channelLoads = registry.makeCounter(descriptor: Self.name(
            "channel_loads", "total",
            "Channels read from the database (whole, or from an older copy): not in the record cache, or changed since it kept them."))
        channelLoadsFromCopies = registry.makeCounter(descriptor: Self.name(
            "channel_loads_from_copies", "total",
            "Channels read from an older copy the record cache held: their rows, and only the members written since (PostgreSQL); counted in channel_loads too."))
        announcementsSent = registry.makeCounter(descriptor: Self.name(
            "commit_announcements", "total",
            "PostgreSQL: wake-ups sent to the other servers after commits, each for every commit since the last (Writers/CommitFollowUp.swift)."))
        writesRetried = registry.makeCounter(descriptor: Self.name(
            "writes_retried", "total",
            "PostgreSQL: write transactions run again after a deadlock, a serialization failure or a user changed by another writer meanwhile."))
        writesBatched = registry.makeCounter(descriptor: Self.name(
            "writes_batched", "total",
            "PostgreSQL: writes committed in the transaction of an earlier writer of their channel, not in one of their own (Writers/ChannelBatch.swift)."))
        writesInOneFlight = registry.makeCounter(descriptor: Self.name(
            "writes_one_flight", "total",
            "PostgreSQL: sends whose lock, numbers and write went to the database in one round trip (Writers/OneFlightSend.swift)."))
        oneFlightFallbacks = registry.makeCounter(descriptor: Self.name(
            "one_flight_fallbacks", "total",
            "PostgreSQL: sends tried in one round trip that ran the usual way instead (a record they used had changed, or they needed another statement)."))
        lagResyncs = registry.makeCounter(descriptor: Self.name(
            "event_stream_resyncs", "total",
            "resync frames sent to this server's streams because it fell behind the event log's retention."))
        logFirstId = registry.makeGauge(descriptor: Self.name("event_log_first_id", "", "The oldest event id the log keeps."))
        logLastId = registry.makeGauge(descriptor: Self.name("event_log_last_id", "", "The newest event id in the log."))
        deliveredId = registry.makeGauge(descriptor: Self.name(
            "events_delivered_through_id", "", "Every event up to this id went out to this server's streams."))
        started = registry.makeGauge(descriptor: Self.name(
            "process_start_time", "seconds", "When the process started, in seconds since 1970."))
        hookQueueDepth = registry.makeGauge(descriptor: Self.name(
            "hook_queue_depth", "", "Webhook deliveries queued and not yet delivered or given up, on every server of the database."))
        var transactions: [TransactionKind: (duration: DurationHistogram, failures: Counter)] = [:]
        for kind in TransactionKind.allCases {
            transactions[kind] = (
                registry.makeDurationHistogram(descriptor: Self.transactionDuration, labels: [("kind", kind.rawValue)],
                                               buckets: Self.buckets),
                registry.makeCounter(descriptor: Self.transactionFailures, labels: [("kind", kind.rawValue)]))
        }
        transactionCollectors = transactions
    }

    /// The collectors of each (method, route, status) met so far: the registry's own lookup
    /// builds the metric's name and takes its lock, on every request otherwise.
    private let requestCollectors = Mutex<[String: (Counter, DurationHistogram)]>([:])

    /// `method` must be one the router serves (else "OTHER"), so that labels stay few.
    func requestAnswered(method: String, route: String, status: Int, duration: Duration) {
        let key = "\(method) \(route) \(status)"
        let collectors = requestCollectors.withLock { known in
            if let found = known[key] { return found }
            let made = (
                registry.makeCounter(descriptor: Self.requests,
                                     labels: [("method", method), ("route", route), ("status", String(status))]),
                registry.makeDurationHistogram(descriptor: Self.requestDuration, labels: [("method", method), ("route", route)],
                                               buckets: Self.buckets))
            known[key] = made
            return made
        }
        collectors.0.increment()
        collectors.1.record(duration)
    }

    enum TransactionKind: String, CaseIterable, Sendable {
        case read, write
        /// SQLite's group commit.
        case commit
    }

    private let transactionCollectors: [TransactionKind: (duration: DurationHistogram, failures: Counter)]

    /// Runs one transaction of `kind` and measures it.
    func transaction<T>(_ kind: TransactionKind, _ body: () async throws -> T) async throws -> T {
        let collectors = transactionCollectors[kind]!
        transactionsInFlight.increment()
        let start = ContinuousClock.now
        defer {
            transactionsInFlight.decrement()
            collectors.duration.record(start.duration(to: .now))
        }
        do {
            return try await body()
        } catch {
            collectors.failures.increment()
            throw error
        }
    }

    func delivered(events: Int, frames: Int) {
        if events > 0 { eventsDelivered.increment(by: Int64(events)) }
        if frames > 0 { framesSent.increment(by: Int64(frames)) }
    }

    /// One read of other servers' events and the delivery of its batch: `waited` from the
    /// announcement that asked for it to its start (nil when a catch-up asked for it).
    func readOtherServersEvents(waited: Duration?, read: Duration, delivered: Duration) {
        logReads.increment()
        if let waited { logReadWait.record(waited) }
        logReadDuration.record(read)
        logReadDelivery.record(delivered)
    }

    func announcementSent() { announcementsSent.increment() }

    func writeRetried() { writesRetried.increment() }

    /// A PostgreSQL writer committed in the transaction of an earlier writer of its channel.
    func writeBatched() { writesBatched.increment() }

    /// A PostgreSQL send committed in one round trip (Writers/OneFlightSend.swift).
    func wroteInOneFlight() { writesInOneFlight.increment() }

    /// A send tried in one round trip ran the usual way instead.
    func oneFlightFellBack() { oneFlightFallbacks.increment() }

    func resyncedAfterLag(streams: Int) {
        if streams > 0 { lagResyncs.increment(by: Int64(streams)) }
    }

    func loaded(channels: Int) {
        if channels > 0 { channelLoads.increment(by: Int64(channels)) }
    }

    func loaded(fromCopies channels: Int) {
        if channels > 0 { channelLoadsFromCopies.increment(by: Int64(channels)) }
    }

    /// The collectors of each (endpoint, outcome) met so far.
    private let hookCollectors = Mutex<[String: Counter]>([:])

    func hookDelivery(endpoint: String, outcome: String) {
        let counter = hookCollectors.withLock { known in
            if let counter = known[endpoint + " " + outcome] { return counter }
            let counter = registry.makeCounter(descriptor: Self.hookDeliveries, labels: [("endpoint", endpoint), ("outcome", outcome)])
            known[endpoint + " " + outcome] = counter
            return counter
        }
        counter.increment()
    }

    func stored(messages: Int) {
        if messages > 0 { messagesStored.increment(by: Int64(messages)) }
    }

    /// The exposition, with the gauges read now.
    func exposition(shared: SharedState) async -> [UInt8] {
        streamsOpen.set(Int64(shared.hub.openStreamTotal))
        deliveredId.set(shared.hub.deliveredThrough)
        started.set(startSeconds)
        let bounds = try? await shared.database.read { db in
            try await db.queryOne("SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM events", [])
        }
        if let bounds = bounds ?? nil {
            logFirstId.set(bounds.int(0))
            logLastId.set(bounds.int(1))
        }
        if let depth = try? await shared.database.read({ db in try await HookQueue.depth(db) }) { hookQueueDepth.set(depth) }
        return registry.emitToBuffer() + ProcessMetrics.exposition()
    }
}
