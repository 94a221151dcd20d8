/// The channels of one request (`ChannelRecords`), whole with their members, restrictions,
/// metadata and counters, as the request leaves them, and their last messages. Loaded
/// channels come from the record cache when their versions are still the stored ones,
/// otherwise from the database (ChannelQueries.swift); the changed ones are written at the
/// request's end (`RequestTransaction.pending`). On PostgreSQL a writer holds the lock of
/// every channel it loads, taken before it reads it (`lockChannels`).
final class ChannelStore: ChannelRecords {
    private let tx: RequestTransaction
    private let users: UserStore
    private var shared: SharedState { tx.shared }
    private var cache: RecordCache { shared.cache }
    /// The request's transaction (UnreadCounters.swift counts in it too).
    var db: any SQLSession { get throws { try tx.db } }
    var verify: Bool { shared.verify }

    /// The channels this request loaded (`loadChannels`), with their members, by URL.
    private(set) var loadedChannels: [String: ChannelRecord] = [:]
    private var absentChannels: Set<String> = []
    /// Loaded channels whose members' users were not loaded (`loadChannels`' `membersLeftOut`).
    private var membersNotLoaded: Set<String> = []
    /// The channel of a request whose renders leave its members out (`FirstReads.leavesMembersOut`).
    private var membersLeftOutOf: Set<String> = []

    /// The request's renders of the channel leave its members out: its loads (and a writer's
    /// first statement) do not read its members' users.
    func leaveMembersOut(of url: String?) {
        if let url { membersLeftOutOf.insert(url) }
    }

    /// Before the request's end: the members' users of the channels loaded without them whose
    /// events show members (`framer` renders those after the commit, from what this request loaded).
    func loadMembersShown(by events: [StoredEvent]) async throws {
        guard !membersNotLoaded.isEmpty else { return }
        var urls = Set<String>()
        for event in events where !RecordRenderer.memberlessCategories.contains(event.category) {
            if case .string(let url)? = event.fields?["channel_url"], membersNotLoaded.contains(url) { urls.insert(url) }
        }
        if !urls.isEmpty { try await loadChannels(Array(urls), membersLeftOut: [], alsoShown: []) }
    }
    /// The member mark of each loaded channel's copy (`CachedChannel.memberMark`), which the
    /// copy this request writes keeps.
    private var loadedMemberMarks: [String: Int64] = [:]
    /// The last message of each loaded channel that has one, by channel URL.
    private(set) var lastMessages: [String: MessageRecord] = [:]
    /// What this request read from the database whole, for the cache once the request ends well.
    private var readChannels: [CachedChannel] = []
    /// Channels this request knows changed since their cached copy: loaded without
    /// checking the copy's version first.
    private var channelsKnownChanged: Set<String> = []
    /// A PostgreSQL writer: the channels it holds the locks of, with their versions (and
    /// their last messages' change numbers) as read once held; absent: no such channel.
    private var lockedChannels: [String: (version: Int64, lastMessageSeq: Int64)?] = [:]
    /// Channels whose members' unread counters are checked against a count of the messages
    /// at the end of the request (PARLEY_VERIFY_COUNTERS=1, set by the test scripts).
    private var touchedChannels: Set<String> = []
    /// The messages this request stored, by id: a channel's new last message is usually one.
    private var storedMessages: [Int64: MessageRecord] = [:]
    /// A writer of a SQLite commit group or of a PostgreSQL channel batch: the channels the
    /// earlier members wrote, as they left them (`RequestState.groupChannels`).
    private let groupChannels: GroupChannels?

    init(_ tx: RequestTransaction, users: UserStore, groupChannels: GroupChannels?) {
        self.tx = tx
        self.users = users
        self.groupChannels = groupChannels
    }

    // MARK: loading

    /// Loads the channels of `urls` not loaded yet this request, with their last messages and
    /// every user their renders show. For those of `membersLeftOut`, whose renders leave out
    /// their members (live events of `RecordRenderer.memberlessCategories`), only the users
    /// shown besides the members, and `alsoShown`: what the load of a message of a channel of
    /// 1,000 costs then does not grow with its members.
    func loadChannels(_ urls: [String]) async throws { try await loadChannels(urls, membersLeftOut: membersLeftOutOf, alsoShown: []) }

