// What the services see of the request they run in. A request keeps its records in stores
// of their concern (Stores/: `UserStore`, `ChannelStore`, `MessageStore`, `PollStore`,
// `ReportStore`, `EventStore` for events and typing, `SettingsStore` for the application's and
// webhooks' settings; `RecordRenderer`, Events/Render.swift), each with its queries beside it,
// over one `RequestTransaction` (its transaction, the numbers it took, what it writes and
// announces at its end). The protocols below are the stores' interfaces; `RequestState`, the
// request, passes each call on to its store (Requests/Forwarding.swift), and each service
// names the protocols it uses (`Channels.Needs`, `Messages.Needs`, `EventStream.Needs`, ...). A
// handler that runs inside a request sees no SQL, transaction, record cache, counters or hub:
// the compiler holds each to what it names. Two entry points are given the `RequestRunner` itself:
// the health check (its own SQL) and the opening of an event stream (the hub's queue and the
// cluster's presence).
//
// The rules that several services share are written once, on these protocols, in the file
// of their concern: membership and channel events in Channels.swift, message visibility and
// send rules in Messages.swift, sessions in Users.swift, unread counting in
// UnreadCounters.swift.

/// Users and their sessions.
protocol UserRecords: AnyObject {
    /// Loads the users not loaded yet this request (one query for all of them).
    func loadUsers<S: Sequence>(_ ids: S) async throws where S.Element == String
    /// A user, or `notFound`.
    func user(_ id: String) async throws -> UserRecord
    func userIfExists(_ id: String) async throws -> UserRecord?
    /// A user loaded this request, as it stands after the request's changes.
    func loadedUser(_ id: String) -> UserRecord?
    func save(_ u: UserRecord)
    func deleteUser(_ id: String)

    func save(_ s: SessionRecord) async throws
    func session(_ token: String) async throws -> SessionRecord?
    func deleteSessions(of userId: String) async throws

    /// Up to `limit` user ids after `after`, in id order, with the filters the query states.
    func userListing(after: String?, ids: Set<String>?, nickname: String?, activeMode: String,
                     metadataKey: String?, metadataValues: [String]?, limit: Int) async throws -> [String]
    /// Unread messages, and channels with unread messages, over the user's joined channels.
    func unreadTotals(of userId: String, customTypes: [String]?, superMode: String) async throws -> (messages: Int64, channels: Int64)
}

/// Channels with their members, restrictions, metadata and counters.
protocol ChannelRecords: AnyObject {
    /// Loads the channels not loaded yet this request, whole.
    func loadChannels(_ urls: [String]) async throws
    /// A channel, or `notFound`.
    func channel(_ url: String) async throws -> ChannelRecord
    func channelIfExists(_ url: String) async throws -> ChannelRecord?
    /// A channel loaded this request, as it stands after the request's changes.
    func loadedChannel(_ url: String) -> ChannelRecord?
    /// The channels the user is a member of (joined or invited), loaded, in URL order.
    func memberChannels(of userId: String) async throws -> [ChannelRecord]
    /// Writes the channel and the members that changed since the request loaded it.
    func save(_ c: ChannelRecord) async throws
    func deleteChannelRecord(_ url: String)
    /// Records that the user's membership ended (channel changelogs report it).
    func addMembershipTombstone(user: String, channel: String, at now: Int64)
    func allocateChannelNumber() async throws -> Int64
    /// A change to the channel itself: channel changelogs list it, `updated_at` moves.
    func touch(_ channel: inout ChannelRecord, _ now: Int64)
    /// A change every member's render shows that is no change to the channel itself.
    func markChanged(_ channel: inout ChannelRecord, _ now: Int64)
    /// A change only one member sees (their read state, hiding, history start).
    func touchMember(_ channel: inout ChannelRecord, _ userId: String, _ now: Int64)

    /// The existing distinct channel of exactly these members and custom type, if any.
    func distinctChannel(members ids: Set<String>, customType: String) async throws -> String?
    /// One batch of a channel listing, in the order's key after `after` (ChannelQueries.listing).
    func channelListing(_ scope: ChannelQueries.Scope, filter: Channels.ListFilter, order: String,
                        metadataOrderKey: String?, after: [JSON]?, limit: Int) async throws -> [String]
    /// The user's channels changed after `start`, in change order.
    func changedChannels(of userId: String, after start: Sync.Start, showEmpty: Bool, showFrozen: Bool,
                         customTypes: [String]?, limit: Int) async throws -> [(url: String, seq: Int64)]
    /// The user's memberships that ended after `start` and were not taken up again.
    func endedMemberships(of userId: String, after start: Sync.Start, limit: Int) async throws -> [MembershipTombstoneRecord]
    /// The channels whose render may show the user.
    func channelURLs(showing userId: String) async throws -> [String]
    /// Self-checks are on (PARLEY_VERIFY_COUNTERS=1): a listing out of order fails.
    var verify: Bool { get }
}

