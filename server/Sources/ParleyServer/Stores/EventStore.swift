/// The event log of one request (`EventEmitter`, `EventLog`): the events it emits, stored
/// with its changes and handed to the hub once it commits, the webhook calls they queue, who
/// is typing, and the reads of the stored log (replays, and other servers' events for the hub).
final class EventStore: EventEmitter {
    private let tx: RequestTransaction
    private let channels: ChannelStore
    private let users: UserStore
    private var shared: SharedState { tx.shared }
    private var cache: RecordCache { shared.cache }
    private var db: any SQLSession { get throws { try tx.db } }

    /// Webhook calls this request queues, stored with its changes (OutgoingCalls/HookDeliveries.swift).
    private var pendingHookCalls: [QueuedHookCall] = []
    /// The bodies of the webhook calls queued.
    private var queuedHookBodies: Set<String> = []
    /// Push notifications held until the request commits (OutgoingCalls/Push.swift).
    private(set) var heldPushes: [HeldPush] = []

    init(_ tx: RequestTransaction, channels: ChannelStore, users: UserStore) {
        self.tx = tx
        self.channels = channels
        self.users = users
    }

    /// No webhook call queued (a read request that queued one runs again as a writer).
    var queuedNoCalls: Bool { pendingHookCalls.isEmpty }

    /// Stores the queued webhook calls in the request's transaction.
    func insertHookCalls(_ db: any SQLSession) async throws {
        if !pendingHookCalls.isEmpty { try await HookQueue.insert(pendingHookCalls, now: nowMillis(), db) }
    }

    /// Ends every open event stream of the user (deactivated or deleted), on every server,
    /// before the events this request emits after this call: their session keys no longer
    /// authenticate, so what the streams would still deliver is not theirs to see. It is an
    /// event of the log (`StoredEvent.endStreamsCategory`) that each server's hub acts on in
    /// id order and no stream is sent.
    func endStreams(of userId: String, message: String) {
        let now = nowMillis()
        var fields = JSONObject()
        fields["code"] = .int(400301)
        fields["message"] = .string(message)
        let event = StoredEvent(id: tx.nextSeq(), createdAt: now, category: StoredEvent.endStreamsCategory,
                                recipients: [userId], data: JSON.object(fields).serialized(), fields: fields)
        tx.append(event)
    }

    func setTyping(_ userId: String, in url: String, since: Int64?) {
        tx.pending.typing[MemberKey(channelUrl: url, userId: userId)] = .some(since)
    }

    func typers(in url: String, now: Int64) async throws -> [String] {
        var since: [String: Int64?] = [:]
        for row in try await db.query("SELECT user_id, since FROM typing WHERE channel_url = ?", [.text(url)]) {
            since[row.text(0)] = row.int(1)
        }
        for (key, value) in tx.pending.typing where key.channelUrl == url { since[key.userId] = value }
        var typers: [String] = []
        for (userId, started) in since {
            guard let started else { continue }
            if now - started < 10_000 { typers.append(userId) } else { setTyping(userId, in: url, since: nil) }
        }
        return typers.sorted()
    }

    /// SQLite: keeps the newest `retention` events for resumes, pruned back to it in every
    /// write that takes the log past it: older ones go, and `prunedThrough` says up to where
    /// (a pending counter). Runs before the request's events are written (see
    /// `RequestState.handleWriting`), or after them when they alone are more than the retention.
    /// PostgreSQL prunes apart from the writers (`WriterRules.writersPruneLog`, `PostgresWriters.pruneLog`).
    func pruneEvents(adding added: Int, _ db: any SQLSession) async throws {
        guard tx.rules.writersPruneLog else { return }
        let retention = shared.retention
        tx.counters.storedEvents += added
        guard tx.counters.storedEvents > retention else { return }
        let drop = tx.counters.storedEvents - retention
        guard let boundary = try await db.queryOne("SELECT id FROM events ORDER BY id LIMIT 1 OFFSET \(drop - 1)")?.int(0)
        else { return }
        try await db.execute("DELETE FROM events WHERE id <= ?", [.int(boundary)])
        tx.pending.counters["pruned_through"] = boundary
        tx.counters.prunedThrough = boundary
        tx.counters.storedEvents = retention
    }

