// The queries the services ask for by name (Services/Interfaces.swift), run in the request's
// transaction or snapshot. The SQL is in Storage/.

extension ServerState {
    func userListing(after: String?, ids: Set<String>?, nickname: String?, activeMode: String,
                     metadataKey: String?, metadataValues: [String]?, limit: Int) async throws -> [String] {
        try await ChannelQueries.userListing(after: after, ids: ids, nickname: nickname, activeMode: activeMode,
                                             metadataKey: metadataKey, metadataValues: metadataValues, limit: limit, db)
    }

    func unreadTotals(of userId: String, customTypes: [String]?, superMode: String) async throws -> (messages: Int64, channels: Int64) {
        try await ChannelQueries.unreadTotals(of: userId, customTypes: customTypes, superMode: superMode, db)
    }

    func distinctChannel(members ids: Set<String>, customType: String) async throws -> String? {
        // PostgreSQL: two creations of one distinct channel at once find one channel.
        try await lockForWriters("distinct \(customType) \(ids.sorted().joined(separator: " "))")
        return try await ChannelQueries.distinctChannel(members: ids, customType: customType, db)
    }

    func channelListing(_ scope: ChannelQueries.Scope, filter: Channels.ListFilter, order: String,
                        metadataOrderKey: String?, after: [JSON]?, limit: Int) async throws -> [String] {
        try await ChannelQueries.listing(scope, filter: filter, order: order, metadataOrderKey: metadataOrderKey,
                                         after: after, limit: limit, db)
    }

    func changedChannels(of userId: String, after start: Sync.Start, showEmpty: Bool, showFrozen: Bool,
                         customTypes: [String]?, limit: Int) async throws -> [(url: String, seq: Int64)] {
        try await ChannelQueries.changedChannels(of: userId, after: start, showEmpty: showEmpty, showFrozen: showFrozen,
                                                 customTypes: customTypes, limit: limit, db)
    }

    func endedMemberships(of userId: String, after start: Sync.Start, limit: Int) async throws -> [MembershipTombstoneRecord] {
        try await ChannelQueries.endedMemberships(of: userId, after: start, limit: limit, db)
    }

    func channelURLs(showing userId: String) async throws -> [String] {
        try await ChannelQueries.urls(showing: userId, db)
    }

    func earlierSend(channel: String, sender: String?, requestId: String) async throws -> EarlierSend? {
        try await MessageQueries.earlierSend(db, channel: channel, sender: sender, requestId: requestId)
    }

    func messagePage(_ base: SQLCondition, _ bounds: [KeyBound], descending: Bool, limit: Int) async throws -> [MessageRecord] {
        try await MessageQueries.page(db, base, bounds, descending: descending, limit: limit)
    }

    func messageCount(_ base: SQLCondition, _ bounds: [KeyBound]) async throws -> Int64 {
        try await MessageQueries.count(db, base, bounds)
    }

    func messageChanges(_ base: SQLCondition, after start: Sync.Start, visibleAfter offset: Int64?,
                        limit: Int) async throws -> [MessageRecord] {
        try await MessageQueries.changes(db, base, after: start, visibleAfter: offset, limit: limit)
    }

    func messageTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [MessageTombstoneRecord] {
        try await MessageQueries.tombstones(db, channel: channel, after: start, limit: limit)
    }

    func replies(to parent: Int64) async throws -> [MessageRecord] {
        try await MessageQueries.replies(db, parent: parent)
    }

    func newestMessageTs(_ url: String) async throws -> Int64 {
        try await MessageQueries.newestCreatedAt(db, channel: url)
    }

    func lastCountableMessage(channel url: String) async throws -> MessageRecord? {
        try await MessageQueries.lastCountable(db, channel: url)
    }

    func searchMessages(_ q: MessageSearch) async throws -> [SearchHit] {
        let found = try await SearchQueries.search(q, db)
        let records = try await MessageQueries.messages(db, ids: found.map(\.id))
        // A hit is in the index only while its row is in the same snapshot: none is missing.
        return found.compactMap { hit in records[hit.id].map { SearchHit(message: $0, score: hit.score) } }
    }

    func file(_ id: String) async throws -> FileRecord? {
        try await RecordTables.file(id, db)
    }

    func fileBytes(_ id: String) async throws -> [UInt8]? {
        try await RecordTables.fileBytes(id, db)
    }

    func deleteFile(_ id: String) async throws {
        try await RecordTables.deleteFile(id, db)
    }

    func reports(after: Int64, limit: Int) async throws -> [ReportRecord] {
        try await db.query("SELECT \(RecordTables.reportColumns.joined(separator: ", ")) FROM reports "
                           + "WHERE id > ? ORDER BY id LIMIT \(limit)", [.int(after)]).map(RecordTables.report)
    }

    func hasReports() async throws -> Bool {
        try await db.queryOne("SELECT 1 FROM reports LIMIT 1") != nil
    }

    // MARK: polls

    func save(_ p: PollRecord) async throws {
        try await PollQueries.put(p, db)
    }

