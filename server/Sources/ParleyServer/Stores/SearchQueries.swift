// The full-text index of messages (migration 9) and the search over it (Services/Search.swift).
// What is indexed of a message: its text and, for a file message, the file's name. The index
// is kept by the database itself, in the transaction of every write to `messages`:
//
// - SQLite: a contentless FTS5 table `message_search` (rowid = message id, columns `message`
//   and `file_name`, tokenizer `unicode61 remove_diacritics 2`) filled by triggers on
//   `messages`. Contentless, so the text is not stored twice; a delete hands the old values
//   back, computed by the same expression as the insert. Score: bm25, negated.
// - PostgreSQL: a `tsvector` column `messages.search_vector` (config `simple`: no stemming,
//   no stop words), with a GIN index, set by a trigger from the text normalized as SQLite's
//   tokenizer does it (`parley_search_text`: lower case, diacritics off, every run of what
//   is no letter or digit a space; ICU's classes, so the database's locale does not matter).
//   The server's own upsert computes the vector in its values (`RecordTables.putMessage`);
//   the triggers (migration 32) compute it for an insert without one and for an update that
//   changes the text or the file. Score: ts_rank with length normalization 1.
//
// Both triggers skip updates that leave the text and the file alone: most writes of a
// message are reactions, thread counters and pins.

enum SearchQueries {
    /// Migration 32, PostgreSQL: the trigger of migration 9, a PL/pgSQL call on every write of
    /// a message (about 4% of the backends' CPU per message in `bench_server fanout`), runs
    /// only where its `WHEN` finds work: an insert without a vector (an older server's, a
    /// copy made in SQL) or an update that changes the text or the file. Each may run again on
    /// a database that has them (a schema taken back by a test).
    static let triggersWithConditions = [
        "DROP TRIGGER IF EXISTS messages_search ON messages",
        """
        CREATE OR REPLACE TRIGGER messages_search_insert BEFORE INSERT ON messages
        FOR EACH ROW WHEN (NEW.search_vector IS NULL) EXECUTE FUNCTION parley_message_search_trigger()
        """,
        """
        CREATE OR REPLACE TRIGGER messages_search_update BEFORE UPDATE OF message, file ON messages
        FOR EACH ROW WHEN (OLD.message IS DISTINCT FROM NEW.message OR OLD.file IS DISTINCT FROM NEW.file)
        EXECUTE FUNCTION parley_message_search_trigger()
        """,
    ]