    func loadChannels(_ urls: [String], membersLeftOut: Set<String>, alsoShown: Set<String>) async throws {
        let lacking = urls.filter { membersNotLoaded.contains($0) && !membersLeftOut.contains($0) }
        if !lacking.isEmpty {
            membersNotLoaded.subtract(lacking)
            try await users.loadUsers(lacking.compactMap { loadedChannels[$0] }.flatMap { usersShown(by: $0) })
        }
        var missing = Set(urls).filter { loadedChannels[$0] == nil && !absentChannels.contains($0) }
        if missing.isEmpty { return try await users.loadUsers(alsoShown) }
        let requested = missing
        var found: [CachedChannel] = []
        // Copies known to be stale or found so: the loads start from them (`ChannelQueries.channels`).
        var bases: [String: CachedChannel] = [:]
        var cached: [CachedChannel] = []
        for url in missing {
            if channelsKnownChanged.contains(url) {
                if tx.loadsFromCopies { bases[url] = tx.cachedChannel(url) }
            } else if let entry = groupChannels?.entry(url) ?? tx.cachedChannel(url) {
                cached.append(entry)
            }
        }
        // Writers side by side lock them first (`lockBeforeReading`).
        try await tx.rules.willLoadChannels(missing, self)
        if !cached.isEmpty {
            // Where cached users are checked by version, those the copies show are read with them.
            let shownByCached = tx.rules.countsUsersWritten ? [] : cached.reduce(into: alsoShown) { shown, entry in
                shown.formUnion(usersShown(by: entry, members: !membersLeftOut.contains(entry.channel.url)))
            }.filter { users.needsVersion($0) }.sorted()
            let checked = try await checkedEntries(cached, users: shownByCached)
            for entry in checked.current {
                found.append(entry)
                missing.remove(entry.channel.url)
            }
            for entry in checked.stale where tx.loadsFromCopies { bases[entry.channel.url] = entry }
        }
        if !missing.isEmpty {
            ServerMetrics.shared.loaded(channels: missing.count)
            // The users the copies show, checked by the load's own statement.
            let shownByCopies = bases.values.reduce(into: alsoShown) { shown, base in
                shown.formUnion(usersShown(by: base, members: !membersLeftOut.contains(base.channel.url)))
            }
            let read = try await ChannelQueries.channels(Array(missing), bases: bases,
                                                         users: shownByCopies.filter { users.needsVersion($0) }.sorted(), db)
            users.knownUserVersions.merge(read.userVersions) { _, read in read }
            readChannels.append(contentsOf: read.channels)
            found.append(contentsOf: read.channels)
        }
        try await take(found, requested: requested, membersLeftOut: membersLeftOut, alsoShown: alsoShown)
    }

