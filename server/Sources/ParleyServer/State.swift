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

/// A live SSE subscriber: the state lock is held whenever it is fed, so it receives
/// events in log order, replay first.
final class Subscriber: @unchecked Sendable {
    let id: Int
    let userId: String
    let continuation: AsyncStream<String>.Continuation
    init(id: Int, userId: String, continuation: AsyncStream<String>.Continuation) {
        self.id = id
        self.userId = userId
        self.continuation = continuation
    }

    /// Ends the stream with an `error` event (PROTOCOL.md §9): its credential no longer holds.
    func end(code: Int, message: String) {
        let data = JSON.obj([("code", .int(Int64(code))), ("message", .string(message))]).serialized()
        continuation.yield("event: error\ndata: \(data)\n\n")
        continuation.finish()
    }
}

/// The server state: the request's transaction, the channels and users the request loaded,
/// the sequence counters, and the open event streams. Only touched while `Service` holds its
/// lock. A request runs in one write transaction (a GET in a read transaction): messages and
/// the other queried records are written as the handler goes, the changes of the loaded
/// channels and users (`pending`) at its end, and it commits before the response is sent.
///
/// The request's `channels`, `users` and `lastMessages` are emptied when the next request
/// starts (they stay until then so that the events of the last request are rendered from
/// the state it committed); their bound is what one request loads. Between requests only
/// `cache` keeps records (RecordCache.swift: bounded, and checked against the database
/// before each use).
final class ServerState {
    let database: any SQLDatabase
    let retention: Int
    /// The transaction of the request being handled.
    private var transaction: (any SQLSession)?
    var db: any SQLSession {
        get throws {
            guard let transaction else { throw APIError.internal("no transaction open") }
            return transaction
        }
    }
    /// Set when the request wrote to the database: a failed request then reloads the counters,
    /// which may have moved with what the rolled-back transaction wrote.
    private var wroteDirectly = false

    /// The users this request loaded (`loadUsers`) or changed, by id.
    private(set) var loadedUsers: [String: UserRecord] = [:]
    /// Ids looked up this request that name no user.
    private var absentUsers: Set<String> = []
    /// The channels this request loaded (`loadChannels`), with their members, by URL.
    private(set) var loadedChannels: [String: ChannelRecord] = [:]
    private var absentChannels: Set<String> = []
    /// The last message of each loaded channel that has one, by channel URL.
    var lastMessages: [String: MessageRecord] = [:]
    /// Committed channels and users kept between requests.
    let cache = RecordCache(channels: 2_000, users: 20_000)
    /// What this request read from the database whole, for `cache` once the request ends well.
    private var readChannels: [CachedChannel] = []
    private var readUsers: [CachedUser] = []
    /// A render asked for a user no request loaded (a missing `loadUsers`): with verification
    /// on, the request fails instead of showing an empty profile.
    var renderedUnloadedUser: String? = nil
    /// How many events the log holds (the events themselves stay in the database).
    private var storedEvents = 0
    var seq: Int64 = 0
    var prunedThrough: Int64 = 0
    var nextMessageId: Int64 = 1
    var nextReportId: Int64 = 1
    var lastMessageTs: Int64 = 0
    var channelCounter: Int64 = 0

    // Transient.
    var typing: [String: [String: Int64]] = [:]
    var subscribers: [Int: Subscriber] = [:] {
        // Kept beside the streams so `isOnline` (asked for every member of every render) is a
        // lookup; streams open and close rarely, so recounting them then is cheap.
        didSet { openStreams = subscribers.values.reduce(into: [:]) { $0[$1.userId, default: 0] += 1 } }
    }
    /// Open event streams per user, derived from `subscribers`.
    private(set) var openStreams: [String: Int] = [:]
    var nextSubscriberId = 1
    var publicBaseURL = ""
    var uploadLimit = 26_214_400

    var pending = StorageBatch()
    var pendingFanout: [StoredEvent] = []

    /// Channels whose members' unread counters are checked against a count of the messages
    /// at the end of the request (PARLEY_VERIFY_COUNTERS=1, set by the test scripts).
    private var touchedChannels: Set<String> = []
    /// The messages this request stored, by id.
    private var savedThisRequest: [Int64: MessageRecord] = [:]
    /// PARLEY_VERIFY_COUNTERS=1: every request checks the unread counters it touched, the
    /// order of the listings it read, and that it rendered no user it did not load.
    let verify: Bool

    /// Empty until `reload()` loads the counters.
    init(database: any SQLDatabase, retention: Int, verifyCounters: Bool = false) {
        self.database = database
        self.retention = max(1, retention)
        self.verify = verifyCounters
    }

