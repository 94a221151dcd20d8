/// The polls of one request (`PollRecords`): their options, votes and tombstones, written as
/// they change and read by the queries of PollQueries.swift.
final class PollStore: PollRecords {
    private let tx: RequestTransaction
    private var db: any SQLSession { get throws { try tx.db } }

    init(_ tx: RequestTransaction) { self.tx = tx }

    func allocatePollId() async throws -> Int64 {
        try await tx.takeId(.poll)
    }

    func save(_ p: PollRecord) async throws {
        try await PollQueries.put(p, db)
    }

    func pollRecord(_ id: Int64) async throws -> PollRecord? {
        try await PollQueries.poll(db, id: id)
    }

    func pollRecords(_ ids: [Int64]) async throws -> [Int64: PollRecord] {
        try await PollQueries.polls(db, ids: ids)
    }

    func touch(_ poll: inout PollRecord, _ now: Int64) {
        poll.changeSeq = tx.nextSeq()
        poll.changedAt = now
    }

    func deletePoll(_ p: PollRecord, at now: Int64) async throws {
        let t = PollTombstoneRecord(pollId: p.id, channelUrl: p.channelUrl, deletedAt: now, seq: tx.nextSeq())
        try await PollQueries.delete(p, tombstone: t, db)
    }

    func purgePolls(of url: String) async throws {
        try await PollQueries.deleteChannelPolls(db, channel: url)
    }

    func pollTallies(_ ids: [Int64]) async throws -> [Int64: PollTally] {
        try await PollQueries.tallies(db, polls: ids)
    }

    func pollVotes(_ ids: [Int64], of userId: String) async throws -> [Int64: [Int64]] {
        try await PollQueries.votes(db, polls: ids, user: userId)
    }

    func pollVotesByUser(_ id: Int64) async throws -> [String: [Int64]] {
        try await PollQueries.votesByUser(db, poll: id)
    }

    func setPollVotes(_ id: Int64, user: String, options: [Int64], at now: Int64) async throws {
        try await PollQueries.setVotes(db, poll: id, user: user, options: options, at: now)
    }

    func pollPage(channel: String, before: Int64?, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord] {
        try await PollQueries.page(db, channel: channel, before: before, visibleAfter: offset, limit: limit)
    }

    func pollChanges(channel: String, after start: Sync.Start, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord] {
        try await PollQueries.changes(db, channel: channel, after: start, visibleAfter: offset, limit: limit)
    }

    func pollTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [PollTombstoneRecord] {
        try await PollQueries.tombstones(db, channel: channel, after: start, limit: limit)
    }

    func pollVoters(_ id: Int64, option: Int64, after: String?, limit: Int) async throws -> [String] {
        try await PollQueries.voters(db, poll: id, option: option, after: after, limit: limit)
    }
}
