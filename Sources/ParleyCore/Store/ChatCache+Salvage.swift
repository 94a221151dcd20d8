// Salvaging a damaged cache file: before the fresh file takes over, the unsent messages
// (local messages and their outbox requests) are read from the old one, row by row, and
// whatever reads back whole is carried over. The rest of the cache can be fetched again
// from the server; a message that was never sent cannot, so what is lost is told. Then the
// outbox journal (`OutboxJournal`, kept beside the file) gives back every unsent message the
// file did not: when the journal was read to its end, the unsent set is known even if the
// file could not be read at all.

/// An unsent message a damaged file held that could not be carried over.
public struct LostMessage: Sendable, Hashable {
    /// "" when even this could not be read.
    public var reqID: String
    public var channelURL: String
}

/// What replacing a damaged cache file kept of its unsent messages.
public struct CacheSalvage: Sendable, Hashable {
    /// Where the damaged file was moved.
    public var movedTo: String
    /// Why it was replaced.
    public var reason: String
    /// Unsent messages carried over (pending or failed, with their outbox requests), by req_id.
    public var restoredReqIDs: [String]
    /// Unsent messages seen but not readable whole.
    public var lost: [LostMessage]
    /// Set when a table of unsent messages could not be read to its end: more may be lost
    /// than `lost` lists, unless the outbox journal was read whole.
    public var unreadable: String?
    /// Unsent messages restored from the outbox journal (the file did not give them back);
    /// also in `restoredReqIDs`.
    public var restoredFromJournal: [String] = []
    /// Why the outbox journal could not tell the unsent set (missing, a bad line, a read
    /// error); nil when it was read to its end.
    public var journalUnreadable: String?

    /// More may be lost than `lost` lists: neither the file nor the journal could list
    /// every unsent message.
    public var lostUnknown: Bool { unreadable != nil && journalUnreadable != nil }
}

extension ChatCache {
    func salvageUnsentMessages(from path: String, reason: String) -> CacheSalvage {
        var salvage = CacheSalvage(movedTo: path, reason: reason, restoredReqIDs: [], lost: [], unreadable: nil)
        let locals = SQLiteDatabase.salvageRows(
            path: path, sql: "SELECT req_id, channel_url, created_at, sending_status, error_code, error_message, json FROM local_messages ORDER BY local_id")
        let requests = SQLiteDatabase.salvageRows(
            path: path, sql: """
                SELECT req_id, channel_url, kind, request_json, attempts, retryable, last_error_code, last_error_message
                FROM outbox ORDER BY sequence
                """)
        let problems = [locals.failure.map { "local_messages: \($0)" }, requests.failure.map { "outbox: \($0)" }].compactMap { $0 }
        if !problems.isEmpty { salvage.unreadable = problems.joined(separator: "; ") }
        var requestByReqID: [String: [SQLiteValue]] = [:]
        for row in requests.rows {
            guard let reqID = Self.text(row[0]) else { continue }
            requestByReqID[reqID] = row
        }
        var restoredReqIDs = Set<String>()
        for row in locals.rows {
            let reqID = Self.text(row[0]) ?? ""
            let channelURL = Self.text(row[1]) ?? ""
            let request = requestByReqID[reqID]
            guard !reqID.isEmpty, !channelURL.isEmpty, case .integer(let createdAt) = row[2],
                let status = Self.text(row[3]), status == "pending" || status == "failed",
                case .integer(let errorCode) = row[4], let errorMessage = Self.text(row[5]),
                let json = Self.text(row[6]), Self.isObjectText(json),
                // Every unsent message has its request; without it nothing can send the message.
                let request, Self.text(request[2]) != nil, Self.text(request[3]).map(Self.isObjectText) == true,
                Self.text(request[7]) != nil
            else {
                salvage.lost.append(LostMessage(reqID: reqID, channelURL: channelURL))
                continue
            }
            do throws(ParleyError) {
                try transaction { () throws(ParleyError) in
                    try database.statement("""
                        INSERT INTO local_messages (req_id, channel_url, created_at, sending_status, error_code, error_message, json)
                        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                        """).run([.text(reqID), .text(channelURL), .integer(createdAt), .text(status), .integer(errorCode),
                                  .text(errorMessage), .text(json)])
                    try database.statement("""
                        INSERT INTO outbox (req_id, channel_url, kind, request_json, attempts, retryable, last_error_code,
                                            last_error_message)
                        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                        """).run([.text(reqID), .text(channelURL), .text(Self.text(request[2]) ?? ""), .text(Self.text(request[3]) ?? "{}"),
                                  request[4], request[5], request[6], .text(Self.text(request[7]) ?? "")])
                }
                salvage.restoredReqIDs.append(reqID)
                restoredReqIDs.insert(reqID)
            } catch {
                salvage.lost.append(LostMessage(reqID: reqID, channelURL: channelURL))
            }
        }
        // A request whose local message is gone: the message it would send is unknown.
        for row in requests.rows {
            let reqID = Self.text(row[0]) ?? ""
            if !restoredReqIDs.contains(reqID) && !salvage.lost.contains(where: { $0.reqID == reqID }) {
                salvage.lost.append(LostMessage(reqID: reqID, channelURL: Self.text(row[1]) ?? ""))
            }
        }
        return salvage
    }

    /// Restores the journal's live messages that `salvage` did not carry over from the file:
    /// pending again, with a fresh outbox row (attempts 0; the same req_id, so a message the
    /// server already has is deduped by it).
    func restoreFromJournal(_ contents: OutboxJournal.Contents, into salvage: inout CacheSalvage) {
        salvage.journalUnreadable = contents.failure
        let carried = Set(salvage.restoredReqIDs)
        for record in contents.live where !carried.contains(record.reqID) {
            guard case .object(var fields)? = try? JSONValue.parse(record.messageJSON) else { continue }
            fields["message_id"] = .int(0)
            fields["sending_status"] = .string(LocalSendingStatus.pending.rawValue)
            fields["error_code"] = nil
            fields["error_message"] = nil
            do throws(ParleyError) {
                try transaction { () throws(ParleyError) in
                    try database.statement("""
                        INSERT INTO local_messages (req_id, channel_url, created_at, sending_status, json)
                        VALUES (?1, ?2, ?3, 'pending', ?4)
                        """).run([.text(record.reqID), .text(record.channelURL), .integer(record.createdAt),
                                  .text(JSONValue.object(fields).canonicalText)])
                    try database.statement("INSERT INTO outbox (req_id, channel_url, kind, request_json) VALUES (?1, ?2, ?3, ?4)")
                        .run([.text(record.reqID), .text(record.channelURL), .text(record.kind), .text(record.requestJSON)])
                }
            } catch {
                continue
            }
            salvage.restoredReqIDs.append(record.reqID)
            salvage.restoredFromJournal.append(record.reqID)
            salvage.lost.removeAll { $0.reqID == record.reqID }
        }
    }

    /// A salvaged text column: valid UTF-8, else nil.
    private static func text(_ value: SQLiteValue) -> String? {
        switch value {
        case .text(let text): text
        case .blob(let bytes): String(validating: bytes, as: UTF8.self)
        default: nil
        }
    }

    private static func isObjectText(_ text: String) -> Bool {
        guard case .object? = try? JSONValue.parse(text) else { return false }
        return true
    }
}
