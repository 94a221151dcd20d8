import Glibc
import Testing

@testable import ParleyCore

/// The message collection used from Swift directly, against the real server.
@Suite(.serialized) struct MessageCollectionTests {
    @Test func paramsParsingRefusesBadFieldsAndKeepsDefaults() throws {
        let defaults = try MessageListParams(json: [:])
        #expect(defaults == MessageListParams())
        #expect(defaults.previousResultSize == 20 && defaults.nextResultSize == 0 && !defaults.isInclusive && !defaults.reverse)
        #expect(defaults.replyType == .none && defaults.messageTypeFilter == .all && defaults.hugeGapThreshold == 300)
        let refused: [(JSONValue, String)] = [
            (["previous_result_size": 0], "previous_result_size"), (["next_result_size": 201], "next_result_size"),
            (["reply_type": "some"], "reply_type"), (["message_type_filter": 3], "message_type_filter"),
            (["custom_types": ["a,b"]], "custom_types"), (["huge_gap_threshold": 0], "huge_gap_threshold"), (["sort": 1], "sort"),
        ]
        for (json, field) in refused {
            #expect(throws: ParleyError.self) { try MessageListParams(json: json) }
            do { _ = try MessageListParams(json: json) } catch { #expect(error.message.contains(field)) }
        }
        var params = MessageListParams()
        params.reverse = true
        params.customTypes = ["news"]
        params.senderUserIDs = ["bob"]
        #expect(try MessageListParams(json: params.json) == params)
    }

    @Test func theViewEqualsTheServerListingAndFollowsChanges() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels", body: ["user_ids": ["alice", "bob"], "channel_url": "room"],
                              completion: done)
        }
        for index in 0..<45 {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/group_channels/room/messages",
                                  body: ["message_type": "MESG", "user_id": "bob", "message": .string("m\(index)")], completion: done)
            }
        }
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: tokens["alice"] ?? "", completion: done) }

        let added = Box<[(CollectionEventSource, MessageSendingStatus, String)]>([])
        var params = MessageListParams()
        params.previousResultSize = 10
        let collection = try client.messageCollection(channelURL: "room", params: params, handler: MessageCollectionHandler(
            added: { context, _, messages in
                added.update { $0 += messages.map { (context.source, context.sendingStatus, $0["message"]?.stringValue ?? "") } }
            }))
        defer { collection.dispose() }
        let cacheResult = Box<Result<MessageList, ParleyError>?>(nil)
        let apiResult = Box<Result<MessageList, ParleyError>?>(nil)
        collection.start(cacheResult: { result in cacheResult.update { $0 = result } }, apiResult: { result in apiResult.update { $0 = result } })
        #expect(engineWaitUntil { apiResult.value != nil })
        #expect(try cacheResult.value?.get().isEmpty == true)
        #expect(try apiResult.value?.get().count == 10)
        for _ in 0..<10 where collection.hasPrevious {
            let page = Box<Result<MessageList, ParleyError>?>(nil)
            collection.loadPrevious { result in page.update { $0 = result } }
            #expect(engineWaitUntil { page.value != nil })
        }
        let truth = try waitFor { done throws(ParleyError) in
            try admin.request(method: "GET", path: "/v3/group_channels/room/messages?prev_limit=200&user_id=alice", completion: done)
        }["messages"]?.arrayValue?.compactMap { $0["message_id"]?.int64Value } ?? []
        #expect(truth.count == 45)
        #expect(engineWaitUntil { !collection.hasPrevious && collection.messages.compactMap { $0["message_id"]?.int64Value } == truth })
        // Posted once the view is live: before the stream opens, or while the catch-up after it
        // runs, the message comes by that catch-up, not as message_received.
        #expect(engineWaitUntil { collection.freshness == .live })

        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels/room/messages",
                              body: ["message_type": "MESG", "user_id": "bob", "message": "live"], completion: done)
        }
        #expect(engineWaitUntil { added.value.contains { $0 == (.realtime(.messageReceived), .succeeded, "live") } })
        _ = try collection.sendUserMessage(params: ["message": "mine"])
        #expect(engineWaitUntil { added.value.contains { $0 == (.localSend, .pending, "mine") } })
        #expect(engineWaitUntil { collection.messages.last?["message"]?.stringValue == "mine" && collection.messages.last?["sending_status"] == nil })
        collection.dispose()
        #expect(collection.isDisposed)
    }

    /// A canceled message (cancel, remove failed) reaches a message view as `updated` with
    /// status canceled (the message says `sending_status: "canceled"`), gone from the view's
    /// messages when the callback runs, and never as `deleted`; a sync view removes it from
    /// the list that held it. The confirmation of a send is `message_sent`.
    @Test func canceledMessagesAreUpdatedAsCanceledAndConfirmationsAreMessageSent() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        func call(_ method: String, _ path: String, _ body: JSONValue? = nil) throws {
            _ = try waitFor { done throws(ParleyError) in try admin.request(method: method, path: path, body: body, completion: done) }
        }
        try call("POST", "/v3/group_channels", ["user_ids": ["alice", "bob"], "channel_url": "room"])
        try call("POST", "/v3/group_channels/room/messages", ["message_type": "MESG", "user_id": "bob", "message": "hello"])
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: tokens["alice"] ?? "", completion: done) }

        // (kind, source, status, text, sending_status carried, still listed by the view when told)
        let log = Box<[String]>([])
        let holder = Box<MessageCollection?>(nil)
        func record(_ kind: String) -> @Sendable (MessageEventContext, JSONText, MessageList) -> Void {
            { context, _, messages in
                let listed = Set(holder.value?.messages.compactMap { $0["req_id"]?.stringValue } ?? [])
                log.update {
                    $0 += messages.map { message in
                        let reqID = message["req_id"]?.stringValue ?? ""
                        return "\(kind):\(context.source.name):\(context.sendingStatus):\(message["message"]?.stringValue ?? "")"
                            + ":\(message["sending_status"]?.stringValue ?? "-"):\(!reqID.isEmpty && listed.contains(reqID) ? "listed" : "gone")"
                    }
                }
            }
        }
        let collection = try client.messageCollection(channelURL: "room", params: MessageListParams(), handler: MessageCollectionHandler(
            added: record("added"), updated: record("updated"), deleted: record("deleted")))
        holder.update { $0 = collection }
        // The handler captures `holder`: break the cycle, or the collection (and its engine) leaks.
        defer { holder.update { $0 = nil } }
        defer { collection.dispose() }
        let started = Box<Bool>(false)
        collection.start(cacheResult: { _ in }, apiResult: { _ in started.update { $0 = true } })
        #expect(engineWaitUntil { started.value })
        let actions = Box<[String]>([])
        let sync = try client.syncView(channelURL: "room", handler: SyncViewHandler(action: { action, list, messages in
            actions.update { $0 += messages.map { "\(action):\(list):\($0["message"]?.stringValue ?? "")" } }
        }))
        defer { sync.dispose() }
        let fetched = Box<Bool>(false)
        sync.fetch(.previous) { _ in fetched.update { $0 = true } }
        #expect(engineWaitUntil { fetched.value })

        // Confirmed: message_sent.
        _ = try client.sendUserMessage(channelURL: "room", params: ["message": "sent"]) { _ in }
        #expect(engineWaitUntil { log.value.contains("updated:message_sent:succeeded:sent:-:listed") })

        // Refused (the channel is frozen): failed, kept for a resend or removal.
        try call("PUT", "/v3/group_channels/room/freeze", ["freeze": true])
        let refused = try ["one", "two", "three"].map { text in
            try client.sendUserMessage(channelURL: "room", params: ["message": .string(text)]) { _ in }.reqID
        }
        // Both views told of the three failures before the lists are cleared: the sync view's
        // actions for a change can come after the collection's callbacks for it.
        #expect(engineWaitUntil {
            log.value.filter { $0.hasPrefix("updated:local_send:failed:") }.count == 3
                && ["one", "two", "three"].allSatisfy { actions.value.contains("insert:failed:\($0)") }
        })
        log.update { $0 = [] }
        actions.update { $0 = [] }
        try client.cancelMessage(reqID: refused[0])
        #expect(engineWaitUntil { log.value.count == 1 && actions.value.count == 1 })
        #expect(log.value == ["updated:local_send:canceled:one:canceled:gone"])
        #expect(actions.value == ["remove:failed:one"])
        log.update { $0 = [] }
        actions.update { $0 = [] }
        #expect(try collection.removeFailedMessages() == Array(refused[1...]))
        #expect(engineWaitUntil { log.value.count == 2 && actions.value.count == 2 })
        #expect(log.value == ["updated:local_send:canceled:two:canceled:gone", "updated:local_send:canceled:three:canceled:gone"])
        #expect(actions.value == ["remove:failed:two", "remove:failed:three"])
        #expect(collection.messages.allSatisfy { $0["sending_status"] == nil } && sync.messages(.failed).isEmpty)
    }

    /// A channel with an open view keeps its messages when the cache goes over its size
    /// limit (the other channel's go); dispose lifts the protection.
    @Test func evictionSparesTheChannelOfAnOpenView() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        for url in ["shown", "other"] {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/group_channels", body: ["user_ids": ["alice", "bob"], "channel_url": .string(url)],
                                  completion: done)
            }
        }
        func post(_ url: String, _ text: String) throws {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/group_channels/\(url)/messages",
                                  body: ["message_type": "MESG", "user_id": "bob", "message": .string(text)], completion: done)
            }
        }
        for index in 0..<30 { try post("shown", "shown \(index)") }
        try post("other", "other 0")
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        configuration.cacheSizeLimitBytes = ChatCache.minimumSizeLimitBytes
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: tokens["alice"] ?? "", completion: done) }
        let engine = client.syncEngine
        func cachedCount(_ url: String) -> Int {
            engine.runNow { (try? engine.cache?.messageCount(channelURL: url)) ?? -1 }
        }
        /// Fills the cache past its limit with old messages of "other" (written directly: the
        /// limit is 64 MiB) and makes a live message of "other" trigger eviction.
        func overfill(_ round: Int) throws {
            let filled: String? = engine.runNow {
                do {
                    try engine.cache?.database.execute("""
                    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 17000)
                    INSERT INTO messages (message_id, channel_url, created_at, updated_at, req_id, type, custom_type, sender_id,
                                          parent_message_id, is_reply_to_channel, json)
                    SELECT 1000000 * \(round) + i, 'other', i, 0, '', 'MESG', '', 'bob', 0, 0, printf('{"pad":"%.4000c"}', 'x') FROM n
                    """)
                    return nil
                } catch { return "\(error)" }
            }
            #expect(filled == nil, "the direct insert failed: \(filled ?? "")")
            try post("other", "trigger \(round)")
        }
        var params = MessageListParams()
        params.previousResultSize = 100
        let view = try client.messageCollection(channelURL: "shown", params: params, handler: MessageCollectionHandler())
        let started = Box<Bool>(false)
        view.start(cacheResult: { _ in }, apiResult: { _ in started.update { $0 = true } })
        #expect(engineWaitUntil { started.value })
        #expect(cachedCount("shown") == 30)
        // The trigger must come as a live event: posted before the stream opens it would be
        // behind the position the stream starts from (seen under TSan with the suite running).
        #expect(engineWaitUntil { engine.runNow { engine.isStreamOpen } })
        try overfill(1)
        // Eviction deletes ~70 MB and checkpoints: on a loaded 2-core machine that took over
        // the default 20 s once (a baseline run beside three builds), hence the long wait.
        // What is checked is that the filler rows went: the trigger itself may be stored
        // after the eviction it started (it then stays, one message of "other"), so waiting
        // for "other" to be empty failed now and then although eviction had happened
        // (CI on 1e381eb: 128 KiB used, 3 messages of "other" left, all triggers).
        func fillerCount() -> Int {
            engine.runNow {
                (try? engine.cache?.scalarInt("SELECT count(*) FROM messages WHERE channel_url = 'other' AND message_id >= 1000000"))
                    .map { Int($0) } ?? -1
            }
        }
        let evicted = engineWaitUntil(timeoutMs: 60_000) { fillerCount() == 0 }
        let other = cachedCount("other")
        let state: String = engine.runNow {
            let used = (try? engine.cache?.usedBytes()).map { "\($0)" } ?? "?"
            return "used \(used) bytes, limit \(engine.cache.map { "\($0.sizeLimitBytes)" } ?? "?"), other \(other), "
                + "stream open \(engine.isStreamOpen)"
        }
        #expect(evicted, "no eviction: \(state)")
        #expect(cachedCount("shown") == 30)
        #expect(view.messages.count == 30)
        view.dispose()
        #expect(engine.runNow { engine.openMessageViews["shown"] } == nil)  // evictable again
    }

    /// The shared scenario (Tests/scenarios/message_collection.json; its format is described
    /// in the file), as the C and Python suites run it.
    @Test func sharedMessageCollectionScenario() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let root = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let scenario = try JSONValue.parse(try readTextFile(root + "/Tests/scenarios/message_collection.json"))
        let viewer = scenario["viewer"]?.stringValue ?? ""
        let channel = scenario["channel"]?.stringValue ?? ""
        let others = scenario["others"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let tokens = try server.createUsers([viewer] + others, admin: admin)
        let token = tokens[viewer] ?? ""
        var ids: [String: Int64] = [:]
        /// Replaces `"{msg:TEXT}"` (a JSON string) and `{msg:TEXT}` by the message's id.
        func substitute(_ text: String) -> String {
            var result = text
            for (name, id) in ids {
                result = result.replacing("\"{msg:\(name)}\"", with: String(id)).replacing("{msg:\(name)}", with: String(id))
            }
            return result
        }
        func adminCall(_ step: JSONValue) throws {
            let method = step["admin"]?.stringValue ?? "", path = step["path"]?.stringValue ?? ""
            let body = try step["body"].map { body throws in try JSONValue.parse(substitute(body.canonicalText)) }
            let answer = try waitFor { done throws(ParleyError) in
                try admin.request(method: method, path: substitute(path), body: body, completion: done)
            }
            if method == "POST", path.hasSuffix("/messages"), let id = answer["message_id"]?.int64Value, let text = answer["message"]?.stringValue {
                ids[text] = id
            }
        }
        for step in scenario["setup"]?.arrayValue ?? [] { try adminCall(step) }

        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        var policy = configuration.reconnectPolicy
        policy.initialDelayMs = 50
        configuration.reconnectPolicy = policy
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        // The stream open before anything happens: the server registers a stream before it
        // answers, so a message posted afterwards arrives live (one posted before would come
        // from the catch-up, which the scenario's expectations do not describe).
        func connectLive() throws {
            _ = try waitFor { done throws(ParleyError) in try client.connect(userID: viewer, sessionToken: token, completion: done) }
            #expect(engineWaitUntil { client.connectionState == .open })
        }
        try connectLive()

        // (view, kind, message text, source, status) per reported message.
        let seen = Box<[(String, String, String, String, String)]>([])
        var views: [(name: String, collection: MessageCollection, listing: String, reverse: Bool)] = []
        for (name, spec) in (scenario["views"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            let params = try MessageListParams(json: spec["params"] ?? [:])
            let record: @Sendable (String, MessageEventContext, MessageList) -> Void = { kind, context, messages in
                let texts = messages.isEmpty ? [""] : messages.map { $0["message"]?.stringValue ?? "" }
                seen.update { $0 += texts.map { (name, kind, $0, context.source.name, "\(context.sendingStatus)") } }
            }
            let point = spec["starting_point"]?.stringValue == "oldest" ? 0 : MessageCollection.newestStartingPoint
            let collection = try client.messageCollection(
                channelURL: channel, startingPoint: point, params: params,
                handler: MessageCollectionHandler(
                    added: { record("added", $0, $2) }, updated: { record("updated", $0, $2) }, deleted: { record("deleted", $0, $2) },
                    channelUpdated: { context, _ in record("channel_updated", context, []) }))
            let started = Box<Bool>(false)
            collection.start(cacheResult: { _ in }, apiResult: { _ in started.update { $0 = true } })
            #expect(engineWaitUntil { started.value })
            for _ in 0..<100 where collection.hasPrevious {
                let page = Box<Result<MessageList, ParleyError>?>(nil)
                collection.loadPrevious { result in page.update { $0 = result } }
                #expect(engineWaitUntil { page.value != nil })
            }
            for _ in 0..<100 where collection.hasNext {
                let page = Box<Result<MessageList, ParleyError>?>(nil)
                collection.loadNext { result in page.update { $0 = result } }
                #expect(engineWaitUntil { page.value != nil })
            }
            views.append((name, collection, spec["listing"]?.stringValue ?? "", params.reverse))
        }
        defer { views.forEach { $0.collection.dispose() } }

        /// Waits until every view shows what the server lists; with `load`, views are paged both
        /// ways meanwhile.
        func listingsMatch(_ place: String, load: Bool = false) throws {
            for view in views {
                var truth: [Int64] = []
                var position = "message_ts=0&include=true"
                while true {
                    let page = try waitFor { done throws(ParleyError) in
                        try admin.request(method: "GET", path: "/v3/group_channels/\(channel)/messages?\(view.listing)&prev_limit=0&next_limit=200"
                                          + "&user_id=\(viewer)&\(position)", completion: done)
                    }
                    let messages = page["messages"]?.arrayValue ?? []
                    truth += messages.compactMap { $0["message_id"]?.int64Value }
                    guard page["has_next"]?.boolValue == true, let last = messages.last else { break }
                    position = "message_ts=\(last["created_at"]?.int64Value ?? 0)&message_id=\(last["message_id"]?.int64Value ?? 0)&include=false"
                }
                let shown: @Sendable () -> [Int64] = { [collection = view.collection, reverse = view.reverse] in
                    let ids = collection.messages.filter { $0["sending_status"] == nil }.compactMap { $0["message_id"]?.int64Value }
                    return reverse ? ids.reversed() : ids
                }
                #expect(engineWaitUntil {
                    if load {
                        // After a clear the view reloads around its starting point: walk it again.
                        for _ in 0..<100 where view.collection.hasPrevious || view.collection.hasNext {
                            let page = Box<Result<MessageList, ParleyError>?>(nil)
                            if view.collection.hasPrevious {
                                view.collection.loadPrevious { result in page.update { $0 = result } }
                            } else {
                                view.collection.loadNext { result in page.update { $0 = result } }
                            }
                            _ = engineWaitUntil { page.value != nil }
                        }
                    }
                    return shown() == truth
                }, "\(place): view \(view.name) \(shown()) != \(truth)")
            }
        }
        try listingsMatch("after loading")
        // The first steps assert live sources: the catch-up after the stream opened is over.
        for view in views { #expect(engineWaitUntil { view.collection.freshness == .live }, "view \(view.name) not live") }
        var online = true
        for (number, step) in (scenario["steps"]?.arrayValue ?? []).enumerated() {
            let place = "step \(number)"
            if step["admin"] != nil {
                try adminCall(step)
            } else if let text = step["send"]?.stringValue {
                _ = try waitFor { done throws(ParleyError) in
                    try client.sendUserMessage(channelURL: channel, params: ["message": .string(text)], completion: done).operationID
                }
            } else if let urls = step["send_files"]?.arrayValue {
                // Several hosted files in one call: each its own message, all delivered.
                let files: [JSONValue] = urls.map { url in
                    .object(["url": url, "file_name": .string(String((url.stringValue ?? "").split(separator: "/").last ?? "file"))])
                }
                let outcomes = Box<[Int: Result<JSONValue, ParleyError>]>([:])
                _ = try client.sendFileMessages(channelURL: channel, params: files) { index, _, result in
                    outcomes.update { $0[index] = result }
                }
                #expect(engineWaitUntil { outcomes.value.count == files.count }, "\(place): files not all sent")
                for (index, result) in outcomes.value.sorted(by: { $0.key < $1.key }) {
                    if case .failure(let error) = result { Issue.record("\(place): file \(index) failed: \(error)") }
                }
            } else if step["disconnect"]?.boolValue == true {
                client.disconnect()
                online = false
            } else if step["connect"]?.boolValue == true {
                try connectLive()
                online = true
            } else if step["clear"]?.boolValue == true {
                try client.clearCachedData()
            }
            for expected in step["expect"]?.arrayValue ?? [] {
                let view = expected["view"]?.stringValue ?? "", kind = expected["kind"]?.stringValue ?? ""
                let text = expected["message"]?.stringValue ?? ""
                let source = expected["source"]?.stringValue, status = expected["status"]?.stringValue
                var taken = false  // taken at most once, however often the condition is asked
                _ = engineWaitUntil {
                    guard !taken else { return true }
                    seen.update { entries in
                        if let index = entries.firstIndex(where: {
                            $0.0 == view && $0.1 == kind && $0.2 == text && (source == nil || $0.3 == source) && (status == nil || $0.4 == status)
                        }) {
                            entries.remove(at: index)
                            taken = true
                        }
                    }
                    return taken
                }
                #expect(taken, "\(place): no \(kind) of '\(text)' in \(view) (\(source ?? "any source")); seen \(seen.value.filter { $0.0 == view })")
            }
            if online { try listingsMatch(place, load: step["clear"]?.boolValue == true) }
        }
    }
}