    /// Forgets what the previous request loaded.
    private func startRequest() {
        loadedChannels = [:]
        absentChannels = []
        loadedUsers = [:]
        absentUsers = []
        lastMessages = [:]
        readChannels = []
        readUsers = []
        renderedUnloadedUser = nil
        savedThisRequest = [:]
        touchedChannels = []
        pending = StorageBatch()
        pendingFanout = []
        wroteDirectly = false
    }

    /// Runs `body` as one request: one write transaction, which commits the request's changes
    /// of memory (`pending`) with what it wrote directly. Returns the events to deliver.
    func handle<T>(readOnly: Bool = false, _ body: (ServerState) async throws -> T) async throws -> (T, [StoredEvent]) {
        if readOnly { return try await handleReading(body) }
        var bodyDone = false
        var attempts = 0
        do {
            let committed = try await database.write { tx in
                // A backend may run the transaction again (PostgreSQL after a deadlock): the
                // counters then go back to what is committed first.
                attempts += 1
                if attempts > 1 { try await reload() }
                startRequest()
                bodyDone = false
                transaction = tx
                defer { transaction = nil }
                let result = try await body(self)
                bodyDone = true
                try checkRendering()
                if verify { try await verifyUnreadCounters(touchedChannels) }
                let written = try await RecordTables.write(pending, tx)
                try await pruneEvents(adding: pending.events.count, tx)
                return (result, written)
            }
            // Committed: what it read and wrote may serve the next requests.
            let (result, written) = committed
            keepInCache(written)
            let fanout = pendingFanout
            pending = StorageBatch()
            pendingFanout = []
            wroteDirectly = false
            return (result, fanout)
        } catch {
            // The counters may have moved with what rolled back: read them again.
            if !pending.isEmpty || wroteDirectly || bodyDone { try? await reload() }
            startRequest()
            if bodyDone, !(error is APIError) { throw APIError.internal("storage commit failed: \(error)") }
            throw error
        }
    }

    /// A request that only reads the database (GET): a read transaction, which on SQLite
    /// does not queue behind the writer's connection and on PostgreSQL is READ ONLY. What it
    /// changed (a first login) is written after it in a write transaction.
    private func handleReading<T>(_ body: (ServerState) async throws -> T) async throws -> (T, [StoredEvent]) {
        let result: T
        startRequest()
        do {
            result = try await database.read { tx in
                transaction = tx
                defer { transaction = nil }
                let result = try await body(self)
                try checkRendering()
                return result
            }
            keepInCache(RecordTables.WrittenVersions())
        } catch {
            if !pending.isEmpty || wroteDirectly { try? await reload() }
            startRequest()
            throw error
        }
        if pending.isEmpty && pendingFanout.isEmpty { return (result, []) }
        let changedUsers = pending.users
        let (_, fanout) = try await handle { s in
            for case let (_, user?) in changedUsers { s.save(user) }
        }
        return (result, fanout)
    }

    /// After a commit (or a read): keeps what the request read whole, then what it wrote,
    /// under the versions its writes returned.
    private func keepInCache(_ written: RecordTables.WrittenVersions) {
        for entry in readChannels { cache.store(entry) }
        for entry in readUsers { cache.store(entry) }
        for (url, channel) in pending.channels {
            guard channel != nil, let version = written.channels[url], let full = loadedChannels[url] else {
                cache.forgetChannel(url)
                continue
            }
            let last = lastMessages[url]
            cache.store(CachedChannel(version: version, channel: full, lastMessage: last, lastMessageSeq: last?.changeSeq ?? -1))
        }
        for (id, user) in pending.users {
            guard let user, let version = written.users[id] else {
                cache.forgetUser(id)
                continue
            }
            cache.store(CachedUser(version: version, user: user))
        }
        readChannels = []
        readUsers = []
    }

    private func checkRendering() throws {
        if verify, let id = renderedUnloadedUser {
            throw APIError.internal("rendered user \"\(id)\" without loading it (a missing loadUsers)")
        }
    }

    /// Reads the counters (start-up, and after a failed request may have moved them).
    func reload() async throws {
        let (counters, eventCount) = try await database.read { db in try await RecordTables.loadCounters(db) }
        storedEvents = eventCount
        seq = counters["seq"] ?? 0
        prunedThrough = counters["pruned_through"] ?? 0
        nextMessageId = counters["next_message_id"] ?? 1
        nextReportId = counters["next_report_id"] ?? 1
        channelCounter = counters["channel_counter"] ?? 0
        lastMessageTs = counters["last_message_ts"] ?? 0
    }

    // MARK: loading