    /// The retained events after `last` up to `through` addressed to `userId`, oldest first.
    func events(after last: Int64, through: Int64, for userId: String) async throws -> [StoredEvent] {
        let contains = try db.dialect == .sqlite ? "instr(recipients, ?) > 0" : "strpos(recipients, ?) > 0"
        return try await db.query("""
            SELECT id, created_at, category, recipients, data FROM events WHERE id > ? AND id <= ? AND \(contains) ORDER BY id
            """, [.int(last), .int(through), .text(recipientSeparator + userId + recipientSeparator)]).map { RecordTables.event($0) }
    }

    private static let committedEventColumns = "b.pruned, b.users, e.id, e.created_at, e.category, e.recipients, e.data"
    private static let committedEventsFrom = """
        FROM (SELECT coalesce((SELECT value FROM meta WHERE name = 'pruned_through'), 0) AS pruned,
                     coalesce((SELECT value FROM meta WHERE name = 'users_written'), 0) AS users) b
            LEFT JOIN events e ON e.id >= ? AND e.id <= ?
        """

    /// The statement of `committedEvents`: it follows every message of another server
    /// (prepared on PostgreSQL, HotStatements.swift).
    static let committedEventsSQL = "SELECT \(committedEventColumns) \(committedEventsFrom) ORDER BY e.id"

    /// The committed events whose ids are in `ranges` (whoever receives them), oldest first:
    /// what another server's writers committed (EventHub.swift); and where the retained events
    /// begin (events up to there were pruned). Those with a recipient in `rendered` are parsed,
    /// with their channels loaded to render them; the others reach no stream here and are
    /// left as read. One statement over the span of the ranges, which also reads the users
    /// counter (on SQLite users current at it are not checked again; on PostgreSQL, where it
    /// does not move, every user is); then one for the channels, read from the copies the
    /// record cache holds where it holds one (on PostgreSQL only the members written since,
    /// ChannelQueries.swift).
    func committedEvents(in ranges: [ClosedRange<Int64>], rendered: ([String]) -> Bool)
        async throws -> (events: [StoredEvent], prunedThrough: Int64) {
        guard let low = ranges.map(\.lowerBound).min(), let high = ranges.map(\.upperBound).max() else { return ([], 0) }
        var events: [StoredEvent] = []
        var urls = Set<String>()
        // Channels whose events here all leave members out (`RecordRenderer.framer`), and the
        // members those events change, which they show.
        var membersShown = Set<String>()
        var changedMembers = Set<String>()
        var pruned: Int64 = 0
        for row in try await db.query(Self.committedEventsSQL, [.int(low), .int(high)]) {
            pruned = row.int(0)
            users.usersWrittenInSnapshot = row.int(1)
            guard row.optionalInt(2) != nil else { continue }
            var event = RecordTables.event(row, from: 2)
            guard ranges.contains(where: { $0.contains(event.id) }) else { continue }
            // Ending streams needs no render; an event no stream here receives needs nothing.
            guard event.category != StoredEvent.endStreamsCategory, rendered(event.recipients) else {
                events.append(event)
                continue
            }
            event.fields = event.parsedData
            if case .string(let url)? = event.fields?["channel_url"] {
                urls.insert(url)
                if RecordRenderer.memberlessCategories.contains(event.category), let fields = event.fields {
                    changedMembers.formUnion(RecordRenderer.changedMemberIDs(event.category, fields))
                } else {
                    membersShown.insert(url)
                }
                // A cached copy older than the event is stale if the event changed the
                // channel, as all but typing do: loaded at once, not after a version check
                // that fails.
                if event.category != "typing_status", let copy = cache.channel(url), copy.channel.changeSeq < event.id {
                    channels.knownChanged(url)
                }
            }
            events.append(event)
        }
        try await channels.loadChannels(Array(urls), membersLeftOut: urls.subtracting(membersShown), alsoShown: changedMembers)
        return (events, pruned)
    }

