import Foundation

func nowMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

func randomHex(_ bytes: Int) -> String {
    var g = SystemRandomNumberGenerator()
    var out = ""
    for _ in 0..<bytes {
        let b = UInt8.random(in: 0...255, using: &g)
        out += String(b >> 4, radix: 16) + String(b & 15, radix: 16)
    }
    return out
}

/// One request: its transaction, the channels and users it loaded, what it changed, and the
/// events it emitted. A write request runs in one write transaction: messages and the other
/// queried records are written as the handler goes, the changes of the loaded channels and
/// users (`pending`) at its end, and it commits before the response is sent. A read request
/// (a GET) runs in a read transaction, beside the writer.
///
/// After its commit a request is handed to the event hub, which renders its events from the
/// channels and users it loaded, as they stood at the commit. Between requests only
/// `shared.cache` keeps records (RecordCache.swift: bounded, and checked against the
/// database before each use).
final class ServerState {
    let shared: SharedState
    let readOnly: Bool
    var database: any SQLDatabase { shared.database }
    var cache: RecordCache { shared.cache }
    var verify: Bool { shared.verify }
    var publicBaseURL: String { shared.publicBaseURL }
    var uploadLimit: Int { shared.uploadLimit }
    /// The transaction of the request.
    private var transaction: (any SQLSession)?
    var db: any SQLSession {
        get throws {
            guard let transaction else { throw APIError.internal("no transaction open") }
            return transaction
        }
    }
    /// A SQLite writer's copy of the counters, which become the committed ones if it commits
    /// (the ones the previous writer committed). PostgreSQL writers number from sequences.
    private(set) var counters = Counters()
    /// The sequence as a SQLite writer began: the numbers it took are the ones after it.
    private var seqAtStart: Int64 = 0
    /// The message ids this request took.
    private var takenMessageIds: Set<Int64> = []
    /// Every sequence number up to here was resolved when the request began (read before its
    /// snapshot, so everything it covers is in the snapshot).
    private var resolvedAtStart: Int64 = 0
    /// A read request took a sequence number (which only writers may do).
    private var allocatedWhileReading = false

    /// The users this request loaded (`loadUsers`) or changed, by id.
    private(set) var loadedUsers: [String: UserRecord] = [:]
    /// Ids looked up this request that name no user.
    private var absentUsers: Set<String> = []
    /// The channels this request loaded (`loadChannels`), with their members, by URL.
    private(set) var loadedChannels: [String: ChannelRecord] = [:]
    private var absentChannels: Set<String> = []
    /// The last message of each loaded channel that has one, by channel URL.
    var lastMessages: [String: MessageRecord] = [:]
    /// What this request read from the database whole, for `cache` once the request ends well.
    private var readChannels: [CachedChannel] = []
    private var readUsers: [CachedUser] = []
    /// `counters.usersWritten` as the attempt began (a writer's; -1 for a reader).
    private var usersWrittenAtStart: Int64 = -1
    /// A reader that read `users_written` in its snapshot (`committedEvents`): the users it
    /// reads are as of that value, so its cached users current at it need no version check.
    private var usersWrittenInSnapshot: Int64? = nil
    /// Channels this request knows changed since their cached copy: loaded without
    /// checking the copy's version first.
    private var channelsKnownChanged: Set<String> = []
    /// A PostgreSQL writer: the channels it holds the locks of, with their versions (and
    /// their last messages' change numbers) as read once held; absent: no such channel.
    private var lockedChannels: [String: (version: Int64, lastMessageSeq: Int64)?] = [:]
    /// A PostgreSQL writer: event numbers taken and not used yet, in order, and every number
    /// taken (`StreamPositions`).
    private var freshNumbers: ArraySlice<Int64> = []
    private var takenNumbers: [ClosedRange<Int64>] = []
    /// Numbers asked for once `freshNumbers` ran out: the attempt runs again, taking more.
    private var numbersShort = 0
    /// How many numbers each lock of channels takes (raised for an attempt run again).
    private var numbersPerLock = 8
    /// A PostgreSQL writer: the versions of the users it loaded (nil: absent), checked under
    /// their locks before it writes them.
    private var loadedUserVersions: [String: Int64?] = [:]
    /// A PostgreSQL writer: versions of users read with its first statement (for the users
    /// the cached copy of its channel shows), and a message id it took there.
    private var knownUserVersions: [String: Int64] = [:]
    private var prefetchedMessageId: Int64? = nil
    /// A render asked for a user no request loaded (a missing `loadUsers`): with verification
    /// on, the request fails instead of showing an empty profile.
    var renderedUnloadedUser: String? = nil

    var pending = StorageBatch()
    private(set) var pendingFanout: [StoredEvent] = []
    /// Webhook calls this request queues, stored with its changes (Operations/HookDeliveries.swift).
    private var pendingHookCalls: [QueuedHookCall] = []
    /// The bodies of the webhook calls queued.
    private var queuedHookBodies: Set<String> = []

    /// Channels whose members' unread counters are checked against a count of the messages
    /// at the end of the request (PARLEY_VERIFY_COUNTERS=1, set by the test scripts).
    private var touchedChannels: Set<String> = []
    /// The messages this request stored, by id.
    private var savedThisRequest: [Int64: MessageRecord] = [:]

    init(shared: SharedState, readOnly: Bool) {
        self.shared = shared
        self.readOnly = readOnly
    }

    /// Forgets what an attempt loaded and changed (a backend may run a transaction again).
    private func startAttempt() {
        // Only the writer reads the committed counters: it alone changes them.
        counters = readOnly ? Counters() : shared.committed
        seqAtStart = counters.seq
        takenMessageIds = []
        resolvedAtStart = shared.hub.resolvedThrough
        allocatedWhileReading = false
        loadedChannels = [:]
        absentChannels = []
        loadedUsers = [:]
        absentUsers = []
        lastMessages = [:]
        readChannels = []
        readUsers = []
        usersWrittenAtStart = readOnly ? -1 : counters.usersWritten
        usersWrittenInSnapshot = nil
        channelsKnownChanged = []
        lockedChannels = [:]
        freshNumbers = []
        takenNumbers = []
        numbersShort = 0
        loadedUserVersions = [:]
        knownUserVersions = [:]
        prefetchedMessageId = nil
        renderedUnloadedUser = nil
        savedThisRequest = [:]
        touchedChannels = []
        pending = StorageBatch()
        pendingFanout = []
        pendingHookCalls = []
        queuedHookBodies = []
    }

