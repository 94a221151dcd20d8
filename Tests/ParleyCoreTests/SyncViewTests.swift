import Glibc
import Testing

@testable import ParleyCore

/// The SyncManager-style view and the resend policies, from Swift directly.
@Suite(.serialized) struct SyncViewTests {
    @Test func optionsAndResendConfigurationParse() throws {
        let defaults = try SyncViewOptions(json: [:])
        #expect(defaults == SyncViewOptions() && defaults.limit == 30 && defaults.filter.replyType == .all)
        let chosen = try SyncViewOptions(json: ["limit": 12, "custom_types": ["news"], "reply_type": "none"])
        #expect(chosen.limit == 12 && chosen.filter.customTypes == ["news"] && chosen.filter.replyType == .none)
        #expect(chosen.collectionParams.previousResultSize == 12 && chosen.collectionParams.nextResultSize == 12)
        for (json, field) in [(["limit": 201] as JSONValue, "limit"), (["next_result_size": 3], "next_result_size"),
                              (["sender_user_ids": "bob"], "sender_user_ids")] {
            do {
                _ = try SyncViewOptions(json: json)
                Issue.record("accepted \(json)")
            } catch {
                #expect(error.code == .invalidArgument && error.message.contains(field))
            }
        }

        #expect(try ClientConfiguration(json: "{}").resendPolicy == .automatic)
        #expect(try ClientConfiguration(json: #"{"auto_resend": false}"#).resendPolicy == .manual)
        #expect(try ClientConfiguration(json: #"{"auto_resend": true}"#).resendPolicy == .automatic)
        let none = try ClientConfiguration(json: #"{"resend_policy": "none", "auto_resend": false}"#)
        #expect(none.resendPolicy == .none && !none.autoResend)
        let limited = try ClientConfiguration(json: #"{"resend_retry_count": 2, "max_failed_messages_per_channel": 5}"#)
        #expect(limited.resendRetryLimit == 2 && limited.maxFailedMessagesPerChannel == 5)
        let unlimited = try ClientConfiguration(json: #"{"resend_retry_count": -1, "max_failed_messages_per_channel": -1}"#)
        #expect(unlimited.resendRetryLimit == nil && unlimited.maxFailedMessagesPerChannel == nil)
        for text in [#"{"resend_policy": "often"}"#, #"{"resend_policy": "manual", "auto_resend": true}"#,
                     #"{"max_failed_messages_per_channel": 0}"#, #"{"resend_retry_count": -2}"#] {
            #expect(throws: ParleyError.self) { try ClientConfiguration(json: text) }
        }
    }

    /// The adapter's bookkeeping: a message moves between lists with a remove and an insert,
    /// nothing is inserted twice, an unchanged message gives no update.
    @Test func listsMoveMessagesBetweenThemOnce() {
        var lists = SyncViewLists()
        var actions: [SyncViewLists.Action] = []
        let pending: JSONValue = ["req_id": "r1", "message_id": 0, "created_at": 5, "sending_status": "pending", "message": "hi"]
        let failed: JSONValue = ["req_id": "r1", "message_id": 0, "created_at": 5, "sending_status": "failed", "message": "hi"]
        let accepted: JSONValue = ["req_id": "r1", "message_id": 9, "created_at": 6, "message": "hi"]
        lists.apply(.added, .pending, pending, into: &actions)
        lists.apply(.updated, .failed, failed, into: &actions)
        lists.apply(.updated, .pending, pending, into: &actions)
        lists.apply(.updated, .succeeded, accepted, into: &actions)
        lists.apply(.added, .succeeded, accepted, into: &actions)  // the same copy again: nothing
        let edited: JSONValue = ["req_id": "r1", "message_id": 9, "created_at": 6, "message": "edited"]
        lists.apply(.updated, .succeeded, edited, into: &actions)
        lists.apply(.deleted, .succeeded, edited, into: &actions)
        let log = actions.map { "\($0.action):\($0.list):\($0.messages.count)" }
        #expect(log == [
            "insert:pending:1", "remove:pending:1", "insert:failed:1", "remove:failed:1", "insert:pending:1",
            "remove:pending:1", "insert:succeeded:1", "update:succeeded:1", "remove:succeeded:1",
        ])
        #expect(lists.succeeded.isEmpty && lists.pending.isEmpty && lists.failed.isEmpty)
    }

    @Test func fetchingBothWaysEqualsTheServerListingAndSendsGiveActions() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels", body: ["user_ids": ["alice", "bob"], "channel_url": "room"],
                              completion: done)
        }
        var middle: Int64 = 0
        for index in 0..<60 {
            let message = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/group_channels/room/messages",
                                  body: ["message_type": "MESG", "user_id": "bob", "message": .string("m\(index)")], completion: done)
            }
            if index == 30 { middle = message["created_at"]?.int64Value ?? 0 }
        }
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: tokens["alice"] ?? "", completion: done) }

        let log = Box<[String]>([])
        var options = SyncViewOptions()
        options.limit = 8
        let view = try client.syncView(channelURL: "room", viewpoint: middle, options: options, handler: SyncViewHandler(
            action: { action, list, messages in
                log.update {
                    if action == .clear { $0.append("clear:\(list)") }
                    $0 += messages.map { "\(action):\(list):\($0["message"]?.stringValue ?? "")" }
                }
            }))
        defer { view.dispose() }
        func fetchAll(_ direction: SyncViewDirection) -> Int {
            for fetches in 1...50 {
                let outcome = Box<Result<SyncFetchResult, ParleyError>?>(nil)
                view.fetch(direction) { result in outcome.update { $0 = result } }
                guard engineWaitUntil({ outcome.value != nil }), let result = try? outcome.value?.get(), !result.offline else { return -1 }
                if !result.hasMore { return fetches }
            }
            return -1
        }
        #expect(fetchAll(.previous) > 1)
        #expect(fetchAll(.next) > 1)
        let truth = try waitFor { done throws(ParleyError) in
            try admin.request(method: "GET", path: "/v3/group_channels/room/messages?prev_limit=200&user_id=alice", completion: done)
        }["messages"]?.arrayValue?.compactMap { $0["message_id"]?.int64Value } ?? []
        #expect(truth.count == 60)
        #expect(view.messages(.succeeded).compactMap { $0["message_id"]?.int64Value } == truth)
        #expect(log.value.count == 60 && Set(log.value).count == 60 && log.value.allSatisfy { $0.hasPrefix("insert:succeeded:") })

        log.update { $0 = [] }
        _ = try client.sendUserMessage(channelURL: "room", params: ["message": "mine"]) { _ in }
        #expect(engineWaitUntil { log.value.count == 3 })
        #expect(log.value == ["insert:pending:mine", "remove:pending:mine", "insert:succeeded:mine"])
        #expect(view.messages(.pending).isEmpty && view.messages(.succeeded).last?["message"]?.stringValue == "mine")

        log.update { $0 = [] }
        try view.resetViewpoint(SyncView.newestViewpoint)
        #expect(engineWaitUntil { log.value.count == 3 })
        #expect(log.value == ["clear:succeeded", "clear:pending", "clear:failed"])
        #expect(view.messages(.succeeded).isEmpty && view.viewpoint == SyncView.newestViewpoint)
        view.dispose()
        let late = Box<Result<SyncFetchResult, ParleyError>?>(nil)
        view.fetch(.next) { result in late.update { $0 = result } }
        #expect(engineWaitUntil { late.value != nil })
        #expect(throws: ParleyError.self) { try late.value?.get() }
    }
}
