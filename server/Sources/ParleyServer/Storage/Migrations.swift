import Foundation

// The database schema, as numbered migrations applied at start, in order, each once.
// One text serves both engines: `{INT}`, `{TEXT}`, `{BLOB}` and `{WITHOUT_ROWID}` are
// replaced per dialect. On PostgreSQL every text column compares bytewise (COLLATE "C"):
// the orders and tie-breaks of docs/PROTOCOL.md are byte orders, and a cluster's default
// collation (en_US.UTF-8 on Debian) would silently reorder them.

struct Migration: Sendable {
    let version: Int
    let summary: String
    let ddl: String
    /// The one engine the migration is for (the other records it as applied, with nothing to do).
    var onlyFor: SQLDialect? = nil
    /// Fills what the DDL added from the data already stored (after every migration's DDL
    /// and an import of the record layout, so it may run on imported data).
    var backfill: (@Sendable (any SQLSession) async throws -> Void)? = nil

    func script(for dialect: SQLDialect) -> String {
        if let onlyFor, onlyFor != dialect { return "" }
        var text = ddl
        let replacements: [(String, String)] = switch dialect {
        case .sqlite: [("{INT}", "INTEGER"), ("{TEXT}", "TEXT"), ("{BLOB}", "BLOB"), ("{WITHOUT_ROWID}", "WITHOUT ROWID"),
                       ("{EVENT_XID}", "")]
        case .postgres: [("{INT}", "BIGINT"), ("{TEXT}", "TEXT COLLATE \"C\""), ("{BLOB}", "BYTEA"), ("{WITHOUT_ROWID}", ""),
                         ("{EVENT_XID}", ", xid xid8 NOT NULL DEFAULT pg_current_xact_id()")]
        }
        for (placeholder, value) in replacements { text = text.replacingOccurrences(of: placeholder, with: value) }
        return text
    }
}

