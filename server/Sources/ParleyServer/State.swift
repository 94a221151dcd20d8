import Foundation

func nowMillis() -> Int64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}

func randomHex(_ bytes: Int) -> String {
    var g = SystemRandomNumberGenerator()
    var out = ""
    for _ in 0..<bytes {
        let b = UInt8.random(in: 0...255, using: &g)
        out += String(b >> 4, radix: 16) + String(b & 15, radix: 16)
    }
    return out
}

/// A live SSE subscriber: the state lock is held whenever it is fed, so it receives
/// events in log order, replay first.
final class Subscriber: @unchecked Sendable {
    let id: Int
    let userId: String
    let continuation: AsyncStream<String>.Continuation
    init(id: Int, userId: String, continuation: AsyncStream<String>.Continuation) {
        self.id = id
        self.userId = userId
        self.continuation = continuation
    }

    /// Ends the stream with an `error` event (PROTOCOL.md §9): its credential no longer holds.
    func end(code: Int, message: String) {
        let data = JSON.obj([("code", .int(Int64(code))), ("message", .string(message))]).serialized()
        continuation.yield("event: error\ndata: \(data)\n\n")
        continuation.finish()
    }
}

/// The whole server state, kept in memory and written through to storage. Only touched
/// while `Service` holds its lock. A request's writes go to `pending` and are committed
/// in one storage transaction before the response is sent.
final class ServerState {
    let storage: any ChatStorage
    let retention: Int
    let encoder = JSONEncoder()

    var users: [String: UserRecord] = [:]
    var sessions: [String: SessionRecord] = [:]
    var channels: [String: ChannelRecord] = [:]
    var messages: [Int64: MessageRecord] = [:]
    /// Per channel: stored message ids ascending; ids are allocated in created_at order,
    /// so this is also (created_at, message_id) order.
    var channelMessages: [String: [Int64]] = [:]
    var messageTombstones: [String: [MessageTombstoneRecord]] = [:]
    var membershipTombstones: [String: [String: MembershipTombstoneRecord]] = [:]
    var files: [String: FileRecord] = [:]
    var reports: [Int64: ReportRecord] = [:]
    var reqIndex: [String: Int64] = [:]
    var events: [StoredEvent] = []
    var seq: Int64 = 0
    var prunedThrough: Int64 = 0
    var nextMessageId: Int64 = 1
    var nextReportId: Int64 = 1
    var lastMessageTs: Int64 = 0
    var channelCounter: Int64 = 0

    // Transient.
    var typing: [String: [String: Int64]] = [:]
    var subscribers: [Int: Subscriber] = [:] {
        // Kept beside the streams so `isOnline` (asked for every member of every render) is a
        // lookup; streams open and close rarely, so recounting them then is cheap.
        didSet { openStreams = subscribers.values.reduce(into: [:]) { $0[$1.userId, default: 0] += 1 } }
    }
    /// Open event streams per user, derived from `subscribers`.
    private(set) var openStreams: [String: Int] = [:]
    var nextSubscriberId = 1
    var publicBaseURL = ""
    var filesDirectory = ""
    var uploadLimit = 26_214_400

    var pending = StorageBatch()
    var pendingFanout: [StoredEvent] = []

    init(storage: any ChatStorage, retention: Int) throws {
        self.storage = storage
        self.retention = max(1, retention)
        encoder.outputFormatting = [.sortedKeys]
        try reload()
    }

