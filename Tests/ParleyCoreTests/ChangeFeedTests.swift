import Glibc
import Testing
@testable import ParleyCore

/// A change and its cause, reduced to what the tests compare.
private struct Seen: Sendable, Equatable, CustomStringConvertible {
    var sequence: UInt64
    var cause: String
    var change: String
    var description: String { "#\(sequence) \(cause): \(change)" }
}

private func causeName(_ cause: ChangeCause) -> String {
    switch cause {
    case .realtime(let event): "realtime:\(event.name)\(event.isOwnEcho ? ":echo" : "")"
    case .channelChangelog: "channel_changelog"
    case .messageChangelog(let url): "message_changelog:\(url)"
    case .pollChangelog(let url): "poll_changelog:\(url)"
    case .send: "send"
    case .resend: "resend"
    case .sendResult: "send_result"
    case .cancel: "cancel"
    case .operation(let name): "operation:\(name)"
    case .apiLoad: "api_load"
    case .pageLoad: "page_load"
    case .channelRefresh(let url): "channel_refresh:\(url)"
    case .connectionLost: "connection_lost"
    case .eviction: "eviction"
    case .clear: "clear"
    case .catchUpStarted: "catch_up_started"
    case .connectivityChanged(let open): "connectivity:\(open)"
    case .catchUpFinished: "catch_up_finished"
    case .cacheUnavailable: "cache_unavailable"
    case .cacheRecovered: "cache_recovered"
    case .resync(let reason, let urls): "resync:\(reason):\(urls)"
    }
}

private func changeName(_ change: CacheChange) -> String {
    switch change {
    case .channelUpserted(let upsert): "channel_upserted:\(upsert.url):\(upsert.oldKey == nil ? "new" : "old")"
    case .channelRemoved(let url, let reason): "channel_removed:\(url):\(reason.rawValue)"
    case .messageUpserted(let upsert):
        "message_upserted:\(upsert.inserted ? "inserted" : "updated")\(upsert.extendedRange ? ":extended" : "")"
            + (upsert.replacedLocalReqID == nil ? "" : ":replaced_local")
    case .messageRemoved(_, let id): "message_removed:\(id)"
    case .messagesTruncated(let url, _, let count): "messages_truncated:\(url):\(count)"
    case .localMessageStatusChanged(let local): "local:\(local.status.rawValue)"
    case .rangeExtended(let chunk): "range_extended:\(chunk.reachesNewest ? "newest" : "inner")"
    case .newestEndUnknown: "newest_end_unknown"
    case .channelMessagesEvicted(let url): "evicted:\(url)"
    case .cleared: "cleared"
    }
}

@Suite struct ChangeFeedUnitTests {
    /// Batches committed while another is being delivered reach every observer after it, in
    /// commit order; an observer that unsubscribes (itself) during delivery is not called again.
    @Test func nestedPublishesKeepOneOrderForEveryObserver() {
        let feed = ChangeFeed()
        var first: [UInt64] = []
        var second: [UInt64] = []
        var third: [UInt64] = []
        var thirdID: UInt64 = 0
        feed.subscribe { [unowned feed] batch in
            first.append(batch.sequence)
            // The first batch makes an observer write again (a nested commit).
            if batch.sequence == 1 { feed.publish(cause: .apiLoad, changes: [.cleared]) }
        }
        feed.subscribe { batch in second.append(batch.sequence) }
        thirdID = feed.subscribe { [unowned feed] batch in
            third.append(batch.sequence)
            feed.unsubscribe(thirdID)
        }
        feed.publish(cause: .clear, changes: [.cleared])
        feed.publish(cause: .clear, changes: [.cleared])
        #expect(first == [1, 2, 3])
        #expect(second == [1, 2, 3])
        #expect(third == [1])
        #expect(feed.observerCount == 2)
    }