enum Migrations {
    static let all: [Migration] = [
        Migration(version: 1, summary: "tables per kind of record", ddl: """
            CREATE TABLE meta (name {TEXT} PRIMARY KEY, value {INT} NOT NULL) {WITHOUT_ROWID};
            CREATE TABLE users (
                user_id {TEXT} PRIMARY KEY, nickname {TEXT} NOT NULL, profile_url {TEXT} NOT NULL,
                is_active {INT} NOT NULL, created_at {INT} NOT NULL, last_seen_at {INT} NOT NULL,
                has_ever_logged_in {INT} NOT NULL, auto_accept {INT} NOT NULL,
                discovery_keys {TEXT} NOT NULL, preferred_languages {TEXT} NOT NULL) {WITHOUT_ROWID};
            CREATE TABLE user_metadata (
                user_id {TEXT} NOT NULL, key {TEXT} NOT NULL, value {TEXT} NOT NULL,
                PRIMARY KEY (user_id, key)) {WITHOUT_ROWID};
            CREATE INDEX user_metadata_by_value ON user_metadata (key, value, user_id);
            CREATE TABLE sessions (
                token {TEXT} PRIMARY KEY, user_id {TEXT} NOT NULL, expires_at {INT} NOT NULL,
                created_at {INT} NOT NULL) {WITHOUT_ROWID};
            CREATE INDEX sessions_by_user ON sessions (user_id);
            CREATE TABLE channels (
                url {TEXT} PRIMARY KEY, name {TEXT} NOT NULL, cover_url {TEXT} NOT NULL,
                custom_type {TEXT} NOT NULL, data {TEXT} NOT NULL, created_at {INT} NOT NULL,
                updated_at {INT} NOT NULL, created_by {TEXT}, is_distinct {INT} NOT NULL,
                is_super {INT} NOT NULL, is_public {INT} NOT NULL, is_ephemeral {INT} NOT NULL,
                is_frozen {INT} NOT NULL, pinned_message_ids {TEXT} NOT NULL, last_message_id {INT} NOT NULL,
                change_seq {INT} NOT NULL, changed_at {INT} NOT NULL) {WITHOUT_ROWID};
            CREATE TABLE members (
                channel_url {TEXT} NOT NULL, user_id {TEXT} NOT NULL, state {TEXT} NOT NULL,
                invited_at {INT} NOT NULL, inviter_id {TEXT}, joined_at {INT} NOT NULL,
                read_ts {INT} NOT NULL, delivered_ts {INT} NOT NULL, hidden_state {TEXT} NOT NULL,
                ts_message_offset {INT} NOT NULL, change_seq {INT} NOT NULL, changed_at {INT} NOT NULL,
                unread_count {INT} NOT NULL, unread_mention_count {INT} NOT NULL,
                PRIMARY KEY (channel_url, user_id)) {WITHOUT_ROWID};
            CREATE INDEX members_by_user ON members (user_id, channel_url);
            CREATE TABLE channel_operators (
                channel_url {TEXT} NOT NULL, user_id {TEXT} NOT NULL, position {INT} NOT NULL,
                PRIMARY KEY (channel_url, user_id)) {WITHOUT_ROWID};
            CREATE TABLE channel_restrictions (
                channel_url {TEXT} NOT NULL, kind {TEXT} NOT NULL, user_id {TEXT} NOT NULL,
                start_at {INT} NOT NULL, end_at {INT} NOT NULL, description {TEXT} NOT NULL,
                PRIMARY KEY (channel_url, kind, user_id)) {WITHOUT_ROWID};
            CREATE TABLE channel_metadata (
                channel_url {TEXT} NOT NULL, key {TEXT} NOT NULL, value {TEXT} NOT NULL,
                PRIMARY KEY (channel_url, key)) {WITHOUT_ROWID};
            CREATE TABLE channel_metacounters (
                channel_url {TEXT} NOT NULL, key {TEXT} NOT NULL, value {INT} NOT NULL,
                PRIMARY KEY (channel_url, key)) {WITHOUT_ROWID};
            CREATE TABLE messages (
                id {INT} PRIMARY KEY, channel_url {TEXT} NOT NULL, type {TEXT} NOT NULL,
                message {TEXT} NOT NULL, sender_id {TEXT}, req_id {TEXT} NOT NULL,
                custom_type {TEXT} NOT NULL, data {TEXT} NOT NULL, created_at {INT} NOT NULL,
                updated_at {INT} NOT NULL, mention_type {TEXT} NOT NULL, is_op_msg {INT} NOT NULL,
                silent {INT} NOT NULL, parent_id {INT} NOT NULL, is_reply_to_channel {INT} NOT NULL,
                file {TEXT}, thumbnails {TEXT} NOT NULL, sorted_metaarray {TEXT} NOT NULL,
                reactions {TEXT} NOT NULL, reply_count {INT} NOT NULL, last_replied_at {INT} NOT NULL,
                thread_updated_at {INT} NOT NULL, recent_replier_ids {TEXT} NOT NULL,
                change_seq {INT} NOT NULL, changed_at {INT} NOT NULL);
            CREATE INDEX messages_in_order ON messages (channel_url, created_at, id);
            CREATE INDEX messages_by_change ON messages (channel_url, change_seq);
            CREATE INDEX messages_by_parent ON messages (parent_id, created_at, id) WHERE parent_id <> 0;
            CREATE UNIQUE INDEX messages_by_request ON messages (channel_url, coalesce(sender_id, ''), req_id)
                WHERE req_id <> '';
            CREATE TABLE message_mentions (
                message_id {INT} NOT NULL, user_id {TEXT} NOT NULL, position {INT} NOT NULL,
                PRIMARY KEY (message_id, user_id)) {WITHOUT_ROWID};
            CREATE INDEX message_mentions_by_user ON message_mentions (user_id, message_id);
            CREATE TABLE message_tombstones (
                message_id {INT} PRIMARY KEY, channel_url {TEXT} NOT NULL, deleted_at {INT} NOT NULL,
                seq {INT} NOT NULL);
            CREATE INDEX message_tombstones_by_change ON message_tombstones (channel_url, seq);
            CREATE TABLE membership_tombstones (
                user_id {TEXT} NOT NULL, channel_url {TEXT} NOT NULL, at {INT} NOT NULL, seq {INT} NOT NULL,
                PRIMARY KEY (user_id, channel_url)) {WITHOUT_ROWID};
            CREATE INDEX membership_tombstones_by_change ON membership_tombstones (user_id, seq);
            CREATE TABLE files (
                file_id {TEXT} PRIMARY KEY, channel_url {TEXT} NOT NULL, message_id {INT} NOT NULL,
                name {TEXT} NOT NULL, type {TEXT} NOT NULL, size {INT} NOT NULL) {WITHOUT_ROWID};
            CREATE TABLE file_blobs (file_id {TEXT} PRIMARY KEY, bytes {BLOB} NOT NULL) {WITHOUT_ROWID};
            CREATE TABLE reports (
                id {INT} PRIMARY KEY, report_type {TEXT} NOT NULL, category {TEXT} NOT NULL,
                reporting_user_id {TEXT}, offending_user_id {TEXT}, channel_url {TEXT}, message_id {INT},
                description {TEXT} NOT NULL, created_at {INT} NOT NULL);
            CREATE TABLE events (
                id {INT} PRIMARY KEY, created_at {INT} NOT NULL, category {TEXT} NOT NULL,
                recipients {TEXT} NOT NULL, data {TEXT} NOT NULL{EVENT_XID});
            """),
        Migration(version: 2, summary: "channels listed by queries: sort keys, last message time, lookup indexes, versions for the record cache", ddl: """
            ALTER TABLE channels ADD COLUMN name_key {TEXT} NOT NULL DEFAULT '';
            ALTER TABLE channels ADD COLUMN last_message_at {INT} NOT NULL DEFAULT 0;
            ALTER TABLE channel_metadata ADD COLUMN value_key {TEXT} NOT NULL DEFAULT '';
            ALTER TABLE channels ADD COLUMN version {INT} NOT NULL DEFAULT 0;
            ALTER TABLE users ADD COLUMN version {INT} NOT NULL DEFAULT 0;
            CREATE INDEX channels_by_creation ON channels (created_at, url);
            CREATE INDEX channels_by_creator ON channels (created_by) WHERE created_by IS NOT NULL;
            CREATE INDEX channels_distinct ON channels (custom_type, created_at) WHERE is_distinct = 1;
            CREATE INDEX members_by_inviter ON members (inviter_id) WHERE inviter_id IS NOT NULL;
            CREATE INDEX channel_metadata_by_value ON channel_metadata (key, value_key, channel_url);
            """, backfill: { db in
                try await db.execute("""
                    UPDATE channels SET last_message_at = coalesce(
                        (SELECT created_at FROM messages WHERE messages.id = channels.last_message_id), 0)
                    """, [])
                // Sort keys are NFC (`orderKeyText`), which SQL cannot compute: read, keyed, written back.
                for row in try await db.query("SELECT url, name FROM channels", []) {
                    try await db.execute("UPDATE channels SET name_key = ? WHERE url = ?", [.text(orderKeyText(row.text(1))), .text(row.text(0))])
                }
                for row in try await db.query("SELECT channel_url, key, value FROM channel_metadata", []) {
                    try await db.execute("UPDATE channel_metadata SET value_key = ? WHERE channel_url = ? AND key = ?",
                                         [.text(orderKeyText(row.text(2))), .text(row.text(0)), .text(row.text(1))])
                }
            }),
        sharedCounterBounds,
        writeTurn,
        Migration(version: 5, summary: "who is typing, shared by every server on the database", ddl: """
            CREATE TABLE typing (
                channel_url {TEXT} NOT NULL, user_id {TEXT} NOT NULL, since {INT} NOT NULL,
                PRIMARY KEY (channel_url, user_id)) {WITHOUT_ROWID};
            """),
        presence,
        Migration(version: 7, summary: "the application settings the admin API stores (chat history, channel limit)", ddl: """
            CREATE TABLE application_settings (name {TEXT} PRIMARY KEY, value {TEXT} NOT NULL) {WITHOUT_ROWID};
            """),
        polls,
        search,
        searchAtCommit,
        Migration(version: 11, summary: "unread counts as channel totals less member bases: a message writes the channel's row, not every member's", ddl: """
            ALTER TABLE channels ADD COLUMN counted_messages {INT} NOT NULL DEFAULT 0;
            ALTER TABLE channels ADD COLUMN counted_mentions {INT} NOT NULL DEFAULT 0;
            ALTER TABLE members RENAME COLUMN unread_count TO unread_base;
            ALTER TABLE members RENAME COLUMN unread_mention_count TO mention_base;
            UPDATE members SET unread_base = -unread_base, mention_base = -mention_base;
            """),
        writeTurnForChannel,
        Migration(version: 13, summary: "the channel an event changed, so that another server loads it with the events", ddl: """
            ALTER TABLE events ADD COLUMN changed_channel {TEXT};
            """),
        writeTurnHandedOver,
        writeTurnWithoutSync,
        writeTurnClaimedLate,
        Migration(version: 17, summary: "a deleted message's sender and request id, so that a repeated send is not stored again", ddl: """
            ALTER TABLE message_tombstones ADD COLUMN sender_id {TEXT} NOT NULL DEFAULT '';
            ALTER TABLE message_tombstones ADD COLUMN req_id {TEXT} NOT NULL DEFAULT '';
            CREATE INDEX message_tombstones_by_request ON message_tombstones (channel_url, sender_id, req_id) WHERE req_id <> '';
            """),
        streamPositions,
        streamWritersForgotten,
        Migration(version: 20, summary: "the Session-Key whose streams an event skips: the device that made the change", ddl: """
            ALTER TABLE events ADD COLUMN except_session {TEXT};
            """),
        Migration(version: 21, summary: "channel names sort case-insensitively: name keys computed again", ddl: "", backfill: { db in
            // The key is Swift's (`nameOrderKeyText`), which SQL cannot compute: read, keyed, written back.
            for row in try await db.query("SELECT url, name FROM channels", []) {
                try await db.execute("UPDATE channels SET name_key = ? WHERE url = ?",
                                     [.text(nameOrderKeyText(row.text(1))), .text(row.text(0))])
            }
        }),
    ]

