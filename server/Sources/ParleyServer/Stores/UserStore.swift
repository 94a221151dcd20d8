/// The users and sessions of one request (`UserRecords`): the users it loaded or changed, as
/// the request leaves them. Loaded users come from the record cache when their version is
/// still the stored one, otherwise from the database (UserQueries.swift); the
/// changed ones are written at the request's end (`RequestTransaction.pending`).
final class UserStore: UserRecords {
    private let tx: RequestTransaction
    private var shared: SharedState { tx.shared }
    private var cache: RecordCache { shared.cache }
    private var db: any SQLSession { get throws { try tx.db } }

    /// The users this request loaded (`loadUsers`) or changed, by id.
    private(set) var loadedUsers: [String: UserRecord] = [:]
    /// Ids looked up this request that name no user.
    private var absentUsers: Set<String> = []
    /// What this request read from the database whole, for the cache once the request ends well.
    private var readUsers: [CachedUser] = []
    /// `counters.usersWritten` as the attempt began (a writer's; -1 for a reader).
    private let usersWrittenAtStart: Int64
    /// A reader that read `users_written` in its snapshot (`EventStore.committedEvents`): the
    /// users it reads are as of that value, so its cached users current at it need no version check.
    var usersWrittenInSnapshot: Int64? = nil
    /// A PostgreSQL writer: the versions of the users it loaded (nil: absent), checked under
    /// their locks before it writes them.
    private var loadedUserVersions: [String: Int64?] = [:]
    /// PostgreSQL: versions of users read with a writer's first statement (the users the
    /// cached copy of its channel shows, the session's user) or with a reader's session.
    var knownUserVersions: [String: Int64] = [:]
    /// A render asked for a user no request loaded (a missing `loadUsers`): with verification
    /// on, the request fails instead of showing an empty profile.
    private var renderedUnloadedUser: String? = nil

    init(_ tx: RequestTransaction) {
        self.tx = tx
        usersWrittenAtStart = tx.readOnly ? -1 : tx.counters.usersWritten
    }

    // MARK: loading

    /// Loads the users of `ids` not loaded yet this request.
    func loadUsers<S: Sequence>(_ ids: S) async throws where S.Element == String {
        var missing = Set(ids).filter { loadedUsers[$0] == nil && !absentUsers.contains($0) }
        if missing.isEmpty { return }
        var unchecked: [CachedUser] = []
        // A writer that has written no user yet sees users as committed at its start. Where
        // writers do not count the users they write (writers of other channels change users
        // meanwhile), every copy is checked.
        let unchangedSince: Int64? = !tx.rules.countsUsersWritten ? nil : tx.readOnly ? usersWrittenInSnapshot
            : tx.counters.usersWritten != usersWrittenAtStart ? nil : usersWrittenAtStart
        for entry in missing.compactMap({ tx.cachedUser($0) }) {
            if let unchangedSince, entry.currentAt == unchangedSince {
                loadedUsers[entry.user.userId] = entry.user
                missing.remove(entry.user.userId)
            } else {
                unchecked.append(entry)
            }
        }
        if !unchecked.isEmpty { try await takeCurrent(unchecked, missing: &missing) }
        if missing.isEmpty { return }
        for entry in try await UserQueries.users(Array(missing), db) {
            loadedUsers[entry.user.userId] = entry.user
            loadedUserVersions[entry.user.userId] = entry.version
            readUsers.append(entry)
        }
        for id in missing where loadedUsers[id] == nil {
            absentUsers.insert(id)
            if loadedUserVersions[id] == nil { loadedUserVersions[id] = .some(nil) }
        }
    }

    /// A cached user not loaded yet whose version no statement of this request read: what a
    /// statement that runs anyway may read beside its own rows (`knownUserVersions`).
    func needsVersion(_ id: String) -> Bool {
        loadedUsers[id] == nil && !absentUsers.contains(id) && knownUserVersions[id] == nil && tx.cachedUser(id) != nil
    }