    /// An observer of one channel gets the batches that change it, every channel, or nothing
    /// (a cause alone), and not those about other channels only.
    @Test func channelObserversGetOnlyTheBatchesThatConcernTheirChannel() {
        let feed = ChangeFeed()
        var seen: [UInt64] = []
        var all: [UInt64] = []
        feed.subscribe(channelURL: "a") { seen.append($0.sequence) }
        feed.subscribe { all.append($0.sequence) }
        feed.publish(cause: .apiLoad, changes: [.messageRemoved(channelURL: "b", messageID: 1)])  // 1: not a's
        feed.publish(cause: .apiLoad, changes: [.messageRemoved(channelURL: "b", messageID: 2), .channelMessagesEvicted(channelURL: "a")])  // 2
        feed.publish(cause: .catchUpStarted, changes: [])  // 3: a cause alone
        feed.publish(cause: .connectionLost, changes: [.newestEndUnknown(channelURL: nil)])  // 4: every channel
        feed.publish(cause: .connectionLost, changes: [.newestEndUnknown(channelURL: "c")])  // 5: not a's
        feed.publish(cause: .clear, changes: [.cleared])  // 6
        feed.publish(cause: .apiLoad, changes: [.channelRemoved(url: "a", reason: .left)])  // 7
        #expect(seen == [2, 3, 4, 6, 7])
        #expect(all == [1, 2, 3, 4, 5, 6, 7])
    }
}

@Suite struct CacheWriterTests {
    private func channel(_ url: String, offset: Int64 = 0) -> JSONValue {
        ["channel_url": .string(url), "created_at": 1, "name": .string(url), "member_state": "joined",
         "ts_message_offset": .int(offset)]
    }

    /// A nested write that fails leaves nothing behind: neither rows nor recorded changes;
    /// a failed outer write publishes nothing.
    @Test func failedWritesPublishNothingOfWhatTheyDid() throws {
        let feed = ChangeFeed()
        let writer = CacheWriter(cache: try ChatCache(location: .memory), feed: feed)
        var batches: [ChangeBatch] = []
        feed.subscribe { batches.append($0) }
        try writer.write(.apiLoad) { transaction throws(ParleyError) in
            try transaction.storeChannel(channel("kept"))
            _ = try? writer.write(.apiLoad) { nested throws(ParleyError) in
                try nested.storeChannel(channel("dropped"))
                throw ParleyError.invalidState("fails after writing")
            }
        }
        #expect(batches.count == 1)
        #expect(batches.first?.changes.count == 1)
        #expect(try writer.cache.channel(url: "dropped") == nil)
        #expect(try writer.cache.channel(url: "kept") != nil)
        #expect(throws: ParleyError.self) {
            try writer.write(.apiLoad) { transaction throws(ParleyError) in
                try transaction.storeChannel(channel("never"))
                throw ParleyError.invalidState("fails")
            }
        }
        #expect(batches.count == 1)
        #expect(try writer.cache.channel(url: "never") == nil)
    }

    /// A message event changes its channel's member rows one member at a time and tells
    /// observers without reading the member list; an answer rendered before events that were
    /// applied meanwhile does not take the members' receipts back.
    @Test func eventsChangeOneMemberAndOlderAnswersKeepTheLaterReceipts() throws {
        let feed = ChangeFeed()
        let writer = CacheWriter(cache: try ChatCache(location: .memory), feed: feed)
        var upserts: [ChannelUpsert] = []
        var membersSeen: [Int?] = []
        feed.subscribe { batch in
            for case .channelUpserted(let upsert) in batch.changes {
                upserts.append(upsert)
                membersSeen.append(upsert.channel["members"]?.arrayValue?.count)
            }
        }
        func member(_ id: String, read: Int64, delivered: Int64 = 0) -> JSONValue {
            ["user_id": .string(id), "read_ts": .int(read), "delivered_ts": .int(delivered), "role": ""]
        }
        func room(_ members: [JSONValue]?, lastRead: Int64 = 0) -> JSONValue {
            guard case .object(var fields) = channel("room") else { return .null }
            fields["user_last_read"] = .int(lastRead)
            if let members { fields["members"] = .array(members) }
            return .object(fields)
        }
        try writer.write(.apiLoad) { transaction throws(ParleyError) in
            try transaction.storeChannel(room([member("ann", read: 1), member("bob", read: 1)]), fromEvent: true)
        }
        // A message from bob: the channel without members, bob's member object beside it.
        try writer.write(.apiLoad) { transaction throws(ParleyError) in
            try transaction.storeChannel(room(nil, lastRead: 5), changedMembers: [member("bob", read: 50)], fromEvent: true)
        }
        #expect(try writer.cache.channelMemberTexts(url: "room") == [member("ann", read: 1), member("bob", read: 50)].map(\.canonicalText))
        let upsert = try #require(upserts.last)
        #expect(upsert.channelWithoutMembers["members"] == nil)
        #expect(membersSeen.last == 2)  // read from the cache while the batch was delivered
        #expect(upsert.channelText.text == upsert.channel.canonicalText)
        // After delivery a list nobody read is not read any more (no cache access off the engine queue).
        var unread: [ChannelUpsert] = []
        let other = ChangeFeed()
        let quiet = CacheWriter(cache: writer.cache, feed: other)
        other.subscribe { batch in for case .channelUpserted(let upsert) in batch.changes { unread.append(upsert) } }
        try quiet.write(.apiLoad) { transaction throws(ParleyError) in
            try transaction.storeChannel(room(nil, lastRead: 6), fromEvent: true)
        }
        #expect(unread.count == 1)
        #expect(unread.first?.channel["members"] == nil)
        #expect(unread.first?.channel["user_last_read"] == .int(6))
        // A changelog rendered before that message (bob at 40), and after a read by ann (9).
        try writer.write(.channelChangelog) { transaction throws(ParleyError) in
            try transaction.storeChannel(room([member("ann", read: 9, delivered: 3), member("bob", read: 40)]))
        }
        #expect(try writer.cache.channelMemberTexts(url: "room")
            == [member("ann", read: 9, delivered: 3), member("bob", read: 50)].map(\.canonicalText))
        // An event renders the list as it is: a new membership starts over.
        try writer.write(.apiLoad) { transaction throws(ParleyError) in
            try transaction.storeChannel(room([member("bob", read: 0)]), fromEvent: true)
        }
        #expect(try writer.cache.channelMemberTexts(url: "room") == [member("bob", read: 0)].map(\.canonicalText))
    }

    /// Messages at or before the user's history offset are not stored again (a replayed
    /// event), and a grown offset removes those already stored.
    @Test func theHistoryOffsetKeepsHiddenMessagesOut() throws {
        let writer = CacheWriter(cache: try ChatCache(location: .memory), feed: ChangeFeed())
        func message(_ id: Int64, at time: Int64) -> JSONValue {
            ["message_id": .int(id), "channel_url": "room", "created_at": .int(time), "type": "MESG", "message": "m"]
        }
        try writer.write(.apiLoad) { transaction throws(ParleyError) in
            try transaction.storeChannel(channel("room"))
            try transaction.storeMessages([message(1, at: 10), message(2, at: 20), message(3, at: 30)])
            try transaction.storeChannel(channel("room", offset: 20))
            try transaction.appendRealtimeMessage(message(2, at: 20))
            try transaction.storeMessage(message(4, at: 15))
        }
        #expect(try writer.cache.messages(channelURL: "room", after: .oldest, limit: 10).map(\.messageID) == [3])
    }
}