    /// Writers of different channels run side by side on every server: numbers come from
    /// sequences (started after the counters of `meta`) and readers deliver up to the bound of
    /// Storage/Postgres/StreamPositions.swift. Every server of the database must run this
    /// version or later (docs/SERVER.md, upgrades).
    static let streamPositions = Migration(
        version: 18, summary: "PostgreSQL: numbers from sequences; writers of different channels side by side", ddl: "",
        onlyFor: .postgres,
        backfill: { db in
            guard db.dialect == .postgres else { return }
            try await StreamPositions.migrate(db)
        })

    /// The rows of `stream_writers` of servers gone are removed; a writer checks its server's
    /// (StreamPositions.definitionsWithOwnRow). Servers of migration 18 keep calling the
    /// function of five arguments, which stays.
    static let streamWritersForgotten = Migration(
        version: 19, summary: "PostgreSQL: the stream positions of servers gone are removed", ddl: "",
        onlyFor: .postgres,
        backfill: { db in
            guard db.dialect == .postgres else { return }
            for definition in StreamPositions.definitionsWithOwnRow { try await db.execute(definition, []) }
        })

    /// A server that wrote last claims its next turn in that write's own statement
    /// (Storage/Postgres/WriteTurn.swift `claimFunctionDefinition`). The turns held to the end
    /// of a transaction (servers before migration 14, during an upgrade) now move the count
    /// of handovers too, so that such a claim sees their writes.
    static let writeTurnClaimedLate = Migration(
        version: 16, summary: "PostgreSQL: a server that wrote last claims its next write turn in the write itself", ddl: "",
        onlyFor: .postgres,
        backfill: { db in
            guard db.dialect == .postgres else { return }
            for definition in [WriteTurn.claimFunctionDefinition, WriteTurn.functionDefinition, WriteTurn.functionForChannelDefinition] {
                try await db.execute(definition, [])
            }
        })