    /// Takes the cached users whose versions are still the stored ones, and forgets the others.
    private func takeCurrent(_ unchecked: [CachedUser], missing: inout Set<String>) async throws {
        // Those read with an earlier statement (PostgreSQL: a writer's first one, a channel's
        // load from its copy), the others read now.
        var versions: [String: Int64] = [:]
        var unknown: [String] = []
        for entry in unchecked {
            if let known = knownUserVersions[entry.user.userId] { versions[entry.user.userId] = known } else { unknown.append(entry.user.userId) }
        }
        if !unknown.isEmpty { versions.merge(try await UserQueries.versions(ofUsers: unknown, db)) { _, read in read } }
        for entry in unchecked {
            // A stale entry goes, so that the fresh read replaces it (a channel or user made
            // again can have a lower version than the one it replaced).
            guard versions[entry.user.userId] == entry.version else { cache.forgetUser(entry.user.userId); continue }
            loadedUsers[entry.user.userId] = entry.user
            loadedUserVersions[entry.user.userId] = entry.version
            missing.remove(entry.user.userId)
            // Checked in this transaction: kept as current at the counter it commits, or
            // (a reader that read it) at the counter of its snapshot.
            if !tx.readOnly || usersWrittenInSnapshot != nil { readUsers.append(entry) }
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

    /// With verification on, a request that rendered a user it did not load fails.
    func checkRendering() throws {
        if shared.verify, let id = renderedUnloadedUser {
            throw APIError.internal("rendered user \"\(id)\" without loading it (a missing loadUsers)")
        }
    }

    // MARK: writing

    func save(_ u: UserRecord) {
        loadedUsers[u.userId] = u
        absentUsers.remove(u.userId)
        tx.pending.users[u.userId] = u
        noteUserWritten()
    }

    func deleteUser(_ id: String) {
        loadedUsers.removeValue(forKey: id)
        absentUsers.insert(id)
        tx.pending.users[id] = .some(nil)
        noteUserWritten()
    }

    /// Moves `users_written` once per transaction that writes users (RecordCache.swift).
    private func noteUserWritten() {
        guard tx.rules.countsUsersWritten, tx.counters.usersWritten == usersWrittenAtStart else { return }
        tx.counters.usersWritten += 1
        tx.pending.counters["users_written"] = tx.counters.usersWritten
    }

    /// PostgreSQL: the users this request changes, locked, must still be as it loaded them
    /// (writers of other channels change users too); otherwise the attempt runs again.
    func checkWrittenUsers(_ db: any SQLSession) async throws {
        let ids = tx.pending.users.keys.sorted()
        guard !ids.isEmpty else { return }
        var current: [String: Int64] = [:]
        StreamPositions.noteSessionLocks(StreamPositions.Locks(users: Set(ids)), in: db)
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

    // MARK: sessions

    func save(_ s: SessionRecord) async throws {
        heldSession = nil
        try await RecordTables.putSession(s, db)
    }

    /// A session by its key: one primary-key read per request (sessions are not kept in memory).
    /// A PostgreSQL writer finds it read by its first statement (`heldSession`); a PostgreSQL
    /// reader reads its user's version with it, which spares the check of a cached copy a
    /// round trip (and lets the authentication before a body is read be one statement).
    func session(_ token: String) async throws -> SessionRecord? {
        let session = try await storedSession(token)
        if let session { shared.recentSessions.keep(session) }
        return session
    }

    private func storedSession(_ token: String) async throws -> SessionRecord? {
        if let held = heldSession {
            // Used once: a later read sees what the request changed since.
            heldSession = nil
            if held.token == token { return held.session }
        }
        guard tx.readOnly, tx.rules.readsUserVersionWithSession else {
            return try await db.queryOne(RecordTables.sessionSQL, [.text(token)])
                .map { SessionRecord(token: $0.text(0), userId: $0.text(1), expiresAt: $0.int(2), createdAt: $0.int(3)) }
        }
        guard let row = try await db.queryOne(RecordTables.sessionWithUserVersionSQL, [.text(token)]) else { return nil }
        if let version = row.optionalInt(4) { knownUserVersions[row.text(1)] = version }
        return SessionRecord(token: row.text(0), userId: row.text(1), expiresAt: row.int(2), createdAt: row.int(3))
    }

    /// A PostgreSQL writer: the session its first statement read under its locks, by key
    /// (nil: none has that key).
    var heldSession: (token: String, session: SessionRecord?)? = nil

    func deleteSessions(of userId: String) async throws {
        heldSession = nil
        try await db.execute("DELETE FROM sessions WHERE user_id = ?", [.text(userId)])
    }

    // MARK: queries

    func userListing(after: String?, ids: Set<String>?, nickname: String?, activeMode: String,
                     metadataKey: String?, metadataValues: [String]?, limit: Int) async throws -> [String] {
        try await UserQueries.userListing(after: after, ids: ids, nickname: nickname, activeMode: activeMode,
                                             metadataKey: metadataKey, metadataValues: metadataValues, limit: limit, db)
    }

    func unreadTotals(of userId: String, customTypes: [String]?, superMode: String) async throws -> (messages: Int64, channels: Int64) {
        try await UserQueries.unreadTotals(of: userId, customTypes: customTypes, superMode: superMode, db)
    }

    // MARK: the record cache

    /// What the request read whole, kept once it committed (or its read ended). What a writer
    /// read is current at the counter it committed (a reader cannot know), unless the writer
    /// then changed it: that one is kept as written (`keepWritten`). Kept here first, it would
    /// be seen, stamped current, by a writer running meanwhile.
    func keepRead() {
        for var entry in readUsers where tx.pending.users[entry.user.userId] == nil {
            entry.currentAt = usersCurrentAt
            cache.store(entry)
        }
        readUsers = []
    }

    /// What the request wrote, under the versions its writes returned.
    func keepWritten(_ written: RecordTables.WrittenVersions) {
        for (id, user) in tx.pending.users {
            guard let user, let version = written.users[id] else {
                cache.forgetUser(id)
                continue
            }
            cache.store(CachedUser(version: version, user: user, currentAt: usersCurrentAt), written: true)
        }
    }

    private var usersCurrentAt: Int64 { tx.readOnly ? usersWrittenInSnapshot ?? -1 : tx.counters.usersWritten }
}
