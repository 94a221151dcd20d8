import Foundation

// Channels (whole, with members and last message) and users as last committed, kept
// between requests so that a request does not read them again table by table. Every entry
// carries the row's `version`, which each write of the channel or user moves (the upserts
// of Storage/RecordTables.swift add one), and a channel entry also the `change_seq` of its
// last message (every change of a message moves it). A request uses an entry only after
// one query has found the same version (and last message change) in its own transaction:
// the cache can be behind, never wrong.
//
// On SQLite users can skip that query: every transaction that writes users moves one
// counter (`users_written`), which the one writer knows exactly and a reader reads in its
// snapshot; an entry found current at the counter's value stays current until the counter
// moves. On PostgreSQL, whose writers of different channels run side by side, every use checks.
//
// That holds while the writers of one channel are serialized (SQLite's write lock, the
// channel's lock on PostgreSQL): a request writes the whole channel it loaded, and stores it here under the version
// its write returned. Readers store what they read, beside the writer: an entry older than
// the one kept is not stored, and one that went stale meanwhile fails the version check.
//
// Bound: `capacity` entries of each kind at most, in two generations: entries are added to
// the young one; when it is full it becomes the old one and the previous old one is
// dropped; a hit in the old generation moves the entry back to the young one. Requests run
// concurrently: every access takes the cache's mutex.

struct CachedChannel {
    var version: Int64
    var channel: ChannelRecord
    var lastMessage: MessageRecord?
    /// The last message's `change_seq`, -1 without one.
    var lastMessageSeq: Int64
    /// PostgreSQL: every member row numbered up to here is in `channel` as stored, so a load
    /// from this copy reads only the rows numbered above (ChannelQueries.swift, "Members
    /// written since a copy"); -1: unknown, the next load reads every member.
    var memberMark: Int64 = -1
}

struct CachedUser {
    var version: Int64
    var user: UserRecord
    /// The `users_written` counter (Counters.usersWritten) of a transaction in which this
    /// entry was current (a writer's, or a reader's that read the counter in its snapshot),
    /// -1 if unknown. While the counter has not moved since, no user was written and the
    /// entry needs no version check.
    var currentAt: Int64 = -1
}

/// A map bounded to `capacity` entries that keeps the recently used ones.
struct Generations<Key: Hashable, Value> {
    private var young: [Key: Value] = [:]
    private var old: [Key: Value] = [:]
    private let half: Int

    init(capacity: Int) { half = max(1, capacity / 2) }

    mutating func get(_ key: Key) -> Value? {
        if let v = young[key] { return v }
        guard let v = old.removeValue(forKey: key) else { return nil }
        put(key, v)
        return v
    }

    /// Without moving the entry (a look, not a use).
    func peek(_ key: Key) -> Value? { young[key] ?? old[key] }

    mutating func put(_ key: Key, _ value: Value) {
        old.removeValue(forKey: key)
        if young[key] == nil && young.count >= half {
            old = young
            young = [:]
        }
        young[key] = value
    }

    mutating func remove(_ key: Key) {
        young.removeValue(forKey: key)
        old.removeValue(forKey: key)
    }

    mutating func removeAll() {
        young = [:]
        old = [:]
    }
}

final class RecordCache: @unchecked Sendable {
    private let mutex = NSLock()
    private var channels: Generations<String, CachedChannel>
    private var users: Generations<String, CachedUser>

    init(channels channelCapacity: Int, users userCapacity: Int) {
        channels = Generations(capacity: channelCapacity)
        users = Generations(capacity: userCapacity)
    }

    func channel(_ url: String) -> CachedChannel? { mutex.withLock { channels.get(url) } }
    func user(_ id: String) -> CachedUser? { mutex.withLock { users.get(id) } }

    /// Keeps what a transaction read, unless a newer version is kept already, or what the
    /// writer committed (`written`: the newest there is).
    func store(_ entry: CachedChannel, written: Bool = false) {
        mutex.withLock {
            if !written, let kept = channels.peek(entry.channel.url), kept.version > entry.version { return }
            channels.put(entry.channel.url, entry)
        }
    }

    func store(_ entry: CachedUser, written: Bool = false) {
        mutex.withLock {
            if !written, let kept = users.peek(entry.user.userId), kept.version > entry.version { return }
            users.put(entry.user.userId, entry)
        }
    }

    func forgetChannel(_ url: String) { mutex.withLock { channels.remove(url) } }
    func forgetUser(_ id: String) { mutex.withLock { users.remove(id) } }
    /// Another process wrote users without moving `users_written` (SQLiteDatabase's
    /// `afterOtherProcessCommits`): no entry can be trusted on the counter.
    func forgetUsers() { mutex.withLock { users.removeAll() } }
}
