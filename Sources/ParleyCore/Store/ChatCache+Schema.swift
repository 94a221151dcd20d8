// The cache schema, as ordered migrations (PRAGMA user_version = the last one applied).
// Never edit a shipped migration: append a new one. Files from older versions are brought
// forward keeping their data; newer or corrupt files are moved aside by SQLiteDatabase.
// Search notes (`message_search_changes`, version 9) may wait across restarts: a migration
// that rebuilds `message_search` must empty them in the same step, or applying them later
// would hand the rebuilt index deletes of texts it does not hold.

extension ChatCache {
    /// Every table, in an order that deletion may follow.
    static let allTables = [
        "outbox", "local_messages", "chunks", "messages", "message_search_changes", "channel_members", "channels", "channel_access", "sync_tokens", "meta",
    ]

    static let migrations: [SQLiteMigration] = [
        SQLiteMigration(version: 1, sql: schemaVersion1),
        SQLiteMigration(version: 2, sql: schemaVersion2),
        SQLiteMigration(version: 3, sql: schemaVersion3),
        SQLiteMigration(version: 4, sql: schemaVersion4),
        SQLiteMigration(version: 5, sql: schemaVersion5),
        SQLiteMigration(version: 6, sql: schemaVersion6),
        SQLiteMigration(version: 7, sql: schemaVersion7),
        SQLiteMigration(version: 8, sql: schemaVersion8),
        SQLiteMigration(version: 9, sql: schemaVersion9),
        SQLiteMigration(version: 10, sql: schemaVersion10),
        SQLiteMigration(version: 11, sql: schemaVersion11),
    ]

    /// Version 1: channels, server messages, local messages, chunks, tokens, meta.
    static let schemaVersion1 = """
        CREATE TABLE meta (
            key TEXT PRIMARY KEY NOT NULL,
            value TEXT NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE sync_tokens (
            scope TEXT PRIMARY KEY NOT NULL,
            token TEXT NOT NULL
        ) WITHOUT ROWID;

        -- Sort keys are stored so that every list order is ascending over its columns
        -- (newest-first orders use negated times): keyset pages are then one index seek
        -- with a row-value comparison.
        CREATE TABLE channels (
            channel_url TEXT PRIMARY KEY NOT NULL,
            created_at INTEGER NOT NULL,
            last_message_created_at INTEGER,          -- NULL when the channel has no last message
            name TEXT NOT NULL,
            custom_type TEXT NOT NULL,
            chronological_key INTEGER NOT NULL,       -- -created_at
            activity_rank INTEGER NOT NULL,           -- 0 with a last message, 1 without
            activity_key INTEGER NOT NULL,            -- -last_message.created_at, else -created_at
            json TEXT NOT NULL
        );
        CREATE INDEX channels_chronological ON channels (chronological_key, channel_url);
        CREATE INDEX channels_latest_last_message ON channels (activity_rank, activity_key, chronological_key, channel_url);
        CREATE INDEX channels_name ON channels (name, channel_url);

        -- Messages the server accepted (message_id > 0).
        CREATE TABLE messages (
            message_id INTEGER PRIMARY KEY NOT NULL,
            channel_url TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            req_id TEXT NOT NULL,
            type TEXT NOT NULL,
            custom_type TEXT NOT NULL,
            sender_id TEXT NOT NULL,
            parent_message_id INTEGER NOT NULL,
            json TEXT NOT NULL
        );
        CREATE INDEX messages_by_channel_key ON messages (channel_url, created_at, message_id);

        -- Messages not yet accepted by the server; local_id is the creation order.
        CREATE TABLE local_messages (
            local_id INTEGER PRIMARY KEY AUTOINCREMENT,
            req_id TEXT NOT NULL UNIQUE,
            channel_url TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            sending_status TEXT NOT NULL CHECK (sending_status IN ('pending', 'failed')),
            error_code INTEGER NOT NULL DEFAULT 0,
            error_message TEXT NOT NULL DEFAULT '',
            json TEXT NOT NULL
        );
        CREATE INDEX local_messages_by_channel ON local_messages (channel_url, local_id);

        -- Continuous ranges [start, end] of keys (created_at, message_id), per channel and scope.
        CREATE TABLE chunks (
            chunk_id INTEGER PRIMARY KEY,
            channel_url TEXT NOT NULL,
            scope TEXT NOT NULL,
            start_created_at INTEGER NOT NULL,
            start_message_id INTEGER NOT NULL,
            end_created_at INTEGER NOT NULL,
            end_message_id INTEGER NOT NULL,
            reaches_oldest INTEGER NOT NULL,
            reaches_newest INTEGER NOT NULL
        );
        CREATE INDEX chunks_by_channel ON chunks (channel_url, scope);
        """

