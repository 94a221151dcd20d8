import Synchronization

// The statements that run on every request or every message, prepared once per
// connection: a connection prepares a slot's text by name the first time it runs there and
// reuses it afterwards (PQConnection.executePrepared); every other statement is parsed and
// planned each time it runs (an unnamed statement).
//
// Two kinds: the fixed texts below, and texts built at run time that keep coming back (a
// combined write of at most `learnedValuesLimit` values, `PostgresSession.writeTogether`,
// such as a send's), each given a slot once it was seen `learnAfter` times, while slots are
// free. A slot's text never changes once given:
// connections that prepared it keep it. Slots are first come, first served: shapes that
// grow hot after all are taken run unprepared (as correct, a little slower).

enum HotStatements {
    /// The SQL texts exactly as the storage code passes them to `query`/`execute`.
    static let texts: [String] = [
        RecordTables.sessionSQL,
        RecordTables.sessionWithUserVersionSQL,
        MessageQueries.byIdSQL,
        MessageQueries.unreadSQL,
        RecordTables.upsertMessageWithVectorSQL,
        RecordTables.deleteMentionsSQL,
        RecordTables.upsertChannelSQL,
        RecordTables.insertEventSQL,
        EventStore.committedEventsSQL,
        ChannelQueries.OneStatementParts.oneChannelSQL,
        ChannelQueries.OneStatementParts.channelsSQL,
        ChannelQueries.versionOfOneChannelSQL,
        ChannelQueries.versionsOfChannelsSQL,
        ChannelStore.lockChannelsSQL,
        OneFlightSend.lockExpectingSQL,
        MessageQueries.earlierSendSQL,
    ] + CommitFollowUp.statementTexts
    /// Slots: the fixed texts first, then 16 for learned ones.
    static let slotCount = texts.count + 16
    /// Times a built text is seen before it gets a slot: one-off shapes stay unnamed.
    static let learnAfter = 3
    /// Combined writes with more values than this are not learned (`PostgresSession.writeTogether`).
    static let learnedValuesLimit = 200
    /// Built texts counted at most (then the count starts over), so that shapes seen rarely
    /// cannot grow it without end.
    static let countLimit = 1_000

    private struct Table {
        var slots: [String: Int] = Dictionary(texts.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        var postgresTexts: [String] = texts.map { SQLScanner.numberingPlaceholders(in: $0).sql }
        var seen: [String: Int] = [:]
    }

    private static let table = Mutex(Table())

    /// The slot of `sql` (the `?` text), if it has one.
    static func slot(for sql: String) -> Int? { table.withLock { $0.slots[sql] } }

    /// The PostgreSQL text (`$n` placeholders) of a slot.
    static func postgresText(_ slot: Int) -> String { table.withLock { $0.postgresTexts[slot] } }

    /// A text built at run time that may come back: counted, and given a slot once seen often
    /// enough while one is free. Returns its slot if it has one now.
    static func learn(_ sql: String) -> Int? {
        table.withLock { table in
            if let slot = table.slots[sql] { return slot }
            guard table.postgresTexts.count < slotCount else { return nil }
            if table.seen.count >= countLimit { table.seen = [:] }
            let count = (table.seen[sql] ?? 0) + 1
            guard count >= learnAfter else {
                table.seen[sql] = count
                return nil
            }
            table.seen[sql] = nil
            let slot = table.postgresTexts.count
            table.postgresTexts.append(SQLScanner.numberingPlaceholders(in: sql).sql)
            table.slots[sql] = slot
            return slot
        }
    }
}