    /// The held turn, taken by a statement that is its own transaction, no longer waits for a
    /// sync of the WAL of its own (Storage/Postgres/WriteTurn.swift). A new function, so that
    /// servers of migration 14 keep theirs during an upgrade.
    static let writeTurnWithoutSync = Migration(
        version: 15, summary: "PostgreSQL: taking the write turn waits for no sync of its own", ddl: "",
        onlyFor: .postgres,
        backfill: { db in
            guard db.dialect == .postgres else { return }
            try await db.execute(WriteTurn.heldAloneFunctionDefinition, [])
        })

    /// A writer holds the turn on its connection and hands it over in its last statement
    /// (Storage/Postgres/WriteTurn.swift): a send in two round trips.
    static let writeTurnHandedOver = Migration(
        version: 14, summary: "PostgreSQL: the write turn is held by the connection and handed over by a row", ddl: """
            CREATE TABLE IF NOT EXISTS write_turn (id {INT} PRIMARY KEY, handovers {INT} NOT NULL);
            INSERT INTO write_turn (id, handovers) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
            """,
        onlyFor: .postgres,
        backfill: { db in
            guard db.dialect == .postgres else { return }
            for definition in [WriteTurn.functionDefinition, WriteTurn.functionForChannelDefinition, WriteTurn.heldFunctionDefinition] {
                try await db.execute(definition, [])
            }
        })

