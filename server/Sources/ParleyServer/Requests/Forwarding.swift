// What the services see of a request (Services/Interfaces.swift): each protocol is the
// interface of one store of the request's current attempt (Stores/), and `RequestState`
// passes each call to it.

extension RequestState: UserRecords {
    func loadUsers<S: Sequence>(_ ids: S) async throws where S.Element == String { try await stores.users.loadUsers(ids) }
    func user(_ id: String) async throws -> UserRecord { try await stores.users.user(id) }
    func userIfExists(_ id: String) async throws -> UserRecord? { try await stores.users.userIfExists(id) }
    func loadedUser(_ id: String) -> UserRecord? { stores.users.loadedUser(id) }
    func save(_ u: UserRecord) { stores.users.save(u) }
    func deleteUser(_ id: String) { stores.users.deleteUser(id) }
    func save(_ s: SessionRecord) async throws { try await stores.users.save(s) }
    func session(_ token: String) async throws -> SessionRecord? { try await stores.users.session(token) }
    func deleteSessions(of userId: String) async throws { try await stores.users.deleteSessions(of: userId) }
    func userListing(after: String?, ids: Set<String>?, nickname: String?, activeMode: String,
                     metadataKey: String?, metadataValues: [String]?, limit: Int) async throws -> [String] {
        try await stores.users.userListing(after: after, ids: ids, nickname: nickname, activeMode: activeMode,
                                           metadataKey: metadataKey, metadataValues: metadataValues, limit: limit)
    }
    func unreadTotals(of userId: String, customTypes: [String]?, superMode: String) async throws -> (messages: Int64, channels: Int64) {
        try await stores.users.unreadTotals(of: userId, customTypes: customTypes, superMode: superMode)
    }
}

extension RequestState: ChannelRecords {
    func loadChannels(_ urls: [String]) async throws { try await stores.channels.loadChannels(urls) }
    func channel(_ url: String) async throws -> ChannelRecord { try await stores.channels.channel(url) }
    func channelIfExists(_ url: String) async throws -> ChannelRecord? { try await stores.channels.channelIfExists(url) }
    func loadedChannel(_ url: String) -> ChannelRecord? { stores.channels.loadedChannel(url) }
    func memberChannels(of userId: String) async throws -> [ChannelRecord] { try await stores.channels.memberChannels(of: userId) }
    func save(_ c: ChannelRecord) async throws { try await stores.channels.save(c) }
    func deleteChannelRecord(_ url: String) { stores.channels.deleteChannelRecord(url) }
    func addMembershipTombstone(user: String, channel: String, at now: Int64) {
        stores.channels.addMembershipTombstone(user: user, channel: channel, at: now)
    }
    func allocateChannelNumber() async throws -> Int64 { try await stores.channels.allocateChannelNumber() }
    func touch(_ channel: inout ChannelRecord, _ now: Int64) { stores.channels.touch(&channel, now) }
    func markChanged(_ channel: inout ChannelRecord, _ now: Int64) { stores.channels.markChanged(&channel, now) }
    func touchMember(_ channel: inout ChannelRecord, _ userId: String, _ now: Int64) { stores.channels.touchMember(&channel, userId, now) }
    func distinctChannel(members ids: Set<String>, customType: String) async throws -> String? {
        try await stores.channels.distinctChannel(members: ids, customType: customType)
    }
    func channelListing(_ scope: ChannelQueries.Scope, filter: Channels.ListFilter, order: String,
                        metadataOrderKey: String?, after: [JSON]?, limit: Int) async throws -> [String] {
        try await stores.channels.channelListing(scope, filter: filter, order: order, metadataOrderKey: metadataOrderKey,
                                                 after: after, limit: limit)
    }
    func changedChannels(of userId: String, after start: Sync.Start, showEmpty: Bool, showFrozen: Bool,
                         customTypes: [String]?, limit: Int) async throws -> [(url: String, seq: Int64)] {
        try await stores.channels.changedChannels(of: userId, after: start, showEmpty: showEmpty, showFrozen: showFrozen,
                                                  customTypes: customTypes, limit: limit)
    }
    func endedMemberships(of userId: String, after start: Sync.Start, limit: Int) async throws -> [MembershipTombstoneRecord] {
        try await stores.channels.endedMemberships(of: userId, after: start, limit: limit)
    }
    func channelURLs(showing userId: String) async throws -> [String] { try await stores.channels.channelURLs(showing: userId) }
    var verify: Bool { shared.verify }
}