    /// Runs `body` as a write request in one write transaction, which commits the request's
    /// changes (`pending`) with what it wrote directly. The caller holds `Service`'s lock; on
    /// return the committed counters are this request's.
    ///
    /// `group`: the request joins the group transaction of a database that groups commits
    /// (Service.swift); its changes are then durable, and kept in the cache, only once the
    /// group commits (`groupCommitted`).
    ///
    /// `channelHint`: the channel the request names, if any. On PostgreSQL the writer's first
    /// statement locks it and reads its version, which spares the check of a cached copy a
    /// round trip (`lockChannels`, `loadChannels`).
    /// `sendsMessage`: the request most likely stores one new message (its id is taken with
    /// the first statement on PostgreSQL).
    ///
    /// `batch`: on PostgreSQL, the request joins the open transaction of an earlier writer of
    /// its channel (Requests/ChannelBatch.swift); its changes are then kept in the cache only
    /// once the batch commits (`groupCommitted`). `batchLead`: the request may open such a
    /// batch for the writers queued behind it.
    func handleWriting<T>(group: (any GroupCommitting)? = nil, batch: ChannelBatch? = nil, batchLead: ChannelBatchLead? = nil,
                          channelHint: String? = nil, sendsMessage: Bool = false,
                          _ body: (ServerState) async throws -> T) async throws -> T {
        var bodyDone = false
        do {
            func attempt(_ tx: any SQLSession) async throws -> (T, RecordTables.WrittenVersions) {
                // Run again after its batch was handed on: the others ran in the transaction lost.
                try batchLead?.checkNotHandedOn()
                startAttempt()
                bodyDone = false
                transaction = tx
                defer { transaction = nil }
                if let positions = shared.positions {
                    try await lockBeforeNumbers(positions, batch: batch, channelHint: channelHint, sendsMessage: sendsMessage, tx)
                }
                let result = try await body(self)
                bodyDone = true
                try checkRendering()
                if verify { try await verifyUnreadCounters(touchedChannels) }
                if numbersShort > 0 {
                    numbersPerLock += numbersShort + 8
                    throw StorageError("a write needed more event numbers than it took; it runs again taking more",
                                       kind: .retryable)
                }
                if shared.positions != nil { try await checkWrittenUsers(tx) }
                if !pendingHookCalls.isEmpty { try await HookQueue.insert(pendingHookCalls, now: nowMillis(), tx) }
                // Pruned first, so that the boundary and the log's size go out with the other
                // counters; unless the request adds more events than the log retains (a tiny
                // retention), which must then prune some of its own.
                // (PostgreSQL prunes the log apart: `Service.pruneLog`.)
                let added = pending.events.count
                let prunesFirst = added <= shared.retention || shared.positions != nil
                if prunesFirst { try await pruneEvents(adding: added, tx) }
                // A writer whose transaction others continue does not end it here, and reads
                // for the next one when it knows one follows.
                let continued = batch != nil || batchLead?.othersWaiting() == true
                let followed = batch?.nextMemberCertain ?? continued
                let prefetch = followed ? channelHint.flatMap { loadedChannels[$0] }.map {
                    ChannelBatch.Prefetched.expression(numbers: numbersPerLock, users: usersShown(by: $0).sorted())
                } : nil
                let written = try await RecordTables.write(pending, last: prunesFirst && !continued, selecting: prefetch, tx)
                if prefetch != nil {
                    let read = ChannelBatch.Prefetched(written.selected)
                    if let batch { batch.prefetched = read } else { batchLead?.prefetched = read }
                    if let highest = read?.numbers.last { shared.order.saw(highest) }
                }
                if !prunesFirst {
                    let prunedBefore = counters.prunedThrough
                    try await pruneEvents(adding: added, tx)
                    if counters.prunedThrough != prunedBefore {
                        try await RecordTables.putCounter("pruned_through", counters.prunedThrough, tx)
                    }
                }
                if continued, batch == nil, let batchLead, let session = tx as? PostgresSession {
                    try await batchLead.handOn(session, channels: writtenChannelEntries(written))
                }
                return (result, written)
            }
            let (result, written) = if let group { try await group.writeInGroup(attempt) } else if let batch {
                try await batch.run(attempt)
            } else {
                try await database.writeBeginningLate(attempt)
            }
            if shared.positions == nil { shared.committed = counters }
            if group == nil, batch == nil { keepInCache(written) } else { writtenAwaitingCommit = written }
            return result
        } catch {
            if let storage = error as? StorageError, storage.kind == .unavailable { throw error }
            if bodyDone, !(error is APIError) { throw APIError.internal("storage commit failed: \(error)") }
            throw error
        }
    }

    /// PostgreSQL, before any number: the channel the request names locked, then the busy
    /// lock; or, in a batch that holds the channel locked, what the member before read for it.
    private func lockBeforeNumbers(_ positions: StreamPositions, batch: ChannelBatch?, channelHint: String?,
                                   sendsMessage: Bool, _ tx: any SQLSession) async throws {
        if let batch, let hint = channelHint, let entry = groupChannels?.entry(hint), let prefetched = batch.prefetched {
            batch.prefetched = nil
            usePrefetched(prefetched, channel: entry, sendsMessage: sendsMessage)
            return
        }
        let shown = channelHint.flatMap { cache.channel($0) }.map { usersShown(by: $0) } ?? []
        try await lockChannels(channelHint.map { [$0] } ?? [], busyKey: positions.busyKey,
                               messageIds: sendsMessage ? 1 : 0, users: shown.sorted(), tx)
    }