/// Messages, their tombstones and their files.
protocol MessageRecords: AnyObject {
    func save(_ m: MessageRecord) async throws
    func messageRecord(_ id: Int64) async throws -> MessageRecord?
    /// Deletes the message and leaves its tombstone.
    func deleteMessage(_ m: MessageRecord, at now: Int64) async throws
    /// Drops a deleted channel's messages (the channel's tombstone covers them).
    func purgeMessages(of url: String) async throws
    /// A new message's id and creation time, taken together.
    func takeMessageNumbers(in channel: String, at now: Int64) async throws -> (id: Int64, createdAt: Int64)
    /// A change to the message: message changelogs list it.
    func touch(_ message: inout MessageRecord, _ now: Int64)
    /// The earliest creation time a new message of the channel may take: the newest so far,
    /// server-wide on SQLite, the channel's on PostgreSQL (where channels write side by side).
    func lastMessageTs(in channel: String) -> Int64

    /// What became of a send this sender already made with this request id, if any
    /// (idempotent sends).
    func earlierSend(channel: String, sender: String?, requestId: String) async throws -> EarlierSend?
    /// Up to `limit` messages matching `base` within `bounds`, in key order or reversed.
    func messagePage(_ base: SQLCondition, _ bounds: [KeyBound], descending: Bool, limit: Int) async throws -> [MessageRecord]
    func messageCount(_ base: SQLCondition, _ bounds: [KeyBound]) async throws -> Int64
    /// Messages matching `base` changed after `start`, in change order.
    func messageChanges(_ base: SQLCondition, after start: Sync.Start, visibleAfter offset: Int64?,
                        limit: Int) async throws -> [MessageRecord]
    /// Messages of the channel deleted after `start`, in change order.
    func messageTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [MessageTombstoneRecord]
    func replies(to parent: Int64) async throws -> [MessageRecord]
    /// The creation time of the channel's newest message (0: none).
    func newestMessageTs(_ url: String) async throws -> Int64
    /// The channel's newest message that counts as its last message.
    func lastCountableMessage(channel url: String) async throws -> MessageRecord?
    /// One page of the messages a search finds (Services/Search.swift), in its order.
    func searchMessages(_ q: MessageSearch) async throws -> [SearchHit]

    /// The largest upload accepted, in bytes.
    var uploadLimit: Int { get }
    func store(_ f: FileRecord, bytes: [UInt8]) async throws
    func file(_ id: String) async throws -> FileRecord?
    func fileBytes(_ id: String) async throws -> [UInt8]?
    func deleteFile(_ id: String) async throws
}

/// Polls, their options and votes, and the tombstones of deleted polls.
protocol PollRecords: AnyObject {
    func allocatePollId() async throws -> Int64
    /// Writes the poll with its options; options it no longer has go, with their votes.
    func save(_ p: PollRecord) async throws
    func pollRecord(_ id: Int64) async throws -> PollRecord?
    func pollRecords(_ ids: [Int64]) async throws -> [Int64: PollRecord]
    /// A change to the poll (its votes included): poll changelogs list it.
    func touch(_ poll: inout PollRecord, _ now: Int64)
    /// Deletes the poll with its options and votes, and leaves its tombstone.
    func deletePoll(_ p: PollRecord, at now: Int64) async throws
    /// Drops a deleted channel's polls (the channel's tombstone covers them).
    func purgePolls(of url: String) async throws
    func pollTallies(_ ids: [Int64]) async throws -> [Int64: PollTally]
    /// The option ids the user voted for, per poll.
    func pollVotes(_ ids: [Int64], of userId: String) async throws -> [Int64: [Int64]]
    /// Every voter of the poll with their option ids.
    func pollVotesByUser(_ id: Int64) async throws -> [String: [Int64]]
    /// Replaces the user's votes on the poll (an empty list removes them).
    func setPollVotes(_ id: Int64, user: String, options: [Int64], at now: Int64) async throws
    /// Up to `limit` polls of the channel with ids below `before`, newest first, visible after the offset.
    func pollPage(channel: String, before: Int64?, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord]
    /// Polls of the channel changed after `start`, in change order.
    func pollChanges(channel: String, after start: Sync.Start, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord]
    /// Polls of the channel deleted after `start`, in change order.
    func pollTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [PollTombstoneRecord]
    /// Up to `limit` voters of an option after `after`, by user id.
    func pollVoters(_ id: Int64, option: Int64, after: String?, limit: Int) async throws -> [String]
}

