import Glibc
import Testing
@testable import ParleyCore

@Suite(.serialized) struct EngineTests {
    private func user(_ server: EngineTestServer, cacheDirectory: String) throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = cacheDirectory
        return try ParleyClient(configuration: configuration)
    }

    @Test func connectSendReceiveAndReadTheCache() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        for id in ["alice", "bob"] {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/users", body: ["user_id": .string(id), "nickname": .string(id)], completion: done)
            }
        }
        let token = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/users/alice/token", body: [:], completion: done)
        }["token"]?.stringValue ?? ""
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels",
                              body: ["user_ids": ["alice", "bob"], "channel_url": "swift-room"], completion: done)
        }

        let client = try user(server, cacheDirectory: server.directory + "/cache")
        defer { client.close() }
        let connection = Box<[ConnectionEvent]>([])
        let events = Box<[String]>([])
        client.setConnectionHandler { event, _ in connection.update { $0.append(event) } }
        client.setEventHandler { category, _, _ in events.update { $0.append(category) } }
        let me = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: token, completion: done) }
        #expect(me["user_id"]?.stringValue == "alice")
        #expect(engineWaitUntil { connection.value.contains(.connected) })
        #expect(connection.value.first == .connecting)
        #expect(client.connectionState == .open)

        // Send: pending at once, stored before the network, then succeeded exactly once.
        let delivered = Box<Result<JSONValue, ParleyError>?>(nil)
        let accepted = try client.sendUserMessage(channelURL: "swift-room", params: ["message": "from Swift"]) { result in
            delivered.update { $0 = result }
        }
        let pending = try JSONValue.parse(accepted.pendingMessage)
        #expect(pending["sending_status"]?.stringValue == "pending")
        #expect(pending["message_id"]?.int64Value == 0)
        #expect(engineWaitUntil { delivered.value != nil })
        let message = try #require(try delivered.value?.get())
        #expect(message["req_id"]?.stringValue == accepted.reqID)
        #expect((message["message_id"]?.int64Value ?? 0) > 0)

        // Another member's message arrives as an event, after the cache has it; our own
        // message was reported as sent, never as received.
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels/swift-room/messages",
                              body: ["message_type": "MESG", "user_id": "bob", "message": "from bob"], completion: done)
        }
        #expect(engineWaitUntil { events.value.contains("message_received") })
        #expect(events.value.filter { $0 == "message_received" }.count == 1)
        #expect(events.value.filter { $0 == "message_sent" }.count == 1)
        let cached = try JSONValue.parse(try client.cachedMessages(channelURL: "swift-room"))
        #expect(cached.arrayValue?.compactMap { $0["message"]?.stringValue } == ["from Swift", "from bob"])
        #expect(try client.cachedChannel(url: "swift-room") != nil)

        // Search notes wait for a batch, unless a search view is open: then each commit
        // applies its own, and the view's searches after each change have nothing to write.
        let engine = try #require(client.engine as? Engine)
        func waitingNotes() -> Int64 {
            engine.runNow { (try? engine.store.writer?.cache.scalarInt("SELECT count(*) FROM message_search_changes")) ?? -1 }
        }
        func post(_ text: String) throws {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/group_channels/swift-room/messages",
                                  body: ["message_type": "MESG", "user_id": "bob", "message": .string(text)], completion: done)
            }
            #expect(engineWaitUntil { ((try? client.cachedMessages(channelURL: "swift-room")) ?? "").contains(text) })
        }
        #expect(waitingNotes() > 0)
        let search = try client.messageSearch(params: MessageSearchParams(query: "bob"), handler: MessageSearchHandler())
        #expect(engine.runNow { engine.store.writer?.cache.appliesSearchNotesAtEveryCommit } == true)
        let found = Box<[String]?>(nil)
        search.loadMore { result in found.update { $0 = (try? result.get())?.map(\.snippet) ?? [] } }
        #expect(engineWaitUntil { found.value != nil })
        #expect(found.value?.count == 1)
        #expect(waitingNotes() == 0)
        try post("bob again")
        #expect(waitingNotes() == 0)
        search.dispose()
        #expect(engine.runNow { engine.store.writer?.cache.appliesSearchNotesAtEveryCommit } == false)
        try post("bob once more")
        #expect(waitingNotes() == 1)

        // A refusal carries the server's status and code.
        do {
            _ = try waitFor { done throws(ParleyError) in
                try client.perform("delete_group_channel", params: ["channel_url": "swift-room"], completion: done)
            }
            Issue.record("a member who is not an operator deleted the channel")
        } catch let error as ParleyError {
            #expect(error.code == .forbidden)
            #expect(error.httpStatus == 403)
            #expect(error.serverCode != 0)
        }

        client.disconnect()
        #expect(engineWaitUntil { connection.value.contains(.disconnected) })
        #expect(client.connectionState == .closed)
        // The cache stays readable offline.
        #expect(try client.cachedChannels().contains("swift-room"))
    }

    @Test func sendRequiresASessionAndValidParameters() throws {
        var configuration = ClientConfiguration()
        configuration.serverURL = "http://127.0.0.1:9"
        configuration.cacheMode = .memory
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        #expect(throws: ParleyError.self) {
            _ = try client.sendUserMessage(channelURL: "c", params: ["message": "x"]) { _ in }
        }
        #expect(throws: ParleyError.self) {
            _ = try client.sendUserMessage(channelURL: "c", params: ["message": ""]) { _ in }
        }
        #expect(throws: ParleyError.self) {
            _ = try client.sendFileMessage(channelURL: "c", params: ["url": "http://x/y", "file_path": "/etc/hostname"]) { _ in }
        }
        #expect(throws: ParleyError.self) { try client.reconnect() }
        #expect(throws: ParleyError.self) { try client.setSessionToken("t") }
        #expect(throws: ParleyError.self) { _ = try client.cachedChannels() }
    }
}