    /// Runs `body` as a read request (a GET) in a read transaction, which on SQLite does not
    /// queue behind the writer's connection and on PostgreSQL is READ ONLY. Returns false
    /// instead of a result when the request changed something (a first login): it must then
    /// run again as a write request.
    ///
    /// `statementByStatement`: each statement in a snapshot of its own
    /// (`SQLDatabase.readStatementByStatement`).
    func handleReading<T>(statementByStatement: Bool = false, _ body: (ServerState) async throws -> T) async throws -> T? {
        func run(_ tx: any SQLSession) async throws -> T {
            startAttempt()
            transaction = tx
            defer { transaction = nil }
            let result = try await body(self)
            try checkRendering()
            return result
        }
        let result = statementByStatement ? try await database.readStatementByStatement(run) : try await database.read(run)
        if !pending.isEmpty || !pendingFanout.isEmpty || !pendingHookCalls.isEmpty || allocatedWhileReading { return nil }
        keepInCache(RecordTables.WrittenVersions())
        return result
    }

    /// What a request of a commit group wrote, kept in the cache once the group commits.
    private var writtenAwaitingCommit = RecordTables.WrittenVersions()

    /// The group or batch this request joined has committed.
    func groupCommitted() { keepInCache(writtenAwaitingCommit) }

    /// A writer of a SQLite commit group or of a PostgreSQL channel batch: the channels the
    /// earlier members wrote, as they left them. Newer than the record cache, which takes them
    /// only once the group commits, and committed with this request or not at all: so a
    /// member writing the channel the one before it wrote finds it current instead of reading
    /// it again.
    var groupChannels: GroupChannels? = nil

    /// The channels this request wrote, as the record cache keeps them (nil: deleted, or
    /// not loaded whole), under the versions `written` gives them.
    private func writtenChannelEntries(_ written: RecordTables.WrittenVersions) -> [(url: String, entry: CachedChannel?)] {
        pending.channels.map { url, channel in
            guard channel != nil, let version = written.channels[url], let full = loadedChannels[url] else { return (url, nil) }
            let last = lastMessages[url]
            return (url, CachedChannel(version: version, channel: full, lastMessage: last, lastMessageSeq: last?.changeSeq ?? -1))
        }
    }

    /// What this member of a commit group wrote, for the members after it (`groupChannels`).
    var channelsWrittenInGroup: [(url: String, entry: CachedChannel?)] { writtenChannelEntries(writtenAwaitingCommit) }

    /// What the hub needs to deliver this committed request's events.
    var committedChanges: CommittedChanges {
        let taken = shared.positions != nil ? takenNumbers : counters.seq > seqAtStart ? [(seqAtStart + 1)...counters.seq] : []
        return CommittedChanges(events: pendingFanout, taken: taken, renderer: self)
    }

    /// After a commit (or a read): keeps what the request read whole, then what it wrote,
    /// under the versions its writes returned.
    private func keepInCache(_ written: RecordTables.WrittenVersions) {
        for entry in readChannels { cache.store(entry) }
        // What a writer read is current at the counter it committed (a reader cannot know),
        // unless the writer then changed it: that one is stored below as written. Stored
        // here first, it would be seen, stamped current, by a writer running meanwhile.
        let usersCurrentAt = readOnly ? usersWrittenInSnapshot ?? -1 : counters.usersWritten
        for var entry in readUsers where pending.users[entry.user.userId] == nil {
            entry.currentAt = usersCurrentAt
            cache.store(entry)
        }
        for (url, entry) in writtenChannelEntries(written) {
            if let entry { cache.store(entry, written: true) } else { cache.forgetChannel(url) }
        }
        for (id, user) in pending.users {
            guard let user, let version = written.users[id] else {
                cache.forgetUser(id)
                continue
            }
            cache.store(CachedUser(version: version, user: user, currentAt: usersCurrentAt), written: true)
        }
        readChannels = []
        readUsers = []
    }

    private func checkRendering() throws {
        if verify, let id = renderedUnloadedUser {
            throw APIError.internal("rendered user \"\(id)\" without loading it (a missing loadUsers)")
        }
    }

    /// A changelog's "now": every change up to here is in what this request reads (the
    /// changelogs list nothing past it). A writer on SQLite, the only one running, knows the
    /// exact number. Otherwise the hub's watermark as the request began, read before its
    /// snapshot: every number up to it was committed (or never will be) by then, by a writer
    /// of a commit group on SQLite or by any server on PostgreSQL.
    func currentSeq() async throws -> Int64 {
        if !readOnly, shared.positions == nil { return counters.seq }
        return resolvedAtStart
    }

    func isOnline(_ userId: String) -> Bool { shared.isOnline(userId) }

    // MARK: loading

    /// Loads the users of `ids` not loaded yet this request.
    func loadUsers<S: Sequence>(_ ids: S) async throws where S.Element == String {
        var missing = Set(ids).filter { loadedUsers[$0] == nil && !absentUsers.contains($0) }
        if missing.isEmpty { return }
        var unchecked: [CachedUser] = []
        // A writer that has written no user yet sees users as committed at its start. On
        // PostgreSQL writers of other channels change users meanwhile: every copy is checked.
        let unchangedSince: Int64? = shared.positions != nil ? nil : readOnly ? usersWrittenInSnapshot
            : counters.usersWritten != usersWrittenAtStart ? nil : usersWrittenAtStart
        for entry in missing.compactMap({ cache.user($0) }) {
            if let unchangedSince, entry.currentAt == unchangedSince {
                loadedUsers[entry.user.userId] = entry.user
                missing.remove(entry.user.userId)
            } else {
                unchecked.append(entry)
            }
        }
        if !unchecked.isEmpty {
            // Read with a PostgreSQL writer's first statement, if all of them were.
            let known = unchecked.compactMap { entry in knownUserVersions[entry.user.userId].map { (entry.user.userId, $0) } }
            let versions = known.count == unchecked.count ? Dictionary(uniqueKeysWithValues: known)
                : try await ChannelQueries.versions(ofUsers: unchecked.map(\.user.userId), db)
            for entry in unchecked {
                // A stale entry goes, so that the fresh read below replaces it (a channel or
                // user made again can have a lower version than the one it replaced).
                guard versions[entry.user.userId] == entry.version else { cache.forgetUser(entry.user.userId); continue }
                loadedUsers[entry.user.userId] = entry.user
                loadedUserVersions[entry.user.userId] = entry.version
                missing.remove(entry.user.userId)
                // Checked in this transaction: kept as current at the counter it commits, or
                // (a reader that read it) at the counter of its snapshot.
                if !readOnly || usersWrittenInSnapshot != nil { readUsers.append(entry) }
            }
        }
        if missing.isEmpty { return }
        for entry in try await ChannelQueries.users(Array(missing), db) {
            loadedUsers[entry.user.userId] = entry.user
            loadedUserVersions[entry.user.userId] = entry.version
            readUsers.append(entry)
        }
        for id in missing where loadedUsers[id] == nil {
            absentUsers.insert(id)
            if loadedUserVersions[id] == nil { loadedUserVersions[id] = .some(nil) }
        }
    }