extension RequestState: MessageRecords {
    func save(_ m: MessageRecord) async throws { try await stores.messages.save(m) }
    func messageRecord(_ id: Int64) async throws -> MessageRecord? { try await stores.messages.messageRecord(id) }
    func deleteMessage(_ m: MessageRecord, at now: Int64) async throws { try await stores.messages.deleteMessage(m, at: now) }
    func purgeMessages(of url: String) async throws { try await stores.messages.purgeMessages(of: url) }
    func takeMessageNumbers(in channel: String, at now: Int64) async throws -> (id: Int64, createdAt: Int64) {
        try await stores.messages.takeMessageNumbers(in: channel, at: now)
    }
    func touch(_ message: inout MessageRecord, _ now: Int64) { stores.messages.touch(&message, now) }
    func lastMessageTs(in channel: String) -> Int64 { stores.messages.lastMessageTs(in: channel) }
    func earlierSend(channel: String, sender: String?, requestId: String) async throws -> EarlierSend? {
        try await stores.messages.earlierSend(channel: channel, sender: sender, requestId: requestId)
    }
    func messagePage(_ base: SQLCondition, _ bounds: [KeyBound], descending: Bool, limit: Int) async throws -> [MessageRecord] {
        try await stores.messages.messagePage(base, bounds, descending: descending, limit: limit)
    }
    func messageCount(_ base: SQLCondition, _ bounds: [KeyBound]) async throws -> Int64 {
        try await stores.messages.messageCount(base, bounds)
    }
    func messageChanges(_ base: SQLCondition, after start: Sync.Start, visibleAfter offset: Int64?,
                        limit: Int) async throws -> [MessageRecord] {
        try await stores.messages.messageChanges(base, after: start, visibleAfter: offset, limit: limit)
    }
    func messageTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [MessageTombstoneRecord] {
        try await stores.messages.messageTombstones(channel: channel, after: start, limit: limit)
    }
    func replies(to parent: Int64) async throws -> [MessageRecord] { try await stores.messages.replies(to: parent) }
    func newestMessageTs(_ url: String) async throws -> Int64 { try await stores.messages.newestMessageTs(url) }
    func lastCountableMessage(channel url: String) async throws -> MessageRecord? {
        try await stores.messages.lastCountableMessage(channel: url)
    }
    func searchMessages(_ q: MessageSearch) async throws -> [SearchHit] { try await stores.messages.searchMessages(q) }
    var uploadLimit: Int { shared.uploadLimit }
    func store(_ f: FileRecord, bytes: [UInt8]) async throws { try await stores.messages.store(f, bytes: bytes) }
    func file(_ id: String) async throws -> FileRecord? { try await stores.messages.file(id) }
    func fileBytes(_ id: String) async throws -> [UInt8]? { try await stores.messages.fileBytes(id) }
    func deleteFile(_ id: String) async throws { try await stores.messages.deleteFile(id) }
}

extension RequestState: PollRecords {
    func allocatePollId() async throws -> Int64 { try await stores.polls.allocatePollId() }
    func save(_ p: PollRecord) async throws { try await stores.polls.save(p) }
    func pollRecord(_ id: Int64) async throws -> PollRecord? { try await stores.polls.pollRecord(id) }
    func pollRecords(_ ids: [Int64]) async throws -> [Int64: PollRecord] { try await stores.polls.pollRecords(ids) }
    func touch(_ poll: inout PollRecord, _ now: Int64) { stores.polls.touch(&poll, now) }
    func deletePoll(_ p: PollRecord, at now: Int64) async throws { try await stores.polls.deletePoll(p, at: now) }
    func purgePolls(of url: String) async throws { try await stores.polls.purgePolls(of: url) }
    func pollTallies(_ ids: [Int64]) async throws -> [Int64: PollTally] { try await stores.polls.pollTallies(ids) }
    func pollVotes(_ ids: [Int64], of userId: String) async throws -> [Int64: [Int64]] {
        try await stores.polls.pollVotes(ids, of: userId)
    }
    func pollVotesByUser(_ id: Int64) async throws -> [String: [Int64]] { try await stores.polls.pollVotesByUser(id) }
    func setPollVotes(_ id: Int64, user: String, options: [Int64], at now: Int64) async throws {
        try await stores.polls.setPollVotes(id, user: user, options: options, at: now)
    }
    func pollPage(channel: String, before: Int64?, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord] {
        try await stores.polls.pollPage(channel: channel, before: before, visibleAfter: offset, limit: limit)
    }
    func pollChanges(channel: String, after start: Sync.Start, visibleAfter offset: Int64?, limit: Int) async throws -> [PollRecord] {
        try await stores.polls.pollChanges(channel: channel, after: start, visibleAfter: offset, limit: limit)
    }
    func pollTombstones(channel: String, after start: Sync.Start, limit: Int) async throws -> [PollTombstoneRecord] {
        try await stores.polls.pollTombstones(channel: channel, after: start, limit: limit)
    }
    func pollVoters(_ id: Int64, option: Int64, after: String?, limit: Int) async throws -> [String] {
        try await stores.polls.pollVoters(id, option: option, after: after, limit: limit)
    }
}

