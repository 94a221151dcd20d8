/// The messages, their tombstones and files of one request (`MessageRecords`). Messages are
/// not kept in memory: they are written as they change (RecordTables) and read by the
/// queries of MessageQueries.swift and SearchQueries.swift. A new message's id and creation
/// time come from the counters on SQLite, from a sequence and the channel's newest on
/// PostgreSQL.
final class MessageStore: MessageRecords {
    private let tx: RequestTransaction
    private let channels: ChannelStore
    private var shared: SharedState { tx.shared }
    private var db: any SQLSession { get throws { try tx.db } }
    /// The largest upload accepted, in bytes.
    var uploadLimit: Int { shared.uploadLimit }

    /// The message ids this request took and has not stored yet: stored first, they are new rows.
    private var unstoredIds: Set<Int64> = []

    init(_ tx: RequestTransaction, channels: ChannelStore) {
        self.tx = tx
        self.channels = channels
    }

    func save(_ m: MessageRecord) async throws {
        channels.messagesChanged(in: m.channelUrl)
        // An id this request took was not stored before it.
        let isNew = unstoredIds.contains(m.id)
        try await RecordTables.putMessage(m, isNew: isNew, db)
        unstoredIds.remove(m.id)
        channels.messageStored(m)
    }

    func messageRecord(_ id: Int64) async throws -> MessageRecord? {
        try await MessageQueries.message(db, id: id)
    }

    /// Messages by id (those that exist).
    func messages(_ ids: [Int64]) async throws -> [Int64: MessageRecord] {
        try await MessageQueries.messages(db, ids: ids)
    }

    func deleteMessage(_ m: MessageRecord, at now: Int64) async throws {
        channels.messagesChanged(in: m.channelUrl)
        try await RecordTables.deleteMessage(m.id, db)
        let t = MessageTombstoneRecord(messageId: m.id, channelUrl: m.channelUrl, deletedAt: now, seq: tx.nextSeq(),
                                       senderId: m.senderId ?? "", reqId: m.reqId)
        try await RecordTables.putMessageTombstone(t, db)
    }

    /// Drops a deleted channel's messages without tombstones (the channel tombstone covers them).
    func purgeMessages(of url: String) async throws {
        try await MessageQueries.deleteChannelMessages(db, channel: url)
    }

    /// A new message's id and creation time, taken together (`WriterRules.takeMessageNumbers`):
    /// id order is time order.
    func takeMessageNumbers(in channel: String, at now: Int64) async throws -> (id: Int64, createdAt: Int64) {
        tx.willTakeNumber()
        let numbers = try await tx.rules.takeMessageNumbers(in: channel, at: now, tx, channels: channels)
        unstoredIds.insert(numbers.id)
        return numbers
    }

    func lastMessageTs(in channel: String) -> Int64 {
        tx.rules.lastMessageTs(in: channel, tx, channels: channels)
    }

    func touch(_ message: inout MessageRecord, _ now: Int64) {
        message.changeSeq = tx.nextSeq()
        message.changedAt = now
    }

    // MARK: queries

    func earlierSend(channel: String, sender: String?, requestId: String) async throws -> EarlierSend? {
        // Used once: what the request writes afterwards is not in it.
        if let prefetched = tx.prefetchedEarlierSend {
            tx.prefetchedEarlierSend = nil
            if prefetched.key == EarlierSendKey(channel: channel, sender: sender ?? "", requestId: requestId) { return prefetched.found }
        }
        return try await MessageQueries.earlierSend(db, channel: channel, sender: sender, requestId: requestId)
    }

    func messagePage(_ base: SQLCondition, _ bounds: [KeyBound], descending: Bool, limit: Int) async throws -> [MessageRecord] {
        try await MessageQueries.page(db, base, bounds, descending: descending, limit: limit)
    }

    func messageCount(_ base: SQLCondition, _ bounds: [KeyBound]) async throws -> Int64 {
        try await MessageQueries.count(db, base, bounds)
    }

    func messageChanges(_ base: SQLCondition, after start: Sync.Start, visibleAfter offset: Int64?,
                        limit: Int) async throws -> [MessageRecord] {
        try await MessageQueries.changes(db, base, after: start, visibleAfter: offset, limit: limit)
    }

    func messageTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [MessageTombstoneRecord] {
        try await MessageQueries.tombstones(db, channel: channel, after: start, limit: limit)
    }

    func replies(to parent: Int64) async throws -> [MessageRecord] {
        try await MessageQueries.replies(db, parent: parent)
    }

    func newestMessageTs(_ url: String) async throws -> Int64 {
        try await MessageQueries.newestCreatedAt(db, channel: url)
    }

    func lastCountableMessage(channel url: String) async throws -> MessageRecord? {
        try await MessageQueries.lastCountable(db, channel: url)
    }

    func searchMessages(_ q: MessageSearch) async throws -> [SearchHit] {
        let found = try await SearchQueries.search(q, db)
        let records = try await MessageQueries.messages(db, ids: found.map(\.id))
        // A hit is in the index only while its row is in the same snapshot: none is missing.
        return found.compactMap { hit in records[hit.id].map { SearchHit(message: $0, score: hit.score) } }
    }

    // MARK: files

    func store(_ f: FileRecord, bytes: [UInt8]) async throws {
        try await RecordTables.putFile(f, bytes: bytes, db)
    }

    func file(_ id: String) async throws -> FileRecord? {
        try await RecordTables.file(id, db)
    }

    func fileBytes(_ id: String) async throws -> [UInt8]? {
        try await RecordTables.fileBytes(id, db)
    }

    func deleteFile(_ id: String) async throws {
        try await RecordTables.deleteFile(id, db)
    }
}