    /// A writer's turn that also reads the version of the channel its request names (one
    /// round trip less per write, Storage/Postgres/WriteTurn.swift).
    static let writeTurnForChannel = Migration(
        version: 12, summary: "PostgreSQL: the write turn reads the named channel's version with the counters", ddl: "",
        onlyFor: .postgres,
        backfill: { db in
            guard db.dialect == .postgres else { return }
            try await db.execute(WriteTurn.functionForChannelDefinition, [])
        })

    /// The full-text index of messages (Storage/SearchQueries.swift), filled from the messages
    /// already stored. Its DDL differs per engine and holds trigger and function bodies, so it
    /// runs statement by statement here rather than as a script; on SQLite it runs after an
    /// import of the record layout, whose messages it then indexes with the others.
    static let search = Migration(version: 9, summary: "full-text index of message texts and file names", ddl: "",
                                  backfill: { db in
                                      for statement in SearchQueries.schema(db.dialect) { try await db.execute(statement, []) }
                                  })

    /// SQLite's search index brought up to date at each commit rather than by each write
    /// (SearchQueries.sqliteNotedChangesSchema). A backfill, so that it follows migration 9's.
    static let searchAtCommit = Migration(version: 10, summary: "SQLite: the search index follows each commit, not each statement",
                                          ddl: "", onlyFor: .sqlite,
                                          backfill: { db in
                                              guard db.dialect == .sqlite else { return }
                                              for statement in SearchQueries.sqliteNotedChangesSchema { try await db.execute(statement, []) }
                                          })

    /// Polls of group channels (Services/Polls.swift): a poll row with its options, one row
    /// per vote (the primary key makes a user's vote for an option unique), the tombstones of
    /// deleted polls for poll changelogs, and the poll a message carries.
    static let polls = Migration(version: 8, summary: "polls, their options, votes and tombstones; the poll a message carries", ddl: """
        ALTER TABLE messages ADD COLUMN poll_id {INT} NOT NULL DEFAULT 0;
        CREATE TABLE polls (
            id {INT} PRIMARY KEY, channel_url {TEXT} NOT NULL, message_id {INT} NOT NULL, title {TEXT} NOT NULL,
            allow_user_suggestion {INT} NOT NULL, allow_multiple_votes {INT} NOT NULL, close_at {INT} NOT NULL,
            is_closed {INT} NOT NULL, created_by {TEXT}, created_at {INT} NOT NULL, updated_at {INT} NOT NULL,
            next_option_id {INT} NOT NULL, change_seq {INT} NOT NULL, changed_at {INT} NOT NULL);
        CREATE INDEX polls_in_channel ON polls (channel_url, id);
        CREATE INDEX polls_by_change ON polls (channel_url, change_seq);
        CREATE TABLE poll_options (
            poll_id {INT} NOT NULL, id {INT} NOT NULL, text {TEXT} NOT NULL, created_by {TEXT},
            created_at {INT} NOT NULL, updated_at {INT} NOT NULL,
            PRIMARY KEY (poll_id, id)) {WITHOUT_ROWID};
        CREATE TABLE poll_votes (
            poll_id {INT} NOT NULL, option_id {INT} NOT NULL, user_id {TEXT} NOT NULL, voted_at {INT} NOT NULL,
            PRIMARY KEY (poll_id, option_id, user_id)) {WITHOUT_ROWID};
        CREATE INDEX poll_votes_by_user ON poll_votes (poll_id, user_id, option_id);
        CREATE TABLE poll_tombstones (
            poll_id {INT} PRIMARY KEY, channel_url {TEXT} NOT NULL, deleted_at {INT} NOT NULL, seq {INT} NOT NULL);
        CREATE INDEX poll_tombstones_by_change ON poll_tombstones (channel_url, seq);
        """)