    func user(_ id: String) async throws -> UserRecord {
        guard let u = try await userIfExists(id) else { throw APIError.notFound("User \"\(id)\"") }
        return u
    }

    func userIfExists(_ id: String) async throws -> UserRecord? {
        try await loadUsers([id])
        return loadedUsers[id]
    }

    /// A user loaded this request (nil when they do not exist). Renders use it.
    func loadedUser(_ id: String) -> UserRecord? {
        if let u = loadedUsers[id] { return u }
        if !absentUsers.contains(id) && renderedUnloadedUser == nil { renderedUnloadedUser = id }
        return nil
    }

    /// Loads the channels of `urls` not loaded yet this request, with their last messages and
    /// every user their renders show.
    func loadChannels(_ urls: [String]) async throws {
        var missing = Set(urls).filter { loadedChannels[$0] == nil && !absentChannels.contains($0) }
        if missing.isEmpty { return }
        let requested = missing
        var found: [CachedChannel] = []
        let cached = missing.compactMap { url in
            channelsKnownChanged.contains(url) ? nil : groupChannels?.entry(url) ?? cache.channel(url)
        }
        if shared.positions != nil, !readOnly {
            // A writer holds the lock of every channel it loads, from before it reads it.
            let unlocked = missing.filter { lockedChannels[$0] == nil }.sorted()
            if !unlocked.isEmpty { try await lockChannels(unlocked, busyKey: 0, db) }
        }
        if !cached.isEmpty {
            var versions: [String: (version: Int64, lastMessageSeq: Int64)] = [:]
            var unknown = cached.map(\.channel.url)
            // Read as its lock was taken: unchanged since, as this request has not loaded it
            // yet, so it has not written it either.
            unknown.removeAll { url in
                guard let locked = lockedChannels[url] else { return false }
                if let locked { versions[url] = locked }
                return true
            }
            if !unknown.isEmpty {
                versions.merge(try await ChannelQueries.versions(ofChannels: unknown, db)) { _, read in read }
            }
            for entry in cached {
                guard let stored = versions[entry.channel.url], stored.version == entry.version,
                      stored.lastMessageSeq == entry.lastMessageSeq else { cache.forgetChannel(entry.channel.url); continue }
                found.append(entry)
                missing.remove(entry.channel.url)
            }
        }
        if !missing.isEmpty {
            ServerMetrics.shared.loaded(channels: missing.count)
            let read = try await ChannelQueries.channels(Array(missing), db)
            readChannels.append(contentsOf: read)
            found.append(contentsOf: read)
        }
        try await take(found, requested: requested)
    }

    /// Makes `found` this request's copies of its channels, and notes the channels of
    /// `requested` it lacks as absent; loads the users they show.
    private func take(_ found: [CachedChannel], requested: Set<String>) async throws {
        var shown = Set<String>()
        for entry in found {
            loadedChannels[entry.channel.url] = entry.channel
            if let last = entry.lastMessage { lastMessages[entry.channel.url] = last }
            shown.formUnion(usersShown(by: entry.channel))
        }
        for url in requested where loadedChannels[url] == nil { absentChannels.insert(url) }
        try await loadUsers(shown)
    }

    /// Everyone a render of the channel names: members, operators, banned and muted users,
    /// creator, inviters, and the sender and mentions of its last message.
    func usersShown(by c: ChannelRecord) -> Set<String> {
        var ids = Set(c.members.keys)
        ids.formUnion(c.operatorIds)
        ids.formUnion(c.bans.keys)
        ids.formUnion(c.mutes.keys)
        if let creator = c.createdBy { ids.insert(creator) }
        for m in c.members.values { if let inviter = m.inviterId { ids.insert(inviter) } }
        if let last = lastMessages[c.url] {
            if let sender = last.senderId { ids.insert(sender) }
            ids.formUnion(last.mentionedUserIds)
        }
        return ids
    }

    /// The same for a cached copy (with its last message).
    private func usersShown(by entry: CachedChannel) -> Set<String> {
        var ids = usersShown(by: entry.channel)
        if let last = entry.lastMessage {
            if let sender = last.senderId { ids.insert(sender) }
            ids.formUnion(last.mentionedUserIds)
        }
        return ids
    }

    func channel(_ url: String) async throws -> ChannelRecord {
        guard let c = try await channelIfExists(url) else { throw APIError.notFound("Channel \"\(url)\"") }
        return c
    }

    /// A channel loaded this request, as it stands after the request's changes.
    func loadedChannel(_ url: String) -> ChannelRecord? { loadedChannels[url] }

    func channelIfExists(_ url: String) async throws -> ChannelRecord? {
        try await loadChannels([url])
        return loadedChannels[url]
    }

    /// The channels the user is a member of (joined or invited), loaded, in URL order.
    func memberChannels(of userId: String) async throws -> [ChannelRecord] {
        let urls = try await ChannelQueries.urls(memberOf: userId, db)
        try await loadChannels(urls)
        return urls.compactMap { loadedChannels[$0] }
    }

    // MARK: write-through

