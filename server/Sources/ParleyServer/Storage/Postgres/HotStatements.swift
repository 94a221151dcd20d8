import PostgresNIO

// The statements that run on every request or every message, prepared once per
// connection. PostgresNIO prepares a PostgresPreparedStatement by name on a connection the
// first time it runs there and reuses it afterwards; every other statement is parsed and
// planned each time it runs (an unnamed statement).

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
    ]
    static let slots: [String: Int] = Dictionary(texts.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
    static let postgresTexts: [String] = texts.map { SQLScanner.numberingPlaceholders(in: $0).sql }
    /// One statement type per text (a prepared statement's SQL is a property of its type).
    static let types: [any HotSlot.Type] = [Hot0.self, Hot1.self, Hot2.self, Hot3.self, Hot4.self, Hot5.self, Hot6.self]
}

protocol HotSlot: Sendable { static var index: Int { get } }
enum Hot0: HotSlot { static let index = 0 }
enum Hot1: HotSlot { static let index = 1 }
enum Hot2: HotSlot { static let index = 2 }
enum Hot3: HotSlot { static let index = 3 }
enum Hot4: HotSlot { static let index = 4 }
enum Hot5: HotSlot { static let index = 5 }
enum Hot6: HotSlot { static let index = 6 }

struct HotStatement<Slot: HotSlot>: PostgresPreparedStatement {
    typealias Row = SQLRow
    static var name: String { "parley_hot_\(Slot.index)" }
    static var sql: String { HotStatements.postgresTexts[Slot.index] }
    let bindings: PostgresBindings

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> SQLRow { try PostgresValues.decode(row) }
}