    /// Where the retained events begin: events up to here were pruned (in this snapshot).
    func prunedThrough() async throws -> Int64 {
        try await db.queryOne("SELECT value FROM meta WHERE name = 'pruned_through'")?.int(0) ?? 0
    }

    func emit(_ category: String, channelUrl: String, to recipients: Set<String>, fields: [(String, JSON?)], now: Int64) {
        if let hook = WebhookCategory(streamEvent: category) { queueWebhook(hook, channelUrl: channelUrl, fields: fields, now: now) }
        guard !recipients.isEmpty else { return }
        let id = tx.nextSeq()
        var all: [(String, JSON?)] = [
            ("category", .string(category)), ("ts", .int(now)),
            ("channel_url", .string(channelUrl)), ("channel_type", "group"),
        ]
        all.append(contentsOf: fields)
        var fields = JSONObject()
        for (key, value) in all { if let value { fields[key] = value } }
        // Serialized as `JSON.object(fields).serialized()` would, noting where the channel is.
        var data = "{"
        data.reserveCapacity(4096)
        var first = true
        var channelRange: Range<Int>? = nil
        for (key, value) in fields.entries {
            if !first { data += "," }
            first = false
            JSON.writeString(key, to: &data)
            data += ":"
            let start = data.utf8.count
            value.write(to: &data)
            if key == "channel" { channelRange = start..<data.utf8.count }
        }
        data += "}"
        let event = StoredEvent(id: id, createdAt: now, category: category, recipients: recipients.sorted(), data: data,
                                fields: fields, channelRange: channelRange)
        tx.append(event)
    }

    /// A call to the push gateway or the translator (OutgoingCalls/Push.swift, Translation.swift).
    func queueHookCall(_ call: QueuedHookCall) { pendingHookCalls.append(call) }

    func holdPush(_ push: HeldPush) {
        var push = push
        let userId = push.userId
        // Recipients are sorted.
        push.eventId = tx.pendingFanout.last { event in
            let r = event.recipients
            var low = 0, high = r.count
            while low < high {
                let middle = (low + high) / 2
                if r[middle] < userId { low = middle + 1 } else { high = middle }
            }
            return low < r.count && r[low] == userId
        }?.id ?? 0
        heldPushes.append(push)
    }

    func queueWebhook(_ category: WebhookCategory, channelUrl: String?, fields: [(String, JSON?)], now: Int64) {
        let endpoints = shared.webhooks.settings.endpoints(for: category)
        guard !endpoints.isEmpty else { return }
        var body: [(String, JSON?)] = [("category", .string(category.rawValue)), ("ts", .int(now)),
                                       ("channel_url", channelUrl.map { .string($0) }), ("channel_type", channelUrl.map { _ in JSON.string("group") })]
        for (key, value) in fields {
            // A poll event carries its recipients' own votes; a webhook is no recipient.
            if key == "poll", case .object(var poll)? = value {
                poll["voted_option_ids"] = nil
                body.append((key, .object(poll)))
            } else {
                body.append((key, value))
            }
        }
        let text = JSON.obj(body).serialized()
        // One change may emit its stream event once per group of recipients (a poll's
        // voters): those are one call.
        guard queuedHookBodies.insert(text).inserted else { return }
        for endpoint in endpoints {
            pendingHookCalls.append(QueuedHookCall(endpoint: endpoint.url, category: category.rawValue,
                                                   channelUrl: channelUrl ?? "", body: text))
        }
    }
}
