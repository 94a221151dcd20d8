import PostgresNIO
import Synchronization

// The statements that run on every request or every message, prepared once per
// connection. PostgresNIO prepares a PostgresPreparedStatement by name on a connection the
// first time it runs there and reuses it afterwards; every other statement is parsed and
// planned each time it runs (an unnamed statement).
//
// Two kinds: the fixed texts below, and texts built at run time that keep coming back (a
// combined write of at most `learnedValuesLimit` values, `PostgresSession.writeTogether`,
// such as a send's; the load of one channel, `ChannelQueries`), each given a slot once it
// was seen `learnAfter` times, while slots are free. A slot's text never changes once given:
// connections that prepared it keep it. Slots are first come, first served: shapes that
// grow hot after all are taken run unprepared (as correct, a little slower).

enum HotStatements {
    /// The SQL texts exactly as the storage code passes them to `query`/`execute`.
    static let texts: [String] = [
        RecordTables.sessionSQL,
        MessageQueries.byIdSQL,
        MessageQueries.unreadSQL,
        RecordTables.upsertMessageSQL,
        RecordTables.deleteMentionsSQL,
        RecordTables.upsertChannelSQL,
        RecordTables.insertEventSQL,
        EventStore.committedEventsOneRangeSQL,
    ]
    /// One statement type per slot (a prepared statement's SQL is a property of its type):
    /// the fixed texts first, then the slots for learned ones.
    static let types: [any HotSlot.Type] = [
        Hot0.self, Hot1.self, Hot2.self, Hot3.self, Hot4.self, Hot5.self, Hot6.self, Hot7.self, Hot8.self, Hot9.self,
        Hot10.self, Hot11.self, Hot12.self, Hot13.self, Hot14.self, Hot15.self, Hot16.self, Hot17.self, Hot18.self,
        Hot19.self, Hot20.self, Hot21.self, Hot22.self, Hot23.self,
    ]
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
            guard table.postgresTexts.count < types.count else { return nil }
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

protocol HotSlot: Sendable { static var index: Int { get } }
enum Hot0: HotSlot { static let index = 0 }
enum Hot1: HotSlot { static let index = 1 }
enum Hot2: HotSlot { static let index = 2 }
enum Hot3: HotSlot { static let index = 3 }
enum Hot4: HotSlot { static let index = 4 }
enum Hot5: HotSlot { static let index = 5 }
enum Hot6: HotSlot { static let index = 6 }
enum Hot7: HotSlot { static let index = 7 }
enum Hot8: HotSlot { static let index = 8 }
enum Hot9: HotSlot { static let index = 9 }
enum Hot10: HotSlot { static let index = 10 }
enum Hot11: HotSlot { static let index = 11 }
enum Hot12: HotSlot { static let index = 12 }
enum Hot13: HotSlot { static let index = 13 }
enum Hot14: HotSlot { static let index = 14 }
enum Hot15: HotSlot { static let index = 15 }
enum Hot16: HotSlot { static let index = 16 }
enum Hot17: HotSlot { static let index = 17 }
enum Hot18: HotSlot { static let index = 18 }
enum Hot19: HotSlot { static let index = 19 }
enum Hot20: HotSlot { static let index = 20 }
enum Hot21: HotSlot { static let index = 21 }
enum Hot22: HotSlot { static let index = 22 }
enum Hot23: HotSlot { static let index = 23 }

struct HotStatement<Slot: HotSlot>: PostgresPreparedStatement {
    typealias Row = SQLRow
    static var name: String { "parley_hot_\(Slot.index)" }
    static var sql: String { HotStatements.postgresText(Slot.index) }
    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> SQLRow { try PostgresValues.decode(row) }
}