@Suite(.serialized) struct ChangeFeedTests {
    /// Every kind of change a view depends on is observed exactly once, in commit order,
    /// with its cause, against the real server.
    @Test func everyChangeIsObservedOnceInCommitOrderWithItsCause() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let token = try server.createUsers(["alice", "bob"], admin: admin)["alice"] ?? ""
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheMode = .memory
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        let seen = Box<[Seen]>([])
        let observation = client.observeChanges { batch in
            seen.update { list in
                if batch.changes.isEmpty { list.append(Seen(sequence: batch.sequence, cause: causeName(batch.cause), change: "-")) }
                for change in batch.changes {
                    list.append(Seen(sequence: batch.sequence, cause: causeName(batch.cause), change: changeName(change)))
                }
            }
        }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: token, completion: done) }
        #expect(engineWaitUntil { client.connectionState == .open })
        func has(_ cause: String, _ change: String) -> Bool { seen.value.contains { $0.cause == cause && $0.change == change } }
        func count(_ cause: String, _ change: String) -> Int { seen.value.filter { $0.cause == cause && $0.change == change }.count }

        // A channel created by an operation: new to the cache exactly once (from the answer
        // or from the real-time event that may come first).
        let created = try waitFor { done throws(ParleyError) in
            try client.perform("create_group_channel", params: ["user_ids": ["alice", "bob"], "channel_url": "feed-room"], completion: done)
        }
        #expect(created["channel_url"]?.stringValue == "feed-room")
        #expect(engineWaitUntil { seen.value.filter { $0.change == "channel_upserted:feed-room:new" }.count == 1 })

        // A range reaching the newest end, then a message from bob extends it.
        client.syncEngine.queue.sync {
            client.syncEngine.write(.apiLoad, "test range") { transaction throws(ParleyError) in
                try transaction.addContinuousRange(channelURL: "feed-room", scope: "", from: .oldest, to: MessageKey(createdAt: 1, messageID: 1),
                                                   reachesOldest: true, reachesNewest: true)
            }
        }
        #expect(count("api_load", "range_extended:newest") == 1)
        let fromBob = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels/feed-room/messages",
                              body: ["message_type": "MESG", "user_id": "bob", "message": "hi"], completion: done)
        }
        #expect(engineWaitUntil { has("realtime:message_received", "message_upserted:inserted:extended") })
        #expect(has("realtime:message_received", "channel_upserted:feed-room:old"))

        // Our own send: pending, then succeeded once, by whichever of the answer and the echo
        // came first (an echo before the answer confirms the send: Engine+Events.swift); the
        // echo replaces the local copy.
        let sent = Box<Bool>(false)
        _ = try client.sendUserMessage(channelURL: "feed-room", params: ["message": "mine"]) { _ in sent.update { $0 = true } }
        #expect(engineWaitUntil { sent.value })
        func succeeded() -> Int {
            count("send_result", "local:succeeded") + count("realtime:message_received:echo", "local:succeeded")
        }
        #expect(engineWaitUntil { succeeded() == 1 })
        #expect(count("send", "local:pending") == 1)
        #expect(engineWaitUntil { seen.value.contains { $0.cause == "realtime:message_received:echo" } })
        #expect(succeeded() == 1)

        // A refused send fails; removing it reports it canceled.
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels",
                              body: ["user_ids": ["bob"], "channel_url": "not-mine"], completion: done)
        }
        let failed = Box<Bool>(false)
        _ = try client.sendUserMessage(channelURL: "not-mine", params: ["message": "refused"]) { _ in failed.update { $0 = true } }
        #expect(engineWaitUntil { failed.value })
        #expect(count("send_result", "local:failed") == 1)
        #expect(try client.removeFailedMessages(channelURL: "not-mine").count == 1)
        #expect(count("cancel", "local:canceled") == 1)

        // An update and a delete from the server.
        let bobID = fromBob["message_id"]?.int64Value ?? 0
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "PUT", path: "/v3/group_channels/feed-room/messages/\(bobID)",
                              body: ["message": "edited"], completion: done)
        }
        #expect(engineWaitUntil { has("realtime:message_updated", "message_upserted:updated") })
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "DELETE", path: "/v3/group_channels/feed-room/messages/\(bobID)", completion: done)
        }
        #expect(engineWaitUntil { has("realtime:message_deleted", "message_removed:\(bobID)") })

        // Reset history truncates what the user can no longer see.
        _ = try waitFor { done throws(ParleyError) in
            try client.perform("reset_my_history", params: ["channel_url": "feed-room"], completion: done)
        }
        // Once, from the answer or from the user's own channel_changed event, whichever is first.
        #expect(engineWaitUntil { seen.value.filter { $0.change == "messages_truncated:feed-room:1" }.count == 1 })
        #expect(seen.value.filter { $0.change.hasPrefix("messages_truncated:") }.count == 1)

        // Leaving removes the channel, with its reason.
        _ = try waitFor { done throws(ParleyError) in
            try client.perform("leave_channel", params: ["channel_url": "feed-room"], completion: done)
        }
        #expect(engineWaitUntil { seen.value.filter { $0.change.hasPrefix("channel_removed:feed-room:left") }.count == 1 })

        // Clearing.
        try client.clearCachedData()
        #expect(count("clear", "cleared") == 1)

        // Commit order: sequence numbers strictly increase without holes.
        let sequences = seen.value.map(\.sequence)
        var distinct: [UInt64] = []
        for sequence in sequences where distinct.last != sequence { distinct.append(sequence) }
        #expect(distinct == Array(distinct.first!...distinct.last!), "\(seen.value)")
        #expect(distinct.count == Set(distinct).count)

        observation.cancel()
        let before = seen.value.count
        try client.clearCachedData()
        #expect(seen.value.count == before)
    }
}