    /// Migration 9, one statement at a time (function and trigger bodies hold semicolons).
    static func schema(_ dialect: SQLDialect) -> [String] {
        switch dialect {
        case .sqlite:
            let fileName = { (row: String) in "coalesce(json_extract(\(row).file, '$.name'), '')" }
            let add = { (row: String) in
                "INSERT INTO message_search (rowid, message, file_name) VALUES (\(row).id, \(row).message, \(fileName(row)));"
            }
            let remove = { (row: String) in
                "INSERT INTO message_search (message_search, rowid, message, file_name) VALUES ('delete', \(row).id, \(row).message, \(fileName(row)));"
            }
            return [
                "CREATE VIRTUAL TABLE message_search USING fts5(message, file_name, content='', tokenize='unicode61 remove_diacritics 2')",
                "CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN \(add("new")) END",
                "CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN \(remove("old")) END",
                """
                CREATE TRIGGER message_search_update AFTER UPDATE OF message, file ON messages
                WHEN old.message IS NOT new.message OR old.file IS NOT new.file
                BEGIN \(remove("old")) \(add("new")) END
                """,
                "INSERT INTO message_search (rowid, message, file_name) SELECT id, message, \(fileName("messages")) FROM messages",
            ]
        case .postgres:
            return [
                // The fold of SearchText.terms: lower case; combining diacritics out; Latin
                // letters decomposed and their accents out, other letters composed again
                // (SQLite keeps "й"); then what is no letter or digit becomes a space, so that
                // the parser of `simple` sees nothing but words (no hosts, e-mail addresses or
                // version numbers kept whole, as SQLite would not). ICU's case mapping and
                // classes: the database's locale does not matter.
                #"""
                CREATE FUNCTION parley_search_text(t text) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
                    SELECT regexp_replace(
                        normalize(
                            regexp_replace(
                                normalize(regexp_replace(lower(t COLLATE "und-x-icu"), '[\u0300-\u036f]+', '', 'g'), NFD),
                                '([A-Za-z\u00c0-\u024f\u1e00-\u1eff])[\u0300-\u036f]+', '\1', 'g'),
                            NFC) COLLATE "und-x-icu",
                        '[^[:alnum:]]+', ' ', 'g')
                $$
                """#,
                """
                CREATE FUNCTION parley_message_search_vector(message text, file text) RETURNS tsvector
                LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
                    SELECT to_tsvector('simple'::regconfig, parley_search_text(message || ' ' || coalesce(file::jsonb ->> 'name', '')))
                $$
                """,
                "ALTER TABLE messages ADD COLUMN search_vector tsvector",
                "UPDATE messages SET search_vector = parley_message_search_vector(message, file)",
                "CREATE INDEX messages_search ON messages USING gin (search_vector)",
                """
                CREATE FUNCTION parley_message_search_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF TG_OP = 'UPDATE' THEN
                        IF NEW.message IS NOT DISTINCT FROM OLD.message AND NEW.file IS NOT DISTINCT FROM OLD.file THEN
                            RETURN NEW;
                        END IF;
                    END IF;
                    NEW.search_vector := parley_message_search_vector(NEW.message, NEW.file);
                    RETURN NEW;
                END
                $$
                """,
                """
                CREATE TRIGGER messages_search BEFORE INSERT OR UPDATE ON messages
                FOR EACH ROW EXECUTE FUNCTION parley_message_search_trigger()
                """,
            ]
        }
    }

    /// Migration 10, SQLite only: the index is brought up to date once per write transaction,
    /// just before its COMMIT (`indexNotedChanges`), instead of by the triggers themselves.
    /// FTS5 writes what it holds in memory to a new segment of the index at every savepoint
    /// and at the start of every statement that runs triggers, so indexing from the triggers
    /// made a segment, and merge work, for each message (and each request of a group commit
    /// is a savepoint). The triggers now only note which messages changed and, the first time
    /// in a transaction, what the index holds for them: a contentless index must be handed
    /// exactly the old values to delete them.
    static let sqliteNotedChangesSchema: [String] = {
        let fileName = { (row: String) in "coalesce(json_extract(\(row).file, '$.name'), '')" }
        let noteOld = """
            INSERT INTO message_search_changes (id, indexed, old_message, old_file_name)
                VALUES (old.id, 1, old.message, \(fileName("old"))) ON CONFLICT (id) DO NOTHING;
            """
        let noteNew = "INSERT INTO message_search_changes (id, indexed) VALUES (new.id, 0) ON CONFLICT (id) DO NOTHING;"
        return [
            "DROP TRIGGER message_search_insert",
            "DROP TRIGGER message_search_delete",
            "DROP TRIGGER message_search_update",
            """
            CREATE TABLE message_search_changes (
                id INTEGER PRIMARY KEY, indexed INTEGER NOT NULL, old_message TEXT, old_file_name TEXT)
            """,
            "CREATE TRIGGER message_search_insert AFTER INSERT ON messages BEGIN \(noteNew) END",
            "CREATE TRIGGER message_search_delete AFTER DELETE ON messages BEGIN \(noteOld) END",
            """
            CREATE TRIGGER message_search_update AFTER UPDATE OF id, message, file ON messages
            WHEN old.id IS NOT new.id OR old.message IS NOT new.message OR old.file IS NOT new.file
            BEGIN \(noteOld) \(noteNew) END
            """,
        ]
    }()

    /// Applies the changes noted since the transaction began (migration 10) to the index and
    /// forgets them; SQLite's writer runs it before every COMMIT (Storage/SQLite/SQLiteDatabase.swift).
    /// First the old values go, then the messages as they are now come in, each in id order:
    /// FTS5 then writes one segment per step. A message whose text ended as it began is left alone.
    static func indexNotedChanges(_ db: SQLiteConnection) throws {
        guard try db.queryNow("SELECT EXISTS (SELECT 1 FROM message_search_changes)").first?.int(0) == 1 else { return }
        let fileName = "coalesce(json_extract(m.file, '$.name'), '')"
        let unchanged = "m.message = c.old_message AND \(fileName) = c.old_file_name"
        try db.executeNow("""
            INSERT INTO message_search (message_search, rowid, message, file_name)
                SELECT 'delete', c.id, c.old_message, c.old_file_name FROM message_search_changes c
                WHERE c.indexed AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = c.id AND \(unchanged))
                ORDER BY c.id
            """)
        try db.executeNow("""
            INSERT INTO message_search (rowid, message, file_name)
                SELECT m.id, m.message, \(fileName) FROM message_search_changes c CROSS JOIN messages m ON m.id = c.id
                WHERE NOT (c.indexed AND \(unchanged))
                ORDER BY c.id
            """)
        try db.executeNow("DELETE FROM message_search_changes")
    }

    /// One page of hits: the messages the user could list now (a joined member, after their
    /// history offset; deleted ones are gone from the table and the index) that hold every
    /// term, in the order asked, after the key of the previous page.
    ///
    /// The index drives the query (SQLite: the FTS5 table first, CROSS JOIN fixes the order;
    /// PostgreSQL: a bitmap scan of the GIN index), then each hit is looked up by id and its
    /// channel's membership row by primary key. The score is an integer (relevance × 10⁶,
    /// rounded), computed from the stored index alone: a page's last key is found again
    /// exactly by the next request, as long as nothing changed in between.
    static func search(_ q: MessageSearch, _ db: any SQLSession) async throws -> [(id: Int64, score: Int64)] {
        var c = SQLCondition()
        let from: String
        let score: String
        switch db.dialect {
        case .sqlite:
            from = """
                message_search CROSS JOIN messages m ON m.id = message_search.rowid
                CROSS JOIN members mb ON mb.channel_url = m.channel_url AND mb.user_id = ?
                """
            c.add("message_search MATCH ?", [.text(SearchText.fts5Match(q.terms))])
            score = "CAST(round(-bm25(message_search) * 1000000) AS INTEGER)"
        case .postgres:
            from = "messages m JOIN members mb ON mb.channel_url = m.channel_url AND mb.user_id = ?"
            c.add("m.search_vector @@ to_tsquery('simple'::regconfig, ?)", [.text(SearchText.tsquery(q.terms))])
            score = "(ts_rank(m.search_vector, to_tsquery('simple'::regconfig, ?), 1)::float8 * 1000000)::bigint"
        }
        c.add("mb.state = 'joined'")
        c.add("m.created_at > mb.ts_message_offset")
        if let urls = q.channelUrls { c.add("m.channel_url IN (\(SQLCondition.placeholders(urls.count)))", urls.map { .text($0) }) }
        if let types = q.customTypes { c.add("m.custom_type IN (\(SQLCondition.placeholders(types.count)))", types.map { .text($0) }) }
        if let senders = q.senderIds {
            c.add("coalesce(m.sender_id, '') IN (\(SQLCondition.placeholders(senders.count)))", senders.map { .text($0) })
        }
        if let t = q.from { c.add("m.created_at >= ?", [.int(t)]) }
        if let t = q.to { c.add("m.created_at <= ?", [.int(t)]) }
        // Binds in the order of the text: the score's (PostgreSQL), the join's, then WHERE's.
        let scoreBinds: [SQLValue] = db.dialect == .postgres ? [.text(SearchText.tsquery(q.terms))] : []
        var binds = scoreBinds + [.text(q.userId)]
        let rows: [SQLRow]
        switch q.order {
        case .ts:
            if let k = q.after, k.count == 2 { c.add("(m.created_at, m.id) < (?, ?)", [.int(k[0]), .int(k[1])]) }
            binds += c.binds
            rows = try await db.query("""
                SELECT m.id, \(score) FROM \(from) WHERE \(c.sql)
                ORDER BY m.created_at DESC, m.id DESC LIMIT \(q.limit)
                """, binds)
        case .score:
            // Every hit is scored before the order is known: materialized once, then paged.
            binds += c.binds
            var outer = ""
            if let k = q.after, k.count == 3 {
                outer = "WHERE (score, created_at, id) < (?, ?, ?)"
                binds += [.int(k[0]), .int(k[1]), .int(k[2])]
            }
            rows = try await db.query("""
                WITH hits AS MATERIALIZED (SELECT m.id AS id, m.created_at AS created_at, \(score) AS score FROM \(from) WHERE \(c.sql))
                SELECT id, score FROM hits \(outer) ORDER BY score DESC, created_at DESC, id DESC LIMIT \(q.limit)
                """, binds)
        }
        return rows.map { (id: $0.int(0), score: $0.int(1)) }
    }
}
