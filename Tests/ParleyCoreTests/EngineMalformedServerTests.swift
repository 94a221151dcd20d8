import Glibc
import Testing
@testable import ParleyCore

// What the engine does with a server that breaks the protocol: malformed JSON, wrong types,
// events it cannot read. The real parley-server never answers like this, so a scripted
// loopback peer plays the broken server. The rule: clear errors or skipped input, never a
// crash, a hang or a corrupted cache.

@Suite(.serialized) struct EngineMalformedServerTests {
    private func client(_ peer: LoopbackPeer) throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = peer.baseURL
        configuration.cacheMode = .memory
        configuration.requestTimeoutMs = 5000
        configuration.reconnectPolicy.initialDelayMs = 200
        configuration.reconnectPolicy.maxDelayMs = 400
        return try ParleyClient(configuration: configuration)
    }

    @Test func malformedUserAnswerFailsConnectWithAProtocolError() throws {
        let peer = try LoopbackPeer { connection in
            while let _ = connection.readRequest() {
                connection.respond(headers: ["Content-Type: application/json"], body: Array(#"{"user_id": 5, "nickname": "#.utf8))
            }
        }
        let client = try client(peer)
        defer { client.close() }
        do {
            _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: "t", completion: done) }
            Issue.record("connect succeeded on a malformed answer")
        } catch let error as ParleyError {
            #expect(error.code == .protocolViolation)
        }
        #expect(client.currentUserID == nil)
    }

    @Test func brokenEventsAndChangelogsAreSkippedAndGoodOnesStillArrive() throws {
        let peer = try LoopbackPeer { connection in
            while let request = connection.readRequest(timeoutMs: 10_000) {
                if request.target.hasPrefix("/v3/users/alice/events") {
                    _ = connection.send(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n"
                            + "event: connected\ndata: {\"user_id\":\"alice\",\"last_event_id\":0}\n\n"
                            + "id: 1\nevent: message_received\ndata: not json at all\n\n"
                            + "id: 2\nevent: message_received\ndata: [1,2,3]\n\n"
                            + "id: 3\nevent: message_received\ndata: {\"channel_url\":\"c1\",\"message\":{\"message_id\":\"seven\"}}\n\n"
                            + "id: 4\nevent: message_deleted\ndata: {\"channel_url\":\"c1\",\"message_id\":{}}\n\n"
                            + "id: 5\nevent: message_received\ndata: {\"channel_url\":\"c1\",\"channel\":{\"channel_url\":\"c1\",\"name\":\"ok\",\"created_at\":1},"
                            + "\"message\":{\"message_id\":9,\"channel_url\":\"c1\",\"created_at\":100,\"type\":\"MESG\",\"message\":\"good\"}}\n\n")
                    _ = connection.waitForClientClose(timeoutMs: 20_000)
                    return
                } else if request.target.contains("changelogs") {
                    connection.respond(headers: ["Content-Type: application/json"],
                                       body: Array(#"{"updated": "nope", "deleted": [1, {"x": 2}], "has_more": "yes", "next": 7}"#.utf8))
                } else {
                    connection.respond(headers: ["Content-Type: application/json"], body: Array(#"{"user_id": "alice"}"#.utf8))
                }
            }
        }
        let client = try client(peer)
        defer { client.close() }
        let categories = Box<[String]>([])
        let logs = Box<[String]>([])
        client.setEventHandler { category, _, _ in categories.update { $0.append(category) } }
        client.setLogHandler(level: .warning) { _, message in logs.update { $0.append(message) } }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: "t", completion: done) }
        #expect(engineWaitUntil { categories.value.contains("message_received") && client.connectionState == .open })
        // The unreadable events were skipped (and logged); the wrongly typed ones reached the
        // app but not the cache; the good one is cached.
        #expect(engineWaitUntil { logs.value.contains { $0.contains("skipped an event") } })
        // The wrongly typed message_received (id 3) reaches the app before the good one (id 5)
        // is cached: wait for the cache, then require it to hold the good message only.
        func cachedTexts() -> [String]? {
            (try? JSONValue.parse(try client.cachedMessages(channelURL: "c1")))?.arrayValue?.compactMap { $0["message"]?.stringValue }
        }
        #expect(engineWaitUntil { cachedTexts()?.isEmpty == false })
        #expect(cachedTexts() == ["good"])
        #expect(try client.cachedChannel(url: "c1") != nil)
    }

    /// A message listing the view cannot read (wrong types, another channel's message, no
    /// list at all) fails that load with a protocol error; the view keeps what it had and
    /// the cache gets nothing from it.
    @Test func malformedMessageListingsFailTheLoadAndChangeNothing() throws {
        let answers = [
            #"{"messages": [{"message_id": "seven", "channel_url": "c1", "created_at": 1}], "has_prev": false, "has_next": false}"#,
            #"{"messages": [{"message_id": 7, "channel_url": "other", "created_at": 1}], "has_prev": false, "has_next": false}"#,
            #"{"messages": "none"}"#,
        ]
        for answer in answers {
            let peer = try LoopbackPeer { connection in
                while let request = connection.readRequest(timeoutMs: 10_000) {
                    if request.target.hasPrefix("/v3/group_channels/c1/messages") {
                        connection.respond(headers: ["Content-Type: application/json"], body: Array(answer.utf8))
                    } else if request.target.hasPrefix("/v3/users/alice/events") {
                        connection.respond(status: 503, body: [])
                    } else {
                        connection.respond(headers: ["Content-Type: application/json"], body: Array(#"{"user_id": "alice"}"#.utf8))
                    }
                }
            }
            let client = try client(peer)
            defer { client.close() }
            _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: "t", completion: done) }
            let view = try client.messageCollection(channelURL: "c1", handler: MessageCollectionHandler())
            defer { view.dispose() }
            let apiResult = Box<Result<MessageList, ParleyError>?>(nil)
            view.start(cacheResult: { _ in }, apiResult: { result in apiResult.update { $0 = result } })
            #expect(engineWaitUntil { apiResult.value != nil })
            guard case .failure(let error)? = apiResult.value else {
                Issue.record("the start accepted \(answer)")
                continue
            }
            #expect(error.code == .protocolViolation, "\(answer): \(error)")
            #expect(view.messages.isEmpty)
            #expect(try JSONValue.parse(try client.cachedMessages(channelURL: "c1")).arrayValue?.isEmpty == true)
        }
    }
}