    func save(_ u: UserRecord) {
        loadedUsers[u.userId] = u
        absentUsers.remove(u.userId)
        pending.users[u.userId] = u
        noteUserWritten()
    }

    /// Moves `users_written` once per transaction that writes users (RecordCache.swift).
    private func noteUserWritten() {
        guard shared.positions == nil, counters.usersWritten == usersWrittenAtStart else { return }
        counters.usersWritten += 1
        pending.counters["users_written"] = counters.usersWritten
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
        let event = StoredEvent(id: nextSeq(), createdAt: now, category: StoredEvent.endStreamsCategory,
                                recipients: [userId], data: JSON.object(fields).serialized(), fields: fields)
        pending.events.append(event)
        pendingFanout.append(event)
    }

    func deleteUser(_ id: String) {
        loadedUsers.removeValue(forKey: id)
        absentUsers.insert(id)
        pending.users[id] = .some(nil)
        noteUserWritten()
    }
    func save(_ s: SessionRecord) async throws {
        try await RecordTables.putSession(s, db)
    }

    /// A session by its key: one primary-key read per request (sessions are not kept in memory).
    func session(_ token: String) async throws -> SessionRecord? {
        try await db.queryOne(RecordTables.sessionSQL, [.text(token)])
            .map { SessionRecord(token: $0.text(0), userId: $0.text(1), expiresAt: $0.int(2), createdAt: $0.int(3)) }
    }

    func deleteSessions(of userId: String) async throws {
        try await db.execute("DELETE FROM sessions WHERE user_id = ?", [.text(userId)])
    }
    /// Writes the channel record (without its members) and the member records that differ
    /// from the channel's previous state in memory, which is what storage holds once the
    /// pending batch is committed: a change to one member writes one member record.
    func save(_ c: ChannelRecord) async throws {
        var c = c
        let previous = loadedChannels[c.url]?.members ?? [:]
        if c.lastMessageId == 0 {
            lastMessages.removeValue(forKey: c.url)
        } else if lastMessages[c.url]?.id != c.lastMessageId {
            // Usually the message this request just stored (a send): no need to read it back.
            if let stored = savedThisRequest[c.lastMessageId] {
                lastMessages[c.url] = stored
            } else {
                lastMessages[c.url] = try await MessageQueries.message(db, id: c.lastMessageId)
            }
            if let last = lastMessages[c.url] { try await loadUsers([last.senderId].compactMap { $0 } + last.mentionedUserIds) }
        }
        // A member whose start of unread messages moved (read, history reset, joined) is
        // counted again; the counters of the others moved with each message (UnreadCounters.swift).
        let newestCountableAt: Int64? = c.lastMessageId == 0 ? 0 : lastMessages[c.url]?.createdAt
        for (id, m) in c.members where m.state == "joined" {
            let before = previous[id]
            if before?.state != "joined" || before?.readTs != m.readTs || before?.tsMessageOffset != m.tsMessageOffset {
                try await recountUnread(&c, id, newestCountableAt: newestCountableAt)
            }
        }
        // Parts changed since the last commit: the union over this request's saves.
        let changedParts: ChannelParts = loadedChannels[c.url].map { ChannelParts.changed(from: $0, to: c) } ?? .all
        pending.channelParts[c.url] = (pending.channels[c.url] != nil ? pending.channelParts[c.url] ?? .all : [])
            .union(changedParts)
        loadedChannels[c.url] = c
        absentChannels.remove(c.url)
        var record = c
        record.members = [:]
        pending.channels[c.url] = record
        saveMembers(of: c.url, from: previous, to: c.members)
        touchedChannels.insert(c.url)
        pending.lastMessageAt[c.url] = lastMessages[c.url]?.createdAt ?? 0
    }

    /// Puts the member records whose member changed or joined between two states of a
    /// channel's members, and removes those of members who left.
    private func saveMembers(of url: String, from previous: [String: MemberRecord], to current: [String: MemberRecord]) {
        // A dictionary copied to change values keeps its layout: walked side by side, both
        // list the same keys in the same order, and only values need comparing (no key is
        // hashed). Any other difference (a member added or removed) takes the lookups below.
        if previous.count == current.count {
            var changed: [(String, MemberRecord)] = []
            var aligned = true
            for (old, new) in zip(previous, current) {
                guard old.key == new.key else { aligned = false; break }
                if old.value != new.value { changed.append((new.key, new.value)) }
            }
            if aligned {
                for (id, m) in changed { pending.members[MemberKey(channelUrl: url, userId: id)] = m }
                return
            }
        }
        for (id, m) in current where previous[id] != m { pending.members[MemberKey(channelUrl: url, userId: id)] = m }
        for id in previous.keys where current[id] == nil { pending.members[MemberKey(channelUrl: url, userId: id)] = .some(nil) }
    }

    func setTyping(_ userId: String, in url: String, since: Int64?) {
        pending.typing[MemberKey(channelUrl: url, userId: userId)] = .some(since)
    }

    func typers(in url: String, now: Int64) async throws -> [String] {
        var since: [String: Int64?] = [:]
        for row in try await db.query("SELECT user_id, since FROM typing WHERE channel_url = ?", [.text(url)]) {
            since[row.text(0)] = row.int(1)
        }
        for (key, value) in pending.typing where key.channelUrl == url { since[key.userId] = value }
        var typers: [String] = []
        for (userId, started) in since {
            guard let started else { continue }
            if now - started < 10_000 { typers.append(userId) } else { setTyping(userId, in: url, since: nil) }
        }
        return typers.sorted()
    }

    func deleteChannelRecord(_ url: String) {
        for key in pending.typing.keys where key.channelUrl == url { pending.typing.removeValue(forKey: key) }
        let members = loadedChannels.removeValue(forKey: url)?.members ?? [:]
        absentChannels.insert(url)
        lastMessages.removeValue(forKey: url)
        touchedChannels.remove(url)
        pending.channels[url] = .some(nil)
        for id in members.keys { pending.members[MemberKey(channelUrl: url, userId: id)] = .some(nil) }
    }
    func store(_ f: FileRecord, bytes: [UInt8]) async throws {
        try await RecordTables.putFile(f, bytes: bytes, db)
    }
    func save(_ r: ReportRecord) async throws {
        try await RecordTables.putReport(r, db)
    }