    /// Loads the users of `ids` not loaded yet this request.
    func loadUsers<S: Sequence>(_ ids: S) async throws where S.Element == String {
        var missing = Set(ids).filter { loadedUsers[$0] == nil && !absentUsers.contains($0) }
        if missing.isEmpty { return }
        let cached = missing.compactMap { cache.user($0) }
        if !cached.isEmpty {
            let versions = try await ChannelQueries.versions(ofUsers: cached.map(\.user.userId), db)
            for entry in cached where versions[entry.user.userId] == entry.version {
                loadedUsers[entry.user.userId] = entry.user
                missing.remove(entry.user.userId)
            }
        }
        if missing.isEmpty { return }
        for entry in try await ChannelQueries.users(Array(missing), db) {
            loadedUsers[entry.user.userId] = entry.user
            readUsers.append(entry)
        }
        for id in missing where loadedUsers[id] == nil { absentUsers.insert(id) }
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
        let cached = missing.compactMap { cache.channel($0) }
        if !cached.isEmpty {
            let versions = try await ChannelQueries.versions(ofChannels: cached.map(\.channel.url), db)
            for entry in cached {
                guard let stored = versions[entry.channel.url], stored.version == entry.version,
                      stored.lastMessageSeq == entry.lastMessageSeq else { continue }
                found.append(entry)
                missing.remove(entry.channel.url)
            }
        }
        if !missing.isEmpty {
            let read = try await ChannelQueries.channels(Array(missing), db)
            readChannels.append(contentsOf: read)
            found.append(contentsOf: read)
        }
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
    }
    /// Ends every open event stream of the user (deactivated or deleted): their session keys
    /// no longer authenticate, so what the streams would still deliver is not theirs to see.
    func endStreams(of userId: String, message: String) {
        for (id, subscriber) in subscribers where subscriber.userId == userId {
            subscribers.removeValue(forKey: id)
            subscriber.end(code: 400301, message: message)
        }
    }

    func deleteUser(_ id: String) {
        loadedUsers.removeValue(forKey: id)
        absentUsers.insert(id)
        pending.users[id] = .some(nil)
    }
    func save(_ s: SessionRecord) async throws {
        wroteDirectly = true
        try await RecordTables.putSession(s, db)
    }

    /// A session by its key: one primary-key read per request (sessions are not kept in memory).
    func session(_ token: String) async throws -> SessionRecord? {
        try await db.queryOne(RecordTables.sessionSQL, [.text(token)])
            .map { SessionRecord(token: $0.text(0), userId: $0.text(1), expiresAt: $0.int(2), createdAt: $0.int(3)) }
    }