    /// Rebuild memory from storage (start-up, and after a failed request left memory dirty).
    func reload() throws {
        let snapshot = try storage.load()
        let decoder = JSONDecoder()
        func decode<T: Decodable>(_ kind: RecordKind, _ type: T.Type) -> [T] {
            (snapshot.records[kind] ?? []).compactMap { try? decoder.decode(T.self, from: Data($0.body.utf8)) }
        }
        users = Dictionary(decode(.user, UserRecord.self).map { ($0.userId, $0) }, uniquingKeysWith: { a, _ in a })
        sessions = Dictionary(decode(.session, SessionRecord.self).map { ($0.token, $0) }, uniquingKeysWith: { a, _ in a })
        channels = Dictionary(decode(.channel, ChannelRecord.self).map { ($0.url, $0) }, uniquingKeysWith: { a, _ in a })
        // Members are records of their own. A database of an earlier version has them inside
        // the channel records instead (and no member records): those channels are rewritten
        // in the current layout below, once, in one transaction.
        let storedChannelKeys = Set((snapshot.records[.channel] ?? []).map(\.key))
        var migrate = Set(channels.values.filter { !$0.members.isEmpty }.map(\.url))
        var migration = StorageBatch()
        for (key, body) in snapshot.records[.member] ?? [] {
            let cut = key.firstIndex(of: memberKeySeparator) ?? key.endIndex
            let url = String(key[..<cut])
            guard channels[url] != nil, let m = try? decoder.decode(MemberRecord.self, from: Data(body.utf8)) else {
                // Its channel is gone: dropped. (A channel record that no longer decodes keeps
                // its members, as it is kept itself.)
                if !storedChannelKeys.contains(url) { migration.deletes[.member, default: []].insert(key) }
                continue
            }
            channels[url]!.members[m.userId] = m
            if key != memberRecordKey(url, m.userId) {  // not written by this server: re-keyed
                migration.deletes[.member, default: []].insert(key)
                migrate.insert(url)
            }
        }
        for url in migrate.sorted() {
            guard let c = channels[url] else { continue }
            var record = c
            record.members = [:]
            migration.puts[.channel, default: [:]][url] = encode(record)
            for (id, m) in c.members { migration.puts[.member, default: [:]][memberRecordKey(url, id)] = encode(m) }
        }
        try storage.commit(migration)
        messages = [:]
        channelMessages = [:]
        reqIndex = [:]
        for m in decode(.message, MessageRecord.self).sorted(by: { $0.id < $1.id }) {
            messages[m.id] = m
            channelMessages[m.channelUrl, default: []].append(m.id)
            if !m.reqId.isEmpty { reqIndex[reqKey(m.channelUrl, m.senderId ?? "", m.reqId)] = m.id }
            lastMessageTs = max(lastMessageTs, m.createdAt)
        }
        messageTombstones = [:]
        for t in decode(.messageTombstone, MessageTombstoneRecord.self).sorted(by: { $0.seq < $1.seq }) {
            messageTombstones[t.channelUrl, default: []].append(t)
        }
        membershipTombstones = [:]
        for t in decode(.membershipTombstone, MembershipTombstoneRecord.self) {
            membershipTombstones[t.userId, default: [:]][t.channelUrl] = t
        }
        files = Dictionary(decode(.file, FileRecord.self).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        reports = Dictionary(decode(.report, ReportRecord.self).map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        events = snapshot.events
        seq = snapshot.counters["seq"] ?? 0
        prunedThrough = snapshot.counters["pruned_through"] ?? 0
        nextMessageId = max(snapshot.counters["next_message_id"] ?? 1, (messages.keys.max() ?? 0) + 1)
        nextReportId = snapshot.counters["next_report_id"] ?? 1
        channelCounter = snapshot.counters["channel_counter"] ?? 0
        lastMessageTs = max(lastMessageTs, snapshot.counters["last_message_ts"] ?? 0)
        pending = StorageBatch()
        pendingFanout = []
    }

    // MARK: write-through

    private func encode<T: Encodable>(_ value: T) -> String {
        // Encoding plain records cannot fail; an empty document would only lose that record.
        (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    private func put<T: Encodable>(_ kind: RecordKind, _ key: String, _ value: T) {
        pending.puts[kind, default: [:]][key] = encode(value)
        pending.deletes[kind]?.remove(key)
    }

    private func remove(_ kind: RecordKind, _ key: String) {
        pending.puts[kind]?.removeValue(forKey: key)
        pending.deletes[kind, default: []].insert(key)
    }

    func save(_ u: UserRecord) { users[u.userId] = u; put(.user, u.userId, u) }
    /// Ends every open event stream of the user (deactivated or deleted): their session keys
    /// no longer authenticate, so what the streams would still deliver is not theirs to see.
    func endStreams(of userId: String, message: String) {
        for (id, subscriber) in subscribers where subscriber.userId == userId {
            subscribers.removeValue(forKey: id)
            subscriber.end(code: 400301, message: message)
        }
    }

    func deleteUser(_ id: String) { users.removeValue(forKey: id); remove(.user, id) }
    func save(_ s: SessionRecord) { sessions[s.token] = s; put(.session, s.token, s) }
    func deleteSession(_ token: String) { sessions.removeValue(forKey: token); remove(.session, token) }
    /// Writes the channel record (without its members) and the member records that differ
    /// from the channel's previous state in memory, which is what storage holds once the
    /// pending batch is committed: a change to one member writes one member record.
    func save(_ c: ChannelRecord) {
        let previous = channels.updateValue(c, forKey: c.url)?.members ?? [:]
        var record = c
        record.members = [:]
        put(.channel, c.url, record)
        saveMembers(of: c.url, from: previous, to: c.members)
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
                for (id, m) in changed { put(.member, memberRecordKey(url, id), m) }
                return
            }
        }
        for (id, m) in current where previous[id] != m { put(.member, memberRecordKey(url, id), m) }
        for id in previous.keys where current[id] == nil { remove(.member, memberRecordKey(url, id)) }
    }

    func deleteChannelRecord(_ url: String) {
        let members = channels.removeValue(forKey: url)?.members ?? [:]
        remove(.channel, url)
        for id in members.keys { remove(.member, memberRecordKey(url, id)) }
    }
    func save(_ f: FileRecord) { files[f.id] = f; put(.file, f.id, f) }
    func save(_ r: ReportRecord) { reports[r.id] = r; put(.report, String(r.id), r) }

    func save(_ m: MessageRecord) {
        if messages[m.id] == nil {
            channelMessages[m.channelUrl, default: []].append(m.id)
            if !m.reqId.isEmpty { reqIndex[reqKey(m.channelUrl, m.senderId ?? "", m.reqId)] = m.id }
        }
        messages[m.id] = m
        put(.message, String(m.id), m)
    }

    func deleteMessage(_ m: MessageRecord, at now: Int64) {
        messages.removeValue(forKey: m.id)
        if var ids = channelMessages[m.channelUrl], let i = binarySearch(ids, m.id) {
            ids.remove(at: i)
            channelMessages[m.channelUrl] = ids
        }
        if !m.reqId.isEmpty { reqIndex.removeValue(forKey: reqKey(m.channelUrl, m.senderId ?? "", m.reqId)) }
        remove(.message, String(m.id))
        let t = MessageTombstoneRecord(messageId: m.id, channelUrl: m.channelUrl, deletedAt: now, seq: nextSeq())
        messageTombstones[m.channelUrl, default: []].append(t)
        put(.messageTombstone, String(m.id), t)
    }

    func addMembershipTombstone(user: String, channel: String, at now: Int64) {
        let t = MembershipTombstoneRecord(userId: user, channelUrl: channel, at: now, seq: nextSeq())
        membershipTombstones[user, default: [:]][channel] = t
        put(.membershipTombstone, user + "\u{1}" + channel, t)
    }

    func reqKey(_ channel: String, _ sender: String, _ reqId: String) -> String {
        channel + "\u{1}" + sender + "\u{1}" + reqId
    }

    // MARK: sequences

    func nextSeq() -> Int64 {
        seq += 1
        pending.counters["seq"] = seq
        return seq
    }

    func allocateMessageId() -> Int64 {
        let id = nextMessageId
        nextMessageId += 1
        pending.counters["next_message_id"] = nextMessageId
        return id
    }

    func allocateReportId() -> Int64 {
        let id = nextReportId
        nextReportId += 1
        pending.counters["next_report_id"] = nextReportId
        return id
    }

    func allocateChannelNumber() -> Int64 {
        channelCounter += 1
        pending.counters["channel_counter"] = channelCounter
        return channelCounter
    }

    /// Message creation times never go backwards, so id order is time order.
    func messageTimestamp(_ now: Int64) -> Int64 {
        lastMessageTs = max(lastMessageTs, now)
        pending.counters["last_message_ts"] = lastMessageTs
        return lastMessageTs
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
        channel.changeSeq = nextSeq()
        channel.changedAt = now
    }

    /// Marks a change visible only to one member (read state, hide, offset).
    func touchMember(_ channel: inout ChannelRecord, _ userId: String, _ now: Int64) {
        guard channel.members[userId] != nil else { return }
        channel.members[userId]!.changeSeq = nextSeq()
        channel.members[userId]!.changedAt = now
    }

    func touch(_ message: inout MessageRecord, _ now: Int64) {
        message.changeSeq = nextSeq()
        message.changedAt = now
    }

    // MARK: events

    func emit(_ category: String, channelUrl: String, to recipients: Set<String>, fields: [(String, JSON?)], now: Int64) {
        guard !recipients.isEmpty else { return }
        let id = nextSeq()
        var all: [(String, JSON?)] = [
            ("category", .string(category)), ("ts", .int(now)),
            ("channel_url", .string(channelUrl)), ("channel_type", "group"),
        ]
        all.append(contentsOf: fields)
        let event = StoredEvent(id: id, createdAt: now, category: category,
                                recipients: recipients.sorted(), data: JSON.obj(all).serialized())
        events.append(event)
        pending.events.append(event)
        pendingFanout.append(event)
        if events.count > retention {
            let drop = events.count - retention
            prunedThrough = events[drop - 1].id
            events.removeFirst(drop)
            pending.pruneEventsThrough = prunedThrough
            pending.counters["pruned_through"] = prunedThrough
        }
    }

    /// Commit what the current request changed, then feed live subscribers.
    func commitPending() throws {
        let batch = pending
        let fanout = pendingFanout
        pending = StorageBatch()
        pendingFanout = []
        try storage.commit(batch)
        for event in fanout { deliver(event) }
    }

    func deliver(_ event: StoredEvent) {
        let recipients = Set(event.recipients)
        let targets = subscribers.values.filter { recipients.contains($0.userId) }
        guard !targets.isEmpty else { return }
        let frame = framer(event, now: nowMillis())
        var frames: [String: String] = [:]  // one rendering per user, whatever their number of streams
        for sub in targets {
            let text = frames[sub.userId] ?? frame(sub.userId)
            frames[sub.userId] = text
            sub.continuation.yield(text)
        }
    }
}

func binarySearch(_ ids: [Int64], _ id: Int64) -> Int? {
    var lo = 0, hi = ids.count
    while lo < hi {
        let mid = (lo + hi) / 2
        if ids[mid] < id { lo = mid + 1 } else { hi = mid }
    }
    return lo < ids.count && ids[lo] == id ? lo : nil
}

/// Index of the first id whose key is greater than (ts, id) in a channel's ascending list.
func lowerBound(_ ids: [Int64], where isBefore: (Int64) -> Bool) -> Int {
    var lo = 0, hi = ids.count
    while lo < hi {
        let mid = (lo + hi) / 2
        if isBefore(ids[mid]) { lo = mid + 1 } else { hi = mid }
    }
    return lo
}

/// Serializes all access to the state; every request runs to completion under it.
final class Service: @unchecked Sendable {
    private let lock = NSLock()
    private let state: ServerState

    init(state: ServerState) { self.state = state }

    func run<T>(_ body: (ServerState) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        let result: T
        do {
            result = try body(state)
        } catch {
            // Memory may hold half of a failed request: rebuild it from storage.
            if !state.pending.isEmpty { try? state.reload() }
            throw error
        }
        do {
            try state.commitPending()
        } catch {
            try? state.reload()
            throw APIError.internal("storage commit failed: \(error)")
        }
        return result
    }
}