    func save(_ m: MessageRecord) async throws {
        touchedChannels.insert(m.channelUrl)
        // An id this request took was not stored before it.
        let isNew = takenMessageIds.contains(m.id) && savedThisRequest[m.id] == nil
        try await RecordTables.putMessage(m, isNew: isNew, db)
        savedThisRequest[m.id] = m
        if lastMessages[m.channelUrl]?.id == m.id { lastMessages[m.channelUrl] = m }
    }

    func messageRecord(_ id: Int64) async throws -> MessageRecord? {
        try await MessageQueries.message(db, id: id)
    }

    func deleteMessage(_ m: MessageRecord, at now: Int64) async throws {
        touchedChannels.insert(m.channelUrl)
        try await RecordTables.deleteMessage(m.id, db)
        let t = MessageTombstoneRecord(messageId: m.id, channelUrl: m.channelUrl, deletedAt: now, seq: nextSeq(),
                                       senderId: m.senderId ?? "", reqId: m.reqId)
        try await RecordTables.putMessageTombstone(t, db)
    }

    /// Drops a deleted channel's messages without tombstones (the channel tombstone covers them).
    func purgeMessages(of url: String) async throws {
        try await MessageQueries.deleteChannelMessages(db, channel: url)
    }

    func addMembershipTombstone(user: String, channel: String, at now: Int64) {
        let t = MembershipTombstoneRecord(userId: user, channelUrl: channel, at: now, seq: nextSeq())
        pending.membershipTombstones[MembershipKey(userId: user, channelUrl: channel)] = t
    }

    // MARK: sequences

    // Only writers take numbers: on SQLite one writer at a time, each from the counters the
    // previous one committed; on PostgreSQL from sequences, after the locks of the channels
    // the numbers change (StreamPositions.swift). A read request that takes one fails
    // (`handleReading`).

    func nextSeq() -> Int64 {
        if readOnly { allocatedWhileReading = true }
        if shared.positions != nil {
            if let number = freshNumbers.popFirst() { return number }
            // Ran out: the attempt fails at its end and runs again taking more
            // (`handleWriting`). A number no row keeps until then.
            numbersShort += 1
            return -Int64(numbersShort)
        }
        counters.seq += 1
        pending.counters["seq"] = counters.seq
        return counters.seq
    }

    /// PostgreSQL: takes the locks of `urls` (in the order given) and, the first time, the
    /// server's busy lock, then a new batch of event numbers: every change this request makes
    /// from now on is numbered after every writer that held one of these locks before it.
    private func lockChannels(_ urls: [String], busyKey: Int64, messageIds: Int = 0, users: [String] = [],
                              _ db: any SQLSession) async throws {
        // Noted before it is sent: a failure gives up whatever it took.
        (db as? PostgresSession)?.holdLocks(StreamPositions.Locks(busyKey: busyKey, channels: Set(urls)))
        let rows: [SQLRow]
        do {
            rows = try await db.query("SELECT kind, name, a, b FROM parley_lock_channels(?, ?, ?, ?, ?, ?)",
                                      [.int(busyKey), .text(shared.positions?.node ?? ""),
                                       .text(JSON.array(urls.map { .string($0) }).serialized()),
                                       .int(Int64(numbersPerLock)), .int(Int64(messageIds)),
                                       .text(JSON.array(users.map { .string($0) }).serialized())])
        } catch let error as StorageError where error.description.contains("error \(StreamPositions.missingRowState)") {
            // Taken for gone while frozen (StreamPositions.definitionsWithOwnRow): no number
            // was taken; the row is published again before the attempt runs again.
            _ = try await shared.positions?.register(shared.database)
            throw StorageError("this server's stream position was published again; the write runs again", kind: .retryable)
        }
        for url in urls { lockedChannels[url] = .some(nil) }
        var numbers: [Int64] = []
        for row in rows {
            switch row.text(0) {
            case "c": lockedChannels[row.text(1)] = (row.int(2), row.int(3))
            case "e": numbers.append(row.int(2))
            case "m": prefetchedMessageId = row.int(2)
            default: knownUserVersions[row.text(1)] = row.int(2)
            }
        }
        numbers.sort()
        takeNumbers(numbers)
        if let highest = numbers.last { shared.order.saw(highest) }
    }

    /// Event numbers taken for this request (sorted): the next ones it uses, and noted as its own.
    private func takeNumbers(_ numbers: [Int64]) {
        freshNumbers = numbers[...]
        for number in numbers {
            if let last = takenNumbers.last, last.upperBound + 1 == number {
                takenNumbers[takenNumbers.count - 1] = last.lowerBound...number
            } else {
                takenNumbers.append(number...number)
            }
        }
    }

    /// PostgreSQL: a member of a channel batch starts from what the member before it read for
    /// it (Requests/ChannelBatch.swift) instead of its own first statement: the batch holds the
    /// channel's lock, and `channel` is the channel as that member left it.
    private func usePrefetched(_ prefetched: ChannelBatch.Prefetched, channel: CachedChannel, sendsMessage: Bool) {
        lockedChannels[channel.channel.url] = (channel.version, channel.lastMessageSeq)
        takeNumbers(prefetched.numbers)
        if sendsMessage { prefetchedMessageId = prefetched.messageId }
        knownUserVersions = prefetched.userVersions
    }

    /// PostgreSQL: the users this request changes, locked, must still be as it loaded them
    /// (writers of other channels change users too); otherwise the attempt runs again.
    private func checkWrittenUsers(_ db: any SQLSession) async throws {
        let ids = pending.users.keys.sorted()
        guard !ids.isEmpty else { return }
        var current: [String: Int64] = [:]
        (db as? PostgresSession)?.holdLocks(StreamPositions.Locks(users: Set(ids)))
        for row in try await db.query("SELECT user_id, version FROM parley_lock_users(?)",
                                      [.text(JSON.array(ids.map { .string($0) }).serialized())]) {
            current[row.text(0)] = row.int(1)
        }
        for id in ids {
            let loaded: Int64? = loadedUserVersions[id] ?? nil
            if current[id] != loaded {
                throw StorageError("user \"\(id)\" changed since this write loaded it; it runs again", kind: .retryable)
            }
        }
    }