/// Reports of messages, channels and users.
protocol ReportRecords: AnyObject {
    func allocateReportId() async throws -> Int64
    func save(_ r: ReportRecord) async throws
    /// Up to `limit` reports after id `after`, in id order.
    func reports(after: Int64, limit: Int) async throws -> [ReportRecord]
    func hasReports() async throws -> Bool
}

/// What a request tells the open event streams once it commits (the hub delivers it).
protocol EventEmitter: AnyObject {
    /// Records an event for `recipients`; it is stored with the request's changes.
    func emit(_ category: String, channelUrl: String, to recipients: Set<String>, fields: [(String, JSON?)], now: Int64)
    /// Ends the user's open streams once the request commits.
    func endStreams(of userId: String, message: String)
    /// The user started (`since`: when) or stopped (nil) typing in the channel; stored with
    /// the request's changes, so every server on the database sees the same typers.
    func setTyping(_ userId: String, in url: String, since: Int64?)
    /// Who is typing in the channel (as this request leaves it): those who started in the
    /// last 10 seconds and did not stop, by id. Forgets the others.
    func typers(in url: String, now: Int64) async throws -> [String]
}

/// The stored event log and who is online, as the event stream replays and opens it.
protocol EventLog: AnyObject {
    /// The retained events after `last` up to `through` addressed to `userId`, oldest first.
    func events(after last: Int64, through: Int64, for userId: String) async throws -> [StoredEvent]
    /// Where the retained events begin: events up to here were pruned.
    func prunedThrough() async throws -> Int64
    /// One replayed event as the user's stream sends it (Render.swift).
    func replayFrame(_ event: StoredEvent, data parsed: JSONObject?, for userId: String, now: Int64,
                     plan: inout ReplayPlan) -> String
    /// The user has a stream open on this server or another one on the database.
    func isOnline(_ userId: String) -> Bool
}

/// Where the change sequence stands, as a changelog's "now" (PROTOCOL.md §8.1).
protocol ChangeSequence: AnyObject {
    func currentSeq() async throws -> Int64
}

/// The records as the protocol shows them (Render.swift), from what the request loaded.
protocol Rendering: AnyObject {
    /// Renders messages, loading the users and parents they show.
    func render(_ messages: [MessageRecord], _ view: MessageView) async throws -> [JSON]
    func render(_ message: MessageRecord, _ view: MessageView) async throws -> JSON
    func basicUser(_ userId: String, in channel: ChannelRecord?) -> JSON
    func userJSON(_ u: UserRecord, unread: (messages: Int64, channels: Int64)?, privateFields: Bool) -> JSON
    func memberJSON(_ channel: ChannelRecord, _ m: MemberRecord, now: Int64) -> JSON
    func channelJSON(_ c: ChannelRecord, _ view: ChannelView, now: Int64) -> JSON
    /// The channel as an event carries it (PROTOCOL.md §9.1).
    func eventChannelJSON(_ c: ChannelRecord, now: Int64) -> JSON
    /// The channel as a webhook carries it (members, metadata and metacounters; no viewer).
    func webhookChannelJSON(_ c: ChannelRecord, now: Int64) -> JSON
    func threadInfoJSON(_ m: MessageRecord) -> JSON
    /// Whether the member's history start lets them see the message.
    func isVisible(_ m: MessageRecord, to member: MemberRecord?) -> Bool
    func unreadCounts(_ channel: ChannelRecord, _ userId: String) -> (messages: Int64, mentions: Int64)
    /// The channel's last message as `userId` sees it (nil: as everyone does).
    func lastMessage(_ channel: ChannelRecord, for userId: String?) -> MessageRecord?
}

extension Rendering {
    func basicUser(_ userId: String) -> JSON { basicUser(userId, in: nil) }
    func userJSON(_ u: UserRecord) -> JSON { userJSON(u, unread: nil, privateFields: true) }
    func userJSON(_ u: UserRecord, privateFields: Bool) -> JSON { userJSON(u, unread: nil, privateFields: privateFields) }
}