    func pollRecord(_ id: Int64) async throws -> PollRecord? {
        try await PollQueries.poll(db, id: id)
    }

    func pollRecords(_ ids: [Int64]) async throws -> [Int64: PollRecord] {
        try await PollQueries.polls(db, ids: ids)
    }

    func touch(_ poll: inout PollRecord, _ now: Int64) {
        poll.changeSeq = nextSeq()
        poll.changedAt = now
    }

    func deletePoll(_ p: PollRecord, at now: Int64) async throws {
        let t = PollTombstoneRecord(pollId: p.id, channelUrl: p.channelUrl, deletedAt: now, seq: nextSeq())
        try await PollQueries.delete(p, tombstone: t, db)
    }

    func purgePolls(of url: String) async throws {
        try await PollQueries.deleteChannelPolls(db, channel: url)
    }

    func pollTallies(_ ids: [Int64]) async throws -> [Int64: PollTally] {
        try await PollQueries.tallies(db, polls: ids)
    }

    func pollVotes(_ ids: [Int64], of userId: String) async throws -> [Int64: [Int64]] {
        try await PollQueries.votes(db, polls: ids, user: userId)
    }

    func pollVotesByUser(_ id: Int64) async throws -> [String: [Int64]] {
        try await PollQueries.votesByUser(db, poll: id)
    }

    func setPollVotes(_ id: Int64, user: String, options: [Int64], at now: Int64) async throws {
        try await PollQueries.setVotes(db, poll: id, user: user, options: options, at: now)
    }

    func pollPage(channel: String, before: Int64?, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord] {
        try await PollQueries.page(db, channel: channel, before: before, visibleAfter: offset, limit: limit)
    }

    func pollChanges(channel: String, after start: Sync.Start, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord] {
        try await PollQueries.changes(db, channel: channel, after: start, visibleAfter: offset, limit: limit)
    }

    func pollTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [PollTombstoneRecord] {
        try await PollQueries.tombstones(db, channel: channel, after: start, limit: limit)
    }

    func pollVoters(_ id: Int64, option: Int64, after: String?, limit: Int) async throws -> [String] {
        try await PollQueries.voters(db, poll: id, option: option, after: after, limit: limit)
    }
}

// The application's settings and the membership counts they limit (Services/Application.swift).
extension ServerState: ApplicationRecords {
    func applicationSettings() async throws -> ApplicationSettings {
        var stored: [String: String] = [:]
        for row in try await db.query("SELECT name, value FROM application_settings", []) { stored[row.text(0)] = row.text(1) }
        return shared.applicationDefaults.overridden(by: stored)
    }

    func storeApplicationSettings(_ values: [String: String?]) async throws {
        for (name, value) in values.sorted(by: { $0.key < $1.key }) {
            if let value {
                try await db.execute(RecordTables.upsertSQL("application_settings", ["name", "value"], key: ["name"]),
                                     [.text(name), .text(value)])
            } else {
                try await db.execute("DELETE FROM application_settings WHERE name = ?", [.text(name)])
            }
        }
    }

    func joinedChannelCount(of userId: String) async throws -> Int {
        // PostgreSQL: two joins of one user at once count each other (the channel limit).
        try await lockForWriters("joins \(userId)")
        return try await ChannelQueries.joinedChannelCount(of: userId, db)
    }

    /// PostgreSQL: a writer that reads something another writer of another channel may change
    /// meanwhile holds a lock named by it from before that read to its commit. Nothing on
    /// SQLite, where writers run one at a time.
    private func lockForWriters(_ name: String) async throws {
        guard shared.positions != nil, !readOnly else { return }
        let db = try db
        (db as? PostgresSession)?.holdLocks(StreamPositions.Locks(names: [name]))
        _ = try await db.query("SELECT 1 FROM pg_advisory_lock(\(StreamPositions.keyLockSpace), hashtext(?))", [.text(name)])
    }
}

// The webhook endpoints and the delivery log (Services/Webhooks.swift).
extension ServerState: WebhookRecords {
    var hookDefaults: HookDefaults { shared.webhooks.defaults }

    /// The endpoints the admin API stored, as stored (nil: none).
    func storedWebhookSettings() async throws -> String? {
        try await db.queryOne("SELECT value FROM application_settings WHERE name = ?", [.text(WebhookSettings.storedName)])?.text(0)
    }

    func webhookSettings() async throws -> WebhookSettings {
        shared.webhooks.resolved(stored: try await storedWebhookSettings())
    }

    func storeWebhookSettings(_ settings: WebhookSettings?) async throws {
        let text = settings.map { JSON.obj([("endpoints", .array($0.endpoints.map(\.json)))]).serialized() }
        try await storeApplicationSettings([WebhookSettings.storedName: text])
        // In force on this server from its next request; the others read it within a second.
        shared.webhooks.update(settings ?? shared.webhooks.defaults.settings)
    }

    func hookDeliveries(status: String?, before: Int64?, limit: Int) async throws -> [HookDeliveryRecord] {
        try await HookQueue.log(status: status, before: before, limit: limit, db)
    }
}