    func deleteSessions(of userId: String) async throws {
        wroteDirectly = true
        try await db.execute("DELETE FROM sessions WHERE user_id = ?", [.text(userId)])
    }
    /// Writes the channel record (without its members) and the member records that differ
    /// from the channel's previous state in memory, which is what storage holds once the
    /// pending batch is committed: a change to one member writes one member record.
    func save(_ c: ChannelRecord) async throws {
        var c = c
        let previous = loadedChannels[c.url]?.members ?? [:]
        // A member whose start of unread messages moved (read, history reset, joined) is
        // counted again; the counters of the others moved with each message (UnreadCounters.swift).
        for (id, m) in c.members where m.state == "joined" {
            let before = previous[id]
            if before?.state != "joined" || before?.readTs != m.readTs || before?.tsMessageOffset != m.tsMessageOffset {
                try await recountUnread(&c, id)
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

    func deleteChannelRecord(_ url: String) {
        let members = loadedChannels.removeValue(forKey: url)?.members ?? [:]
        absentChannels.insert(url)
        lastMessages.removeValue(forKey: url)
        touchedChannels.remove(url)
        pending.channels[url] = .some(nil)
        for id in members.keys { pending.members[MemberKey(channelUrl: url, userId: id)] = .some(nil) }
    }
    func store(_ f: FileRecord, bytes: [UInt8]) async throws {
        wroteDirectly = true
        try await RecordTables.putFile(f, bytes: bytes, db)
    }
    func save(_ r: ReportRecord) async throws {
        wroteDirectly = true
        try await RecordTables.putReport(r, db)
    }

    func save(_ m: MessageRecord) async throws {
        wroteDirectly = true
        touchedChannels.insert(m.channelUrl)
        try await RecordTables.putMessage(m, db)
        savedThisRequest[m.id] = m
        if lastMessages[m.channelUrl]?.id == m.id { lastMessages[m.channelUrl] = m }
    }

    func messageRecord(_ id: Int64) async throws -> MessageRecord? {
        try await MessageQueries.message(db, id: id)
    }

    func deleteMessage(_ m: MessageRecord, at now: Int64) async throws {
        wroteDirectly = true
        touchedChannels.insert(m.channelUrl)
        try await RecordTables.deleteMessage(m.id, db)
        let t = MessageTombstoneRecord(messageId: m.id, channelUrl: m.channelUrl, deletedAt: now, seq: nextSeq())
        try await RecordTables.putMessageTombstone(t, db)
    }

    /// Drops a deleted channel's messages without tombstones (the channel tombstone covers them).
    func purgeMessages(of url: String) async throws {
        wroteDirectly = true
        try await MessageQueries.deleteChannelMessages(db, channel: url)
    }

    func addMembershipTombstone(user: String, channel: String, at now: Int64) {
        let t = MembershipTombstoneRecord(userId: user, channelUrl: channel, at: now, seq: nextSeq())
        pending.membershipTombstones[MembershipKey(userId: user, channelUrl: channel)] = t
    }

    // MARK: sequences

    func nextSeq() -> Int64 {
        seq += 1
        pending.counters["seq"] = seq
        return seq
    }

    func allocateMessageId() -> Int64 {
        let id = nextMessageId
        nextMessageId += 1
        pending.counters["next_message_id"] = nextMessageId
        return id
    }

    func allocateReportId() -> Int64 {
        let id = nextReportId
        nextReportId += 1
        pending.counters["next_report_id"] = nextReportId
        return id
    }

    func allocateChannelNumber() -> Int64 {
        channelCounter += 1
        pending.counters["channel_counter"] = channelCounter
        return channelCounter
    }

    /// Message creation times never go backwards, so id order is time order.
    func messageTimestamp(_ now: Int64) -> Int64 {
        lastMessageTs = max(lastMessageTs, now)
        pending.counters["last_message_ts"] = lastMessageTs
        return lastMessageTs
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

    /// Keeps the newest `retention` events for resumes: older ones go, and `prunedThrough`
    /// says up to where.
    private func pruneEvents(adding added: Int, _ tx: any SQLSession) async throws {
        storedEvents += added
        guard storedEvents > retention else { return }
        let drop = storedEvents - retention
        guard let boundary = try await tx.queryOne("SELECT id FROM events ORDER BY id LIMIT 1 OFFSET \(drop - 1)")?.int(0)
        else { return }
        try await tx.execute("DELETE FROM events WHERE id <= ?", [.int(boundary)])
        try await RecordTables.putCounter("pruned_through", boundary, tx)
        prunedThrough = boundary
        storedEvents = retention
    }

    /// The retained events after `last` addressed to `userId`, oldest first.
    func events(after last: Int64, for userId: String) async throws -> [StoredEvent] {
        let contains = try db.dialect == .sqlite ? "instr(recipients, ?) > 0" : "strpos(recipients, ?) > 0"
        return try await db.query("""
            SELECT id, created_at, category, recipients, data FROM events WHERE id > ? AND \(contains) ORDER BY id
            """, [.int(last), .text(recipientSeparator + userId + recipientSeparator)]).map(RecordTables.event)
    }

    func emit(_ category: String, channelUrl: String, to recipients: Set<String>, fields: [(String, JSON?)], now: Int64) {
        guard !recipients.isEmpty else { return }
        let id = nextSeq()
        var all: [(String, JSON?)] = [
            ("category", .string(category)), ("ts", .int(now)),
            ("channel_url", .string(channelUrl)), ("channel_type", "group"),
        ]
        all.append(contentsOf: fields)
        let event = StoredEvent(id: id, createdAt: now, category: category,
                                recipients: recipients.sorted(), data: JSON.obj(all).serialized())
        pending.events.append(event)
        pendingFanout.append(event)
    }

    func deliver(_ event: StoredEvent) {
        let recipients = Set(event.recipients)
        let targets = subscribers.values.filter { recipients.contains($0.userId) }
        guard !targets.isEmpty else { return }
        let frame = framer(event, now: nowMillis())
        var frames: [String: String] = [:]  // one rendering per user, whatever their number of streams
        for sub in targets {
            let text = frames[sub.userId] ?? frame(sub.userId)
            frames[sub.userId] = text
            sub.continuation.yield(text)
        }
    }
}

/// Serializes all access to the state; every request runs to completion under it.
final class Service: @unchecked Sendable {
    private let lock = AsyncLock()
    private let state: ServerState

    init(state: ServerState) { self.state = state }

    /// Loads what memory keeps from the database (at start).

    func load() async throws {
        await lock.lock()
        defer { lock.unlock() }
        try await state.reload()
    }

    /// `readOnly`: the request only reads the database (see ServerState.handle).
    func run<T>(readOnly: Bool = false, _ body: (ServerState) async throws -> T) async throws -> T {
        await lock.lock()
        defer { lock.unlock() }
        let (result, fanout) = try await state.handle(readOnly: readOnly, body)
        for event in fanout { state.deliver(event) }
        return result
    }
}