    static let sharedCounterBounds = Migration(
        version: 3, summary: "PostgreSQL: bounds of the numbers writers running at once handed out (replaced by migration 4)",
        ddl: """
            CREATE SEQUENCE parley_reserved_seq MINVALUE 0 START 0;
            CREATE SEQUENCE parley_reserved_message_id MINVALUE 0 START 0;
            CREATE SEQUENCE parley_reserved_report_id MINVALUE 0 START 0;
            CREATE SEQUENCE parley_reserved_channel_number MINVALUE 0 START 0;
            """, onlyFor: .postgres)

    /// Writers on PostgreSQL take turns across every server on the database (a transaction
    /// lock, docs/ARCHITECTURE.md "Requests and locks", *Writes on PostgreSQL*) and take their numbers
    /// from `meta`, as on SQLite: the bounds of migration 3 are folded into `meta` (they may
    /// pass the numbers stored: ids then jump, once), with the newest message's time and the
    /// size of the event log, and the sequences go.
    static let writeTurn = Migration(
        version: 4, summary: "PostgreSQL: writers take turns across servers and number from meta", ddl: "",
        backfill: { db in
            guard db.dialect == .postgres else { return }
            try await db.execute(WriteTurn.functionDefinition, [])
            let bounds: [(meta: String, sequence: String, offset: Int64)] = [
                ("seq", "parley_reserved_seq", 0), ("next_message_id", "parley_reserved_message_id", 1),
                ("next_report_id", "parley_reserved_report_id", 1), ("channel_counter", "parley_reserved_channel_number", 0),
            ]
            for bound in bounds {
                let reserved = try await db.queryOne(
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \(bound.sequence)")?.int(0) ?? 0
                try await raiseCounter(bound.meta, to: reserved + bound.offset, db)
                try await db.execute("DROP SEQUENCE \(bound.sequence)", [])
            }
            let newest = try await db.queryOne("SELECT coalesce(max(created_at), 0) FROM messages")?.int(0) ?? 0
            try await raiseCounter("last_message_ts", to: newest, db)
            try await db.execute("""
                INSERT INTO meta (name, value) SELECT 'stored_events', count(*) FROM events
                ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """, [])
        })

    /// Who has event streams open on which server, and which servers are running, shared by
    /// every server on a PostgreSQL database (Storage/Postgres/Presence.swift). One SQLite
    /// file has one server, which knows its own streams.
    static let presence = Migration(
        version: 6, summary: "PostgreSQL: the servers running and the streams each has open per user",
        ddl: """
            CREATE TABLE server_nodes (
                node_id {TEXT} PRIMARY KEY, started_at {INT} NOT NULL, seen_at {INT} NOT NULL);
            CREATE TABLE presence (
                node_id {TEXT} NOT NULL, user_id {TEXT} NOT NULL, streams {INT} NOT NULL,
                PRIMARY KEY (node_id, user_id));
            CREATE INDEX presence_by_user ON presence (user_id);
            """, onlyFor: .postgres)

    private static func raiseCounter(_ name: String, to value: Int64, _ db: any SQLSession) async throws {
        try await db.execute("""
            INSERT INTO meta (name, value) VALUES (?, ?)
            ON CONFLICT (name) DO UPDATE SET value = GREATEST(meta.value, excluded.value)
            """, [.text(name), .int(value)])
    }

    static var latestVersion: Int { all.last?.version ?? 0 }

    /// Brings the schema to the latest version, in one transaction, and returns the
    /// migrations it applied, in order. A file of the record layout (tables `records`,
    /// `events`, `counters`, no `schema_migrations`) is imported into the tables of migration
    /// 1 first (LegacyImport.swift). Several servers starting at once on one PostgreSQL
    /// database take turns (an advisory lock held by the transaction).
    @discardableResult
    static func apply(to database: any SQLDatabase, legacyUploads: String? = nil,
                      log: @escaping @Sendable (String) -> Void) async throws -> [Migration] {
        try await database.write { db in
            if db.dialect == .postgres {
                // "parley" in ASCII, as the key of the lock.
                try await db.execute("SELECT pg_advisory_xact_lock(123563833845113)", [])
            }
            let hasHistory = try await tableExists("schema_migrations", db)
            let legacy = !hasHistory && db.dialect == .sqlite ? try await tableExists("records", db) : false
            if !hasHistory {
                try await db.executeScript("""
                    CREATE TABLE schema_migrations (version \(db.dialect == .sqlite ? "INTEGER" : "BIGINT") PRIMARY KEY,
                        applied_at \(db.dialect == .sqlite ? "INTEGER" : "BIGINT") NOT NULL)
                    """)
            }
            if legacy { try await LegacyImport.renameTables(db) }
            let current = try await appliedVersion(db)
            if current > latestVersion {
                throw StorageError("the database has schema version \(current); this server knows versions up to \(latestVersion) (a newer server wrote it)")
            }
            let pending = all.filter { $0.version > current }
            for migration in pending {
                let script = migration.script(for: db.dialect)
                if !script.isEmpty { try await db.executeScript(script) }
                try await db.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)",
                                     [.int(Int64(migration.version)), .int(nowMillis())])
            }
            // The record layout is imported into the newest tables (with the code that writes them).
            if legacy {
                let counts = try await LegacyImport.run(db, uploadsDirectory: legacyUploads)
                log("parley-server: imported the record layout of the database into tables (\(counts)); "
                    + "the old tables were dropped" + (legacyUploads.map { "; uploads are in the database now, \($0) may be removed" } ?? ""))
            }
            for migration in pending { try await migration.backfill?(db) }
            return pending
        }
    }

    /// Where a database's schema stands, read without changing anything.
    struct Status: Sendable {
        /// The newest migration applied (0: none, an empty database).
        let version: Int
        /// The database holds the record layout, which the next migration imports.
        let holdsRecordLayout: Bool
        /// The migrations a `migrate` (or a server's start) would apply, in order.
        var pending: [Migration] { all.filter { $0.version > version } }
        /// A newer server migrated the database: this one cannot run on it.
        var isNewer: Bool { version > latestVersion }
    }

    static func status(of database: any SQLDatabase) async throws -> Status {
        try await database.read { db in try await status(db) }
    }

    static func status(_ db: any SQLSession) async throws -> Status {
        guard try await tableExists("schema_migrations", db) else {
            let legacy = db.dialect == .sqlite ? try await tableExists("records", db) : false
            return Status(version: 0, holdsRecordLayout: legacy)
        }
        return Status(version: try await appliedVersion(db), holdsRecordLayout: false)
    }

    /// The newest migration recorded in `schema_migrations`.
    static func appliedVersion(_ db: any SQLSession) async throws -> Int {
        Int(try await db.queryOne("SELECT coalesce(max(version), 0) FROM schema_migrations", [])?.int(0) ?? 0)
    }

    static func tableExists(_ name: String, _ db: any SQLSession) async throws -> Bool {
        let sql = db.dialect == .sqlite
            ? "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            : "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = ?"
        return try await !db.query(sql, [.text(name)]).isEmpty
    }
}