    /// Version 2: the `is_reply_to_channel` column (filled from the stored JSON of existing
    /// messages), the outbox, and channel access times for eviction.
    static let schemaVersion2 = """
        ALTER TABLE messages ADD COLUMN is_reply_to_channel INTEGER NOT NULL DEFAULT 0;
        UPDATE messages SET is_reply_to_channel = 1 WHERE json_extract(json, '$.is_reply_to_channel') = 1;

        -- sequence is AUTOINCREMENT so that it is never reused: it is the send order.
        CREATE TABLE outbox (
            sequence INTEGER PRIMARY KEY AUTOINCREMENT,
            req_id TEXT NOT NULL UNIQUE,
            channel_url TEXT NOT NULL,
            kind TEXT NOT NULL,
            request_json TEXT NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            retryable INTEGER NOT NULL DEFAULT 1,
            last_error_code INTEGER NOT NULL DEFAULT 0,
            last_error_message TEXT NOT NULL DEFAULT ''
        );
        CREATE INDEX outbox_by_channel ON outbox (channel_url, sequence);

        CREATE TABLE channel_access (
            channel_url TEXT PRIMARY KEY NOT NULL,
            accessed_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// Version 3: what a message copies from its channel, as columns (the user's history
    /// offset, the operators' ids, the pinned ids; "" when the stored render lacked them), and
    /// lookups of a channel's messages by sender (a role change rewrites their copy of the
    /// sender) and of replies by parent (a parent's edit rewrites their summary).
    static let schemaVersion3 = """
        ALTER TABLE channels ADD COLUMN history_offset INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE channels ADD COLUMN operator_ids TEXT NOT NULL DEFAULT '';
        ALTER TABLE channels ADD COLUMN pinned_message_ids TEXT NOT NULL DEFAULT '';
        UPDATE channels SET history_offset = coalesce(json_extract(json, '$.ts_message_offset'), 0);
        CREATE INDEX messages_by_sender ON messages (channel_url, sender_id);
        CREATE INDEX messages_by_parent ON messages (parent_message_id) WHERE parent_message_id != 0;
        """

    /// Version 4: a channel's members one row each, out of its JSON (`members_known`: the
    /// stored render listed them). A message event changes one member (PROTOCOL.md §9.1):
    /// rewriting that row, not the channel with its whole member list, keeps a live message's
    /// cost independent of the channel's size.
    static let schemaVersion4 = """
        CREATE TABLE channel_members (
            channel_url TEXT NOT NULL,
            user_id TEXT NOT NULL,
            position INTEGER NOT NULL,                -- the server's order of the list
            json TEXT NOT NULL,                       -- canonical JSON of the member object
            PRIMARY KEY (channel_url, user_id)
        ) WITHOUT ROWID;
        CREATE INDEX channel_members_in_order ON channel_members (channel_url, position);
        ALTER TABLE channels ADD COLUMN members_known INTEGER NOT NULL DEFAULT 0;
        INSERT OR REPLACE INTO channel_members (channel_url, user_id, position, json)
            SELECT channels.channel_url, json_extract(member.value, '$.user_id'), member.key, member.value
            FROM channels, json_each(channels.json, '$.members') AS member
            WHERE json_type(member.value, '$.user_id') = 'text';
        UPDATE channels SET members_known = 1, json = json_remove(json, '$.members')
            WHERE json_type(json, '$.members') = 'array';
        """

    /// Version 5: names sort by their order key (the NFC form, PROTOCOL.md "Sort orders"),
    /// the same on the server and here; `parley_text_order_key` is SQLiteFunctions'.
    static let schemaVersion5 = """
        ALTER TABLE channels ADD COLUMN name_key TEXT NOT NULL DEFAULT '';
        UPDATE channels SET name_key = parley_text_order_key(name);
        DROP INDEX channels_name;
        CREATE INDEX channels_name ON channels (name_key, channel_url);
        """

    /// Version 6: each message's text with its check value (Store/StoredTextCheck.swift),
    /// which reads compare instead of parsing. Rows written before have none (NULL) and are
    /// parsed on read as before. A statement that changes `json` in SQL must set it NULL.
    static let schemaVersion6 = """
        ALTER TABLE messages ADD COLUMN json_check INTEGER;
        """

    /// Version 7: the id of the poll a message carries, as a column (0: none), and the messages
    /// that carry one by channel (a partial index: only those are in it). The catch-up runs
    /// the poll changelogs of the channels it lists; a poll's events and deletion find the
    /// message carrying it. A column, not an index over the text: a damaged text must not
    /// make writes of its row fail.
    static let schemaVersion7 = """
        ALTER TABLE messages ADD COLUMN poll_id INTEGER NOT NULL DEFAULT 0;
        UPDATE messages SET poll_id = CASE WHEN json_valid(json) THEN
            CASE WHEN json_type(json, '$.poll.id') = 'integer' THEN json_extract(json, '$.poll.id') ELSE 0 END ELSE 0 END;
        CREATE INDEX messages_with_polls ON messages (channel_url, poll_id) WHERE poll_id != 0;
        """

    /// Version 8: full-text search over the cached messages (Store/ChatCache+Search.swift).
    /// What a message is found by — its `message` and its file's `name` — is kept in two
    /// columns, written with the rest of the row (ChatCache+Messages.swift), and an FTS5
    /// index reads them as its content (it keeps no copy of its own; the columns are the
    /// text's second copy in the row, which spares every write a parse of the JSON in SQL).
    /// Triggers keep the
    /// index in the same transaction as every write of `messages`: inserts, edits, deletions,
    /// truncation, eviction and clearing all go through them; an edit that leaves the text as
    /// it was costs the index nothing. The `unicode61` tokenizer folds case and diacritics.
    /// Existing rows get their columns from their text ("" when it is damaged) and are indexed.
    static let schemaVersion8 = """
        ALTER TABLE messages ADD COLUMN search_text TEXT NOT NULL DEFAULT '';
        ALTER TABLE messages ADD COLUMN search_file_name TEXT NOT NULL DEFAULT '';
        UPDATE messages SET
            search_text = CASE WHEN json_valid(json) AND json_type(json, '$.message') = 'text'
                THEN json_extract(json, '$.message') ELSE '' END,
            search_file_name = CASE WHEN json_valid(json) AND json_type(json, '$.file.name') = 'text'
                THEN json_extract(json, '$.file.name') ELSE '' END;
        CREATE VIRTUAL TABLE message_search USING fts5(
            search_text, search_file_name, content = 'messages', content_rowid = 'message_id',
            tokenize = 'unicode61 remove_diacritics 2');
        CREATE TRIGGER message_search_after_insert AFTER INSERT ON messages BEGIN
            INSERT INTO message_search (rowid, search_text, search_file_name)
                VALUES (new.message_id, new.search_text, new.search_file_name);
        END;
        CREATE TRIGGER message_search_after_delete AFTER DELETE ON messages BEGIN
            INSERT INTO message_search (message_search, rowid, search_text, search_file_name)
                VALUES ('delete', old.message_id, old.search_text, old.search_file_name);
        END;
        CREATE TRIGGER message_search_after_update AFTER UPDATE OF search_text, search_file_name, message_id ON messages
            WHEN old.message_id != new.message_id OR old.search_text != new.search_text
                OR old.search_file_name != new.search_file_name BEGIN
            INSERT INTO message_search (message_search, rowid, search_text, search_file_name)
                VALUES ('delete', old.message_id, old.search_text, old.search_file_name);
            INSERT INTO message_search (rowid, search_text, search_file_name)
                VALUES (new.message_id, new.search_text, new.search_file_name);
        END;
        INSERT INTO message_search (message_search) VALUES ('rebuild');
        """

    /// Version 9: the index is brought up to date once per transaction, just before its
    /// commit, instead of by each write. FTS5 writes what it holds in memory to a new
    /// segment of the index at every savepoint and at the start of every statement that
    /// runs triggers, so writing it from the triggers made a segment, and merge work, for
    /// each message (about 20 µs of a catch-up's message). The triggers now only note which
    /// messages changed and, the first time in a transaction, what the index holds for them
    /// (`indexed` with their old text: exactly what a delete must hand back to an
    /// external-content index). `ChatCache.indexChangedMessages` applies the notes in
    /// message id order and empties the table: at a commit once a batch of them waits, and
    /// before every read of the index, which so sees exactly the committed messages.
    static let schemaVersion9 = """
        DROP TRIGGER message_search_after_insert;
        DROP TRIGGER message_search_after_delete;
        DROP TRIGGER message_search_after_update;
        DROP TABLE message_search;
        CREATE VIRTUAL TABLE message_search USING fts5(
            search_text, search_file_name, content = 'messages', content_rowid = 'message_id',
            tokenize = 'unicode61 remove_diacritics 2', prefix = '1 2 3 4');
        INSERT INTO message_search (message_search) VALUES ('rebuild');
        CREATE TABLE message_search_changes (
            message_id INTEGER PRIMARY KEY NOT NULL,
            indexed INTEGER NOT NULL,       -- 1: the index holds old_text / old_file_name for it
            old_text TEXT,
            old_file_name TEXT
        );
        CREATE TRIGGER message_search_after_insert AFTER INSERT ON messages BEGIN
            INSERT INTO message_search_changes (message_id, indexed) VALUES (new.message_id, 0)
                ON CONFLICT (message_id) DO NOTHING;
        END;
        CREATE TRIGGER message_search_after_delete AFTER DELETE ON messages BEGIN
            INSERT INTO message_search_changes (message_id, indexed, old_text, old_file_name)
                VALUES (old.message_id, 1, old.search_text, old.search_file_name)
                ON CONFLICT (message_id) DO NOTHING;
        END;
        CREATE TRIGGER message_search_after_update AFTER UPDATE OF search_text, search_file_name, message_id ON messages
            WHEN old.message_id != new.message_id OR old.search_text != new.search_text
                OR old.search_file_name != new.search_file_name BEGIN
            INSERT INTO message_search_changes (message_id, indexed, old_text, old_file_name)
                VALUES (old.message_id, 1, old.search_text, old.search_file_name)
                ON CONFLICT (message_id) DO NOTHING;
            INSERT INTO message_search_changes (message_id, indexed) VALUES (new.message_id, 0)
                ON CONFLICT (message_id) DO NOTHING;
        END;
        """

    /// Version 10: where each message's optional members lie in its text
    /// (Store/OptionalMemberSpans.swift), written with the text, so that a view presents a
    /// page without scanning every text. Rows written before stay NULL: views scan those.
    /// A migration that rewrites `json` must set `optional_members` to NULL (or rewrite it).
    static let schemaVersion10 = """
        ALTER TABLE messages ADD COLUMN optional_members BLOB;
        """

    /// Channel names sort case-insensitively (`nameOrderKey`): their keys computed again.
    static let schemaVersion11 = """
        UPDATE channels SET name_key = parley_name_order_key(name);
        """
}