    /// The cached copies whose versions are still the stored ones, and the others (forgotten
    /// by the cache). The versions of `shown` are read with them where a statement runs.
    private func checkedEntries(_ cached: [CachedChannel], users shown: [String]) async throws
        -> (current: [CachedChannel], stale: [CachedChannel]) {
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
            let read = try await ChannelQueries.versions(ofChannels: unknown, users: shown, db)
            versions.merge(read.channels) { _, read in read }
            users.knownUserVersions.merge(read.users) { _, read in read }
        }
        var current: [CachedChannel] = []
        var stale: [CachedChannel] = []
        for entry in cached {
            if let stored = versions[entry.channel.url], stored.version == entry.version,
               stored.lastMessageSeq == entry.lastMessageSeq {
                current.append(entry)
            } else {
                cache.forgetChannel(entry.channel.url)
                stale.append(entry)
            }
        }
        return (current, stale)
    }

    /// Makes `found` this request's copies of its channels, and notes the channels of
    /// `requested` it lacks as absent; loads the users they show.
    private func take(_ found: [CachedChannel], requested: Set<String>, membersLeftOut: Set<String>,
                      alsoShown: Set<String>) async throws {
        var shown = alsoShown
        for entry in found {
            let url = entry.channel.url
            loadedChannels[url] = entry.channel
            loadedMemberMarks[url] = entry.memberMark
            if let last = entry.lastMessage { lastMessages[url] = last }
            let members = !membersLeftOut.contains(url)
            if !members { membersNotLoaded.insert(url) }
            shown.formUnion(usersShown(by: entry, members: members))
        }
        for url in requested where loadedChannels[url] == nil { absentChannels.insert(url) }
        try await users.loadUsers(shown)
    }

    /// The channel changed since its cached copy: loaded from the copy without checking it first.
    func knownChanged(_ url: String) { channelsKnownChanged.insert(url) }

    /// Everyone a render of the channel names: members, operators, banned and muted users,
    /// creator, inviters, and the sender and mentions of its last message. Without `members`,
    /// those a render without its members names: operators, creator, inviters (each recipient
    /// sees their own), and the last message's sender and mentions.
    func usersShown(by c: ChannelRecord, members: Bool = true) -> Set<String> {
        var ids = members ? Set(c.members.keys) : []
        ids.formUnion(c.operatorIds)
        if members {
            ids.formUnion(c.bans.keys)
            ids.formUnion(c.mutes.keys)
        }
        if let creator = c.createdBy { ids.insert(creator) }
        for m in c.members.values { if let inviter = m.inviterId { ids.insert(inviter) } }
        if let last = lastMessages[c.url] {
            if let sender = last.senderId { ids.insert(sender) }
            ids.formUnion(last.mentionedUserIds)
        }
        return ids
    }

    /// The same for a cached copy (with its last message).
    private func usersShown(by entry: CachedChannel, members: Bool = true) -> Set<String> {
        var ids = usersShown(by: entry.channel, members: members)
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

    // MARK: writing

    /// Writes the channel record (without its members) and the member records that differ
    /// from the channel's previous state in memory, which is what storage holds once the
    /// pending batch is committed: a change to one member writes one member record.
    func save(_ c: ChannelRecord) async throws {
        var c = c
        let previous = loadedChannels[c.url]?.members ?? [:]
        try await followLastMessage(of: c)
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
        tx.pending.channelParts[c.url] = (tx.pending.channels[c.url] != nil ? tx.pending.channelParts[c.url] ?? .all : [])
            .union(changedParts)
        loadedChannels[c.url] = c
        absentChannels.remove(c.url)
        var record = c
        record.members = [:]
        tx.pending.channels[c.url] = record
        saveMembers(of: c.url, from: previous, to: c.members)
        touchedChannels.insert(c.url)
        tx.pending.lastMessageAt[c.url] = lastMessages[c.url]?.createdAt ?? 0
    }

    /// Makes the channel's last message the one `c` names, with the users it shows.
    private func followLastMessage(of c: ChannelRecord) async throws {
        if c.lastMessageId == 0 {
            lastMessages.removeValue(forKey: c.url)
        } else if lastMessages[c.url]?.id != c.lastMessageId {
            // Usually the message this request just stored (a send): no need to read it back.
            if let stored = storedMessages[c.lastMessageId] {
                lastMessages[c.url] = stored
            } else {
                lastMessages[c.url] = try await MessageQueries.message(db, id: c.lastMessageId)
            }
            if let last = lastMessages[c.url] { try await users.loadUsers([last.senderId].compactMap { $0 } + last.mentionedUserIds) }
        }
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
                for (id, m) in changed { tx.pending.members[MemberKey(channelUrl: url, userId: id)] = m }
                return
            }
        }
        for (id, m) in current where previous[id] != m { tx.pending.members[MemberKey(channelUrl: url, userId: id)] = m }
        for id in previous.keys where current[id] == nil { tx.pending.members[MemberKey(channelUrl: url, userId: id)] = .some(nil) }
    }

    func deleteChannelRecord(_ url: String) {
        for key in tx.pending.typing.keys where key.channelUrl == url { tx.pending.typing.removeValue(forKey: key) }
        let members = loadedChannels.removeValue(forKey: url)?.members ?? [:]
        absentChannels.insert(url)
        lastMessages.removeValue(forKey: url)
        touchedChannels.remove(url)
        tx.pending.channels[url] = .some(nil)
        for id in members.keys { tx.pending.members[MemberKey(channelUrl: url, userId: id)] = .some(nil) }
    }

    func addMembershipTombstone(user: String, channel: String, at now: Int64) {
        let t = MembershipTombstoneRecord(userId: user, channelUrl: channel, at: now, seq: tx.nextSeq())
        tx.pending.membershipTombstones[MembershipKey(userId: user, channelUrl: channel)] = t
    }

    /// The request stored the message (MessageStore): the channel's last message follows it.
    func messageStored(_ m: MessageRecord) {
        storedMessages[m.id] = m
        if lastMessages[m.channelUrl]?.id == m.id { lastMessages[m.channelUrl] = m }
    }

    /// The request stores or deletes a message of the channel: its counters are checked at the end.
    func messagesChanged(in url: String) { touchedChannels.insert(url) }

    func allocateChannelNumber() async throws -> Int64 {
        try await tx.takeId(.channelNumber)
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
        channel.changeSeq = tx.nextSeq()
        channel.changedAt = now
    }

    /// Marks a change visible only to one member (read state, hide, offset).
    func touchMember(_ channel: inout ChannelRecord, _ userId: String, _ now: Int64) {
        guard channel.members[userId] != nil else { return }
        channel.members[userId]!.changeSeq = tx.nextSeq()
        channel.members[userId]!.changedAt = now
    }

    /// With verification on: the unread counters of the channels the request touched equal
    /// a count of their messages (UnreadCounters.swift).
    /// With verification on: the counters this request changed, as it changed them, against
    /// its messages. A send in one round trip checks them once committed instead.
    func verifyTouchedCounters() async throws {
        if shared.verify, tx.oneFlight == nil { try await verifyUnreadCounters(touchedChannels) }
    }

    /// The channels whose counters this request changed.
    var channelsTouched: [String] { touchedChannels.sorted() }

    // MARK: queries

    func distinctChannel(members ids: Set<String>, customType: String) async throws -> String? {
        // PostgreSQL: two creations of one distinct channel at once find one channel.
        try await tx.rules.lockForWriters("distinct \(customType) \(ids.sorted().joined(separator: " "))", tx)
        return try await ChannelQueries.distinctChannel(members: ids, customType: customType, db)
    }

    func joinedChannelCount(of userId: String) async throws -> Int {
        // PostgreSQL: two joins of one user at once count each other (the channel limit).
        try await tx.rules.lockForWriters("joins \(userId)", tx)
        return try await ChannelQueries.joinedChannelCount(of: userId, db)
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

    // MARK: locks (PostgreSQL)

    /// PostgreSQL, before any number: the channel the request names locked, then the busy
    /// lock; or, in a batch that holds the channel locked, what the member before read for it.
    func lockBeforeNumbers(_ positions: StreamPositions, batch: ChannelBatch?, channelHint: String?,
                           firstReads: FirstReads, _ db: any SQLSession) async throws {
        if let batch, let hint = channelHint, let entry = groupChannels?.entry(hint), let prefetched = batch.prefetched {
            batch.prefetched = nil
            usePrefetched(prefetched, channel: entry, firstReads: firstReads)
            return
        }
        var shown = channelHint.flatMap { tx.cachedChannel($0) }.map {
            usersShown(by: $0, members: !membersLeftOutOf.contains($0.channel.url))
        } ?? []
        shown.formUnion(firstReads.users)
        try await lockChannels(channelHint.map { [$0] } ?? [], positions, busyKey: positions.busyKey,
                               messageIds: firstReads.takesMessageId ? 1 : 0, users: shown.sorted(), firstReads: firstReads, db)
    }

    /// PostgreSQL: a writer holds the lock of every channel it loads, from before it reads it
    /// (`urls`: channels about to be read); a reader takes none.
    func lockBeforeReading(_ urls: Set<String>, _ positions: StreamPositions) async throws {
        guard !tx.readOnly else { return }
        let unlocked = urls.filter { lockedChannels[$0] == nil }.sorted()
        if !unlocked.isEmpty { try await lockChannels(unlocked, positions, busyKey: 0, db) }
    }

    /// The lock statement of `lockChannels`, run by every write (prepared: HotStatements.swift).
    static let lockChannelsSQL = "SELECT kind, name, a, b FROM parley_lock_channels(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, true)"

    /// PostgreSQL: takes the locks of `urls` (in the order given) and, the first time, the
    /// server's busy lock, then a new batch of event numbers: every change this request makes
    /// from now on is numbered after every writer that held one of these locks before it.
    /// `firstReads`: what the statement reads for the handler after the locks (the first time).
    private func lockChannels(_ urls: [String], _ positions: StreamPositions, busyKey: Int64, messageIds: Int = 0,
                              users shown: [String] = [], firstReads: FirstReads? = nil, _ db: any SQLSession) async throws {
        // Noted before it is sent: a failure gives up whatever it took.
        StreamPositions.noteSessionLocks(StreamPositions.Locks(busyKey: busyKey, channels: Set(urls)), in: db)
        let sessionKey = firstReads?.sessionKey.flatMap { $0.isEmpty ? nil : $0 }
        let earlierSend = firstReads?.earlierSend.flatMap { $0.requestId.isEmpty ? nil : $0 }
        let binds: [SQLValue] = [.int(busyKey), .text(positions.node),
                                 .text(JSON.array(urls.map { .string($0) }).serialized()),
                                 .int(Int64(tx.numbersPerLock)), .int(Int64(messageIds)),
                                 .text(JSON.array(shown.map { .string($0) }).serialized()),
                                 .text(sessionKey ?? ""), .text(earlierSend?.channel ?? ""),
                                 .text(earlierSend?.sender ?? ""), .text(earlierSend?.requestId ?? "")]
        // The first run of a send in one round trip: the statement goes out later, with the write.
        let speculating = tx.oneFlight.map { !$0.replaying } ?? false
        let rows: [SQLRow]
        do {
            if speculating, let flight = tx.oneFlight {
                let known = try rowsAsCached(urls, busyKey: busyKey, shown: shown, sessionKey: sessionKey, earlierSend: earlierSend)
                rows = flight.lockRows(binds: binds, locks: StreamPositions.Locks(busyKey: busyKey, channels: Set(urls)),
                                       known: known, messageIds: messageIds)
            } else {
                rows = try await db.query(Self.lockChannelsSQL, binds)
            }
        } catch let error as StorageError where error.description.contains("error \(StreamPositions.missingRowState)") {
            // Taken for gone while frozen (StreamPositions.definitionsWithOwnRow): no number
            // was taken; the row is published again before the attempt runs again.
            _ = try await positions.register(shared.database)
            throw StorageError("this server's stream position was published again; the write runs again", kind: .retryable)
        }
        for url in urls { lockedChannels[url] = .some(nil) }
        var numbers: [Int64] = []
        var session: SessionRecord? = nil
        var earlierFound: EarlierSend? = nil
        var bound: WriterBound? = nil
        for row in rows {
            switch row.text(0) {
            case "c": lockedChannels[row.text(1)] = (row.int(2), row.int(3))
            case "e": numbers.append(row.int(2))
            case "m": tx.prefetchedMessageId = row.int(2)
            case "s": session = SessionRecord(token: sessionKey ?? "", userId: row.text(1), expiresAt: row.int(2), createdAt: row.int(3))
            case "r": earlierFound = row.optionalInt(2).map(EarlierSend.stored) ?? row.optionalInt(3).map(EarlierSend.deleted)
            case "b": bound = WriterBound(bound: row.int(2), handedOut: row.int(3), otherServers: Int(row.text(1)) ?? 1)
            default: users.knownUserVersions[row.text(1)] = row.int(2)
            }
        }
        // Read under the locks, as the handler's own statements would have been.
        if let sessionKey { users.heldSession = (sessionKey, session) }
        if let earlierSend { tx.prefetchedEarlierSend = (earlierSend, earlierFound) }
        numbers.sort()
        tx.takeNumbers(numbers)
        if let bound { tx.noteBound(bound) }
        guard !speculating else { return }
        if let highest = numbers.last { shared.order.saw(highest) }
        if let bound { shared.order.saw(bound.handedOut) }
    }

    /// The rows of kinds c, u, s and r the lock statement would return if nothing the record
    /// cache holds of them changed: what the first run of a send in one round trip reads
    /// (Writers/OneFlightSend.swift), and what the flight's lock statement checks.
    private func rowsAsCached(_ urls: [String], busyKey: Int64, shown: [String], sessionKey: String?,
                              earlierSend: EarlierSendKey?) throws -> [SQLRow] {
        guard busyKey != 0, urls.count == 1, let entry = tx.cachedChannel(urls[0]) else {
            throw NotInOneFlight("a channel the record cache does not hold")
        }
        var rows = [SQLRow(values: [.text("c"), .text(urls[0]), .int(entry.version), .int(entry.lastMessageSeq)])]
        func userRow(_ id: String) throws -> SQLRow {
            guard let user = tx.cachedUser(id) else { throw NotInOneFlight("a user the record cache does not hold") }
            return SQLRow(values: [.text("u"), .text(id), .int(user.version), .null])
        }
        for id in shown { rows.append(try userRow(id)) }
        if let sessionKey {
            guard let session = shared.recentSessions.session(sessionKey) else { throw NotInOneFlight("a session not read lately") }
            rows.append(SQLRow(values: [.text("s"), .text(session.userId), .int(session.expiresAt), .int(session.createdAt)]))
            rows.append(try userRow(session.userId))
        }
        if earlierSend != nil { rows.append(SQLRow(values: [.text("r"), .null, .null, .null])) }
        return rows
    }

    /// PostgreSQL: a member of a channel batch starts from what the member before it read for
    /// it (Writers/ChannelBatch.swift) instead of its own first statement: the batch holds the
    /// channel's lock, and `channel` is the channel as that member left it.
    private func usePrefetched(_ prefetched: ChannelBatch.Prefetched, channel: CachedChannel, firstReads: FirstReads) {
        lockedChannels[channel.channel.url] = (channel.version, channel.lastMessageSeq)
        tx.takeNumbers(prefetched.numbers)
        tx.noteBound(prefetched.bound)
        if firstReads.takesMessageId { tx.prefetchedMessageId = prefetched.messageId }
        users.knownUserVersions = prefetched.userVersions
    }

    // MARK: the record cache

    /// What a writer whose channel batch continues reads for the next member with its last
    /// statement (Writers/ChannelBatch.swift): numbers, and the users the channel shows and
    /// those the writers waiting for it name (`named`: a send's sender and mentions).
    func prefetchExpression(for channelHint: String?, alsoNaming named: [String]) -> SQLExpression? {
        channelHint.flatMap { loadedChannels[$0] }.map {
            ChannelBatch.Prefetched.expression(node: shared.nodeId, numbers: tx.numbersPerLock,
                                               users: usersShown(by: $0, members: !membersLeftOutOf.contains($0.url))
                                                   .union(named).sorted())
        }
    }

    /// The channels this request wrote, as the record cache keeps them (nil: deleted, or
    /// not loaded whole), under the versions `written` gives them.
    func writtenEntries(_ written: RecordTables.WrittenVersions) -> [(url: String, entry: CachedChannel?)] {
        tx.pending.channels.map { url, channel in
            guard channel != nil, let version = written.channels[url], let full = loadedChannels[url] else { return (url, nil) }
            let last = lastMessages[url]
            return (url, CachedChannel(version: version, channel: full, lastMessage: last, lastMessageSeq: last?.changeSeq ?? -1,
                                       memberMark: loadedMemberMarks[url] ?? -1))
        }
    }

    /// What the request read whole, kept once it committed (or its read ended).
    func keepRead() {
        for entry in readChannels { cache.store(entry) }
        readChannels = []
    }

    /// What the request wrote, under the versions its writes returned.
    func keepWritten(_ written: RecordTables.WrittenVersions) {
        for (url, entry) in writtenEntries(written) {
            if let entry { cache.store(entry, written: true) } else { cache.forgetChannel(url) }
        }
    }
}