    /// A new message's id and creation time, taken together: creation times never go
    /// backwards (server-wide on SQLite, in the channel on PostgreSQL, whose lock the writer
    /// holds), so id order is time order.
    func takeMessageNumbers(in channel: String, at now: Int64) async throws -> (id: Int64, createdAt: Int64) {
        if readOnly { allocatedWhileReading = true }
        if shared.positions != nil {
            let id: Int64
            if let prefetched = prefetchedMessageId { id = prefetched } else { id = try await StreamPositions.next("parley_message_ids", db) }
            prefetchedMessageId = nil
            takenMessageIds.insert(id)
            return (id, max(now, lastMessageTs(in: channel)))
        }
        counters.lastMessageTs = max(counters.lastMessageTs, now)
        let numbers = (id: counters.nextMessageId, createdAt: counters.lastMessageTs)
        counters.nextMessageId += 1
        pending.counters["next_message_id"] = counters.nextMessageId
        pending.counters["last_message_ts"] = counters.lastMessageTs
        takenMessageIds.insert(numbers.id)
        return numbers
    }

    func allocateReportId() async throws -> Int64 {
        if readOnly { allocatedWhileReading = true }
        if shared.positions != nil { return try await StreamPositions.next("parley_report_ids", db) }
        let id = counters.nextReportId
        counters.nextReportId += 1
        pending.counters["next_report_id"] = counters.nextReportId
        return id
    }

    func allocatePollId() async throws -> Int64 {
        if readOnly { allocatedWhileReading = true }
        if shared.positions != nil { return try await StreamPositions.next("parley_poll_ids", db) }
        let id = counters.nextPollId
        counters.nextPollId += 1
        pending.counters["next_poll_id"] = counters.nextPollId
        return id
    }

    func allocateChannelNumber() async throws -> Int64 {
        if readOnly { allocatedWhileReading = true }
        if shared.positions != nil { return try await StreamPositions.next("parley_channel_numbers", db) }
        counters.channelCounter += 1
        pending.counters["channel_counter"] = counters.channelCounter
        return counters.channelCounter
    }

    func lastMessageTs(in channel: String) -> Int64 {
        if shared.positions != nil { return lastMessages[channel]?.createdAt ?? 0 }
        return counters.lastMessageTs
    }

    /// Marks a change to the channel itself (for channel changelogs; `updated_at` moves).
    func touch(_ channel: inout ChannelRecord, _ now: Int64) {
        markChanged(&channel, now)
        channel.updatedAt = now
    }

    /// Marks a change every member's render shows but that is not a change to the channel
    /// itself (read receipts in `members`, a member's profile): changelogs list it for all,
    /// `updated_at` stays.
    func markChanged(_ channel: inout ChannelRecord, _ now: Int64) {
        channel.changeSeq = nextSeq()
        channel.changedAt = now
    }

    /// Marks a change visible only to one member (read state, hide, offset).
    func touchMember(_ channel: inout ChannelRecord, _ userId: String, _ now: Int64) {
        guard channel.members[userId] != nil else { return }
        channel.members[userId]!.changeSeq = nextSeq()
        channel.members[userId]!.changedAt = now
    }

    func touch(_ message: inout MessageRecord, _ now: Int64) {
        message.changeSeq = nextSeq()
        message.changedAt = now
    }

    // MARK: events

    /// SQLite: keeps the newest `retention` events for resumes, pruned back to it in every
    /// write that takes the log past it: older ones go, and `prunedThrough` says up to where
    /// (a pending counter). Runs before the request's events are written (see
    /// `handleWriting`), or after them when they alone are more than the retention.
    /// PostgreSQL prunes apart from the writers (`Service.pruneLog`).
    private func pruneEvents(adding added: Int, _ tx: any SQLSession) async throws {
        if shared.positions != nil { return }
        let retention = shared.retention
        counters.storedEvents += added
        let slack = tx.dialect == .postgres ? retention / 10 : 0
        guard counters.storedEvents > retention + slack else { return }
        let drop = counters.storedEvents - retention
        guard let boundary = try await tx.queryOne("SELECT id FROM events ORDER BY id LIMIT 1 OFFSET \(drop - 1)")?.int(0)
        else { return }
        try await tx.execute("DELETE FROM events WHERE id <= ?", [.int(boundary)])
        pending.counters["pruned_through"] = boundary
        counters.prunedThrough = boundary
        counters.storedEvents = retention
        // Also when this write takes no number (and so announces nothing): the next writer
        // reads the log's size from here.
        if tx.dialect == .postgres { pending.counters["stored_events"] = Int64(retention) }
    }

    /// The retained events after `last` up to `through` addressed to `userId`, oldest first.
    func events(after last: Int64, through: Int64, for userId: String) async throws -> [StoredEvent] {
        let contains = try db.dialect == .sqlite ? "instr(recipients, ?) > 0" : "strpos(recipients, ?) > 0"
        return try await db.query("""
            SELECT id, created_at, category, recipients, data FROM events WHERE id > ? AND id <= ? AND \(contains) ORDER BY id
            """, [.int(last), .int(through), .text(recipientSeparator + userId + recipientSeparator)]).map { RecordTables.event($0) }
    }

    private static let committedEventColumnList = ["b.pruned", "b.users", "e.id", "e.created_at", "e.category", "e.recipients",
                                                   "e.data", "e.changed_channel"]
    private static let committedEventColumns = committedEventColumnList.joined(separator: ", ")
    private static let committedEventsFrom = """
        FROM (SELECT coalesce((SELECT value FROM meta WHERE name = 'pruned_through'), 0) AS pruned,
                     coalesce((SELECT value FROM meta WHERE name = 'users_written'), 0) AS users) b
            LEFT JOIN events e ON e.id >= ? AND e.id <= ?
        """