extension RequestState: ReportRecords {
    func allocateReportId() async throws -> Int64 { try await stores.reports.allocateReportId() }
    func save(_ r: ReportRecord) async throws { try await stores.reports.save(r) }
    func reports(after: Int64, limit: Int) async throws -> [ReportRecord] { try await stores.reports.reports(after: after, limit: limit) }
    func hasReports() async throws -> Bool { try await stores.reports.hasReports() }
}

extension RequestState: EventEmitter, EventLog, ChangeSequence {
    func emit(_ category: String, channelUrl: String, to recipients: Set<String>, fields: [(String, JSON?)], now: Int64) {
        stores.events.emit(category, channelUrl: channelUrl, to: recipients, fields: fields, now: now)
    }
    func endStreams(of userId: String, message: String) { stores.events.endStreams(of: userId, message: message) }
    func setTyping(_ userId: String, in url: String, since: Int64?) { stores.events.setTyping(userId, in: url, since: since) }
    func typers(in url: String, now: Int64) async throws -> [String] { try await stores.events.typers(in: url, now: now) }

    func events(after last: Int64, through: Int64, for userId: String) async throws -> [StoredEvent] {
        try await stores.events.events(after: last, through: through, for: userId)
    }
    func prunedThrough() async throws -> Int64 { try await stores.events.prunedThrough() }
    func replayFrame(_ event: StoredEvent, data parsed: JSONObject?, for userId: String, now: Int64,
                     plan: inout ReplayPlan) -> String {
        stores.renderer.replayFrame(event, data: parsed, for: userId, now: now, plan: &plan)
    }
    func isOnline(_ userId: String) -> Bool { shared.isOnline(userId) }

    func currentSeq() async throws -> Int64 { stores.tx.currentSeq() }
}

extension RequestState: Rendering {
    func render(_ messages: [MessageRecord], _ view: MessageView) async throws -> [JSON] {
        try await stores.renderer.render(messages, view)
    }
    func render(_ message: MessageRecord, _ view: MessageView) async throws -> JSON { try await stores.renderer.render(message, view) }
    func basicUser(_ userId: String, in channel: ChannelRecord?) -> JSON { stores.renderer.basicUser(userId, in: channel) }
    func userJSON(_ u: UserRecord, unread: (messages: Int64, channels: Int64)?, privateFields: Bool) -> JSON {
        stores.renderer.userJSON(u, unread: unread, privateFields: privateFields)
    }
    func memberJSON(_ channel: ChannelRecord, _ m: MemberRecord, now: Int64) -> JSON { stores.renderer.memberJSON(channel, m, now: now) }
    func channelJSON(_ c: ChannelRecord, _ view: ChannelView, now: Int64) -> JSON { stores.renderer.channelJSON(c, view, now: now) }
    func eventChannelJSON(_ c: ChannelRecord, now: Int64) -> JSON { stores.renderer.eventChannelJSON(c, now: now) }
    func webhookChannelJSON(_ c: ChannelRecord, now: Int64) -> JSON { stores.renderer.webhookChannelJSON(c, now: now) }
    func threadInfoJSON(_ m: MessageRecord) -> JSON { stores.renderer.threadInfoJSON(m) }
    func isVisible(_ m: MessageRecord, to member: MemberRecord?) -> Bool { stores.renderer.isVisible(m, to: member) }
    func unreadCounts(_ channel: ChannelRecord, _ userId: String) -> (messages: Int64, mentions: Int64) {
        stores.renderer.unreadCounts(channel, userId)
    }
    func lastMessage(_ channel: ChannelRecord, for userId: String?) -> MessageRecord? { stores.renderer.lastMessage(channel, for: userId) }
}

extension RequestState: ApplicationRecords {
    func applicationSettings() async throws -> ApplicationSettings { try await stores.settings.applicationSettings() }
    func storeApplicationSettings(_ values: [String: String?]) async throws { try await stores.settings.storeApplicationSettings(values) }
    func joinedChannelCount(of userId: String) async throws -> Int { try await stores.channels.joinedChannelCount(of: userId) }
}

extension RequestState: WebhookRecords {
    var hookDefaults: HookDefaults { shared.webhooks.defaults }
    func storedWebhookSettings() async throws -> String? { try await stores.settings.storedWebhookSettings() }
    func webhookSettings() async throws -> WebhookSettings { try await stores.settings.webhookSettings() }
    func storeWebhookSettings(_ settings: WebhookSettings?) async throws { try await stores.settings.storeWebhookSettings(settings) }
    func hookDeliveries(status: String?, before: Int64?, limit: Int) async throws -> [HookDeliveryRecord] {
        try await stores.settings.hookDeliveries(status: status, before: before, limit: limit)
    }
    func queueWebhook(_ category: WebhookCategory, channelUrl: String?, fields: [(String, JSON?)], now: Int64) {
        stores.events.queueWebhook(category, channelUrl: channelUrl, fields: fields, now: now)
    }
}
