import Testing
@testable import ParleyCore

private func parsed(_ text: String) throws -> JSONValue { try JSONValue.parse(text) }

@Suite struct WireModelTests {
    @Test func messageIDsAreNumbersOnly() throws {
        #expect(WireMessage(try parsed(#"{"message_id": 7}"#)).messageID == 7)
        // An integral double reads as the integer (JSONValue.int64Value).
        #expect(WireMessage(try parsed(#"{"message_id": 7.0}"#)).messageID == 7)
        // A string is not a message id: only operation parameters are read as either.
        #expect(WireMessage(try parsed(#"{"message_id": "7"}"#)).messageID == nil)
    }

    @Test func missingFieldsAndOtherShapesAreNil() throws {
        let empty = WireChannel(try parsed("{}"))
        #expect(empty.channelURL == nil)
        #expect(empty.memberState == nil)
        #expect(empty.tsMessageOffset == nil)
        #expect(empty.lastMessage == nil)
        #expect(empty.members == nil)
        #expect(!empty.hasMembers)
        let notAnObject = WireMessage(try parsed(#"["channel_url"]"#))
        #expect(notAnObject.channelURL == nil)
        #expect(notAnObject.senderID == nil)
        let wrongTypes = WireChannel(try parsed(#"{"channel_url": 5, "last_message": "x", "members": null}"#))
        #expect(wrongTypes.channelURL == nil)
        #expect(wrongTypes.lastMessage == nil)
        // `members` present at all makes the render whole, even when it is not a list.
        #expect(wrongTypes.hasMembers)
        #expect(wrongTypes.members == nil)
    }

    @Test func channelAndMessageFields() throws {
        let channel = WireChannel(try parsed("""
            {"channel_url": "c1", "member_state": "joined", "hidden_state": "hidden_allow_auto_unhide",
             "ts_message_offset": 1700, "metadata": {"rank": "b", "n": 1},
             "last_message": {"message_id": 9, "created_at": 1800, "user": {"user_id": "ann"}},
             "members": [{"user_id": "ann"}, {"user_id": "bob"}]}
            """))
        #expect(channel.channelURL == "c1")
        #expect(channel.memberState == "joined")
        #expect(channel.hiddenState == "hidden_allow_auto_unhide")
        #expect(channel.tsMessageOffset == 1700)
        #expect(channel.metadataValue("rank") == "b")
        #expect(channel.metadataValue("n") == nil)
        #expect(channel.lastMessage?.createdAt == 1800)
        #expect(channel.lastMessage?.senderID == "ann")
        #expect(channel.members?.compactMap { WireMember($0).userID } == ["ann", "bob"])
    }

    @Test func eventData() throws {
        let event = WireEventData(try parsed("""
            {"category": "message_received", "channel_url": "c1", "channel": {"channel_url": "c1"},
             "changed_members": [], "message": {"message_id": 3, "req_id": "r1", "mention_type": "users",
             "mentioned_users": [{"user_id": "bob"}]}}
            """))
        #expect(event.category == "message_received")
        #expect(event.channel?.channelURL == "c1")
        #expect(event.channel?.hasMembers == false)
        #expect(event.changedMembers == .array([]))
        #expect(event.message?.reqID == "r1")
        #expect(event.message?.mentionedUsers?.map(\.userID) == ["bob"])
        #expect(event.reaction == nil)
        #expect(event.users == nil)
    }

    @Test func reactionOperation() throws {
        let removed = WireReaction(try parsed(
            #"{"message_id": 3, "key": "like", "user_id": "ann", "operation": "DELETE", "updated_at": 1700.5}"#))
        #expect(removed.messageID == 3)
        #expect(removed.key == "like")
        #expect(removed.userID == "ann")
        #expect(removed.isDeletion)
        // Passed on as sent, whatever its type.
        #expect(removed.updatedAt == .double(1700.5))
        #expect(!WireReaction(try parsed(#"{"operation": "ADD"}"#)).isDeletion)
        #expect(!WireReaction(try parsed("{}")).isDeletion)
        #expect(WireReaction(try parsed("{}")).updatedAt == nil)
    }

    @Test func answers() throws {
        let changelog = WireChangelogPage(try parsed("""
            {"updated": [], "deleted": [{"message_id": 7, "deleted_at": 1}, {"deleted_at": 2}, {"message_id": 8}],
             "has_more": true, "next": "t2"}
            """))
        #expect(changelog.updated?.isEmpty == true)
        #expect(changelog.deletedMessageIDs == [7, 8])
        #expect(changelog.hasMore == true)
        #expect(changelog.next == "t2")
        let list = WireMessageList(try parsed(#"{"messages": [], "has_prev": false}"#))
        #expect(list.messages?.isEmpty == true)
        #expect(list.hasPrev == false)
        #expect(list.hasNext == nil)
        let gap = WireGapAnswer(try parsed(#"{"is_huge_gap": false, "gap_count": 2, "prev_has_more": true}"#))
        #expect(gap.isHugeGap == false)
        #expect(gap.prevHasMore == true)
        let error = WireError(try parsed(#"{"error": true, "code": 400302, "message": "expired"}"#))
        #expect(error.code == 400302)
        #expect(error.message == "expired")
        let resync = WireStreamNotice(try parsed(#"{"reason": "lagged", "last_event_id": 42}"#))
        #expect(resync.reason == "lagged")
        #expect(resync.lastEventID == 42)
    }
}

/// What a `list_messages` answer vouches for (Engine.listedRange): a page around an anchor
/// vouches for nothing unless it has no next side (the server's default there is 15, and
/// with `include` false neither side holds what sits at the anchor).
@Suite struct ListedRangeTests {
    private let answer: JSONValue = [
        "messages": [["message_id": 1, "created_at": 10], ["message_id": 2, "created_at": 20], ["message_id": 3, "created_at": 40]],
        "has_prev": false, "has_next": false,
    ]

    @Test func anAnchoredPageWithItsDefaultNextSideVouchesForNothing() {
        let params: JSONValue = ["channel_url": "room", "message_ts": 30, "include": false, "include_reply_type": "ALL", "prev_limit": 5]
        #expect(Engine.listedRange(params: params, answer: answer) == nil)
    }

    @Test func pagesWithoutANextSideVouchForTheirRange() throws {
        let anchored: JSONValue = [
            "channel_url": "room", "message_ts": 50, "include": false, "include_reply_type": "ALL", "prev_limit": 5, "next_limit": 0,
        ]
        let range = try #require(Engine.listedRange(params: anchored, answer: answer))
        #expect(range.from == MessageKey(createdAt: 10, messageID: 1) && range.through == MessageKey(createdAt: 40, messageID: 3))
        #expect(range.reachesOldest && !range.atNewestEnd && range.listed == [1, 2, 3])
        let newest: JSONValue = ["channel_url": "room", "include_reply_type": "ALL", "prev_limit": 5]
        #expect(Engine.listedRange(params: newest, answer: answer)?.atNewestEnd == true)
        // Filtered: replies left out, so the page is not every message of its range.
        let filtered: JSONValue = ["channel_url": "room", "prev_limit": 5]
        #expect(Engine.listedRange(params: filtered, answer: answer) == nil)
    }
}