    /// PostgreSQL: `committedEvents`' statement for `rangeCount` ranges of ids.
    static func committedEventsWithChannelsSQL(rangeCount: Int) -> String {
        let inRanges = Array(repeating: "id BETWEEN ? AND ?", count: rangeCount).joined(separator: " OR ")
        let leading = String(repeating: "NULL, ", count: committedEventColumnList.count)
        let branches = ChannelQueries.OneStatementParts.branches("SELECT url FROM changed", leading: leading)
        return "WITH changed AS (SELECT DISTINCT changed_channel AS url FROM events WHERE (\(inRanges)) AND changed_channel IS NOT NULL) "
            + "SELECT \(committedEventColumns), \(ChannelQueries.OneStatementParts.typedNulls) \(committedEventsFrom)"
            + " UNION ALL " + branches.joined(separator: " UNION ALL ")
    }

    /// The statement of the common read, one range: prepared on every connection that runs it
    /// (HotStatements.swift), whatever else took the slots first.
    static let committedEventsOneRangeSQL = committedEventsWithChannelsSQL(rangeCount: 1)

    /// `committedEventsWithChannelsSQL` for 1 to `exactRangesLimit` ranges, built once: the text
    /// is about 8 KB, and building it took about 80 µs of every read, which follows every
    /// message of another server.
    private static let committedEventsSQLByRangeCount: [String] =
        [committedEventsOneRangeSQL] + (2...exactRangesLimit).map { committedEventsWithChannelsSQL(rangeCount: $0) }

    /// SQLite: the events alone (it loads their channels after them).
    private static let committedEventsAloneSQL = "SELECT \(committedEventColumns) \(committedEventsFrom) ORDER BY e.id"

    /// Reads of more ranges than this read their whole span and drop what is outside them.
    private static let exactRangesLimit = 16

    /// The committed events whose ids are in `ranges` (whoever receives them), oldest first,
    /// parsed, with their channels loaded to render them: what another server's writers
    /// committed (EventHub.swift); and where the retained events begin (events up to there
    /// were pruned). One statement over the span of the ranges, which also reads the users
    /// counter (on SQLite users current at it are not checked again; on PostgreSQL, where it
    /// does not move, every user is): this read follows every message of another server,
    /// round trips are its cost.
    func committedEvents(in ranges: [ClosedRange<Int64>]) async throws -> (events: [StoredEvent], prunedThrough: Int64) {
        guard let low = ranges.map(\.lowerBound).min(), let high = ranges.map(\.upperBound).max() else { return ([], 0) }
        var events: [StoredEvent] = []
        var urls = Set<String>()
        var pruned: Int64 = 0
        var sql = Self.committedEventsAloneSQL
        var binds: [SQLValue] = [.int(low), .int(high)]
        // PostgreSQL: the channels the events changed in the same statement (and so the same
        // snapshot), after the events' rows, which lead with columns of their own: every
        // message of another server costs this server one round trip.
        var channelRows: ChannelQueries.OneStatementParts.Reader? = nil
        if try db.dialect == .postgres {
            let exact = ranges.count <= Self.exactRangesLimit
            sql = Self.committedEventsSQLByRangeCount[exact ? ranges.count - 1 : 0]
            let rangeBinds: [SQLValue] = exact ? ranges.flatMap { [.int($0.lowerBound), .int($0.upperBound)] } : [.int(low), .int(high)]
            binds = rangeBinds + binds
            channelRows = ChannelQueries.OneStatementParts.Reader(offset: Self.committedEventColumnList.count)
        }
        var changed = Set<String>()
        for row in try await db.query(sql, binds) {
            // The channels' rows: NULL where the events' rows have their first column.
            guard row.optionalInt(0) != nil else {
                try channelRows?.add(row)
                continue
            }
            pruned = row.int(0)
            usersWrittenInSnapshot = row.int(1)
            guard row.optionalInt(2) != nil else { continue }
            var event = RecordTables.event(row, from: 2)
            guard ranges.contains(where: { $0.contains(event.id) }) else { continue }
            if channelRows != nil, let url = row.optionalText(7) { changed.insert(url) }
            event.fields = event.parsedData
            if case .string(let url)? = event.fields?["channel_url"] {
                urls.insert(url)
                // A cached copy older than the event is stale if the event changed the
                // channel, as all but typing do: loaded at once, not after a version check
                // that fails.
                if event.category != "typing_status", let copy = cache.channel(url), copy.channel.changeSeq < event.id {
                    channelsKnownChanged.insert(url)
                }
            }
            events.append(event)
        }
        if let channelRows {
            events.sort { $0.id < $1.id }
            let read = try channelRows.parts.assembled()
            ServerMetrics.shared.loaded(channels: read.count, withEvents: true)
            readChannels.append(contentsOf: read)
            try await take(read, requested: changed)
        }
        // The rest: channels of typing indicators, and of events stored before the log named
        // the channels they changed.
        try await loadChannels(Array(urls))
        return (events, pruned)
    }

    /// Where the retained events begin: events up to here were pruned (in this snapshot).
    func prunedThrough() async throws -> Int64 {
        try await db.queryOne("SELECT value FROM meta WHERE name = 'pruned_through'")?.int(0) ?? 0
    }

    func emit(_ category: String, channelUrl: String, to recipients: Set<String>, fields: [(String, JSON?)], now: Int64) {
        if let hook = WebhookCategory(streamEvent: category) { queueWebhook(hook, channelUrl: channelUrl, fields: fields, now: now) }
        guard !recipients.isEmpty else { return }
        let id = nextSeq()
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
                                changedChannel: category == "typing_status" ? nil : channelUrl,
                                fields: fields, channelRange: channelRange)
        pending.events.append(event)
        pendingFanout.append(event)
    }

    /// A call to the push gateway or the translator (Services/Push.swift, Translation.swift).
    func queueHookCall(_ call: QueuedHookCall) { pendingHookCalls.append(call) }

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
