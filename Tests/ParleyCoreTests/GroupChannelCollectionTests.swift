import Glibc
import Testing

@testable import ParleyCore

/// The group channel collection used from Swift directly, against the real server.
@Suite(.serialized) struct GroupChannelCollectionTests {
    @Test func queryParsingRefusesBadFieldsAndKeepsDefaults() throws {
        let defaults = try GroupChannelListQuery(json: [:])
        #expect(defaults == GroupChannelListQuery())
        // As the reference: channels without a message are left out unless asked for.
        #expect(defaults.order == .latestLastMessage && defaults.limit == 20 && !defaults.includeEmpty)
        let refused: [(JSONValue, String)] = [
            (["ordr": "x"], "ordr"), (["limit": 0], "limit"), (["order": "metadata_value_alphabetical"], "metadata_order_key"),
            (["metadata_order_key": "k"], "metadata_order_key"),
            (["user_ids_exact_filter": ["a"], "user_ids_include_filter": ["b"]], "user_ids_exact_filter"),
        ]
        for (json, field) in refused {
            #expect(throws: ParleyError.self) { try GroupChannelListQuery(json: json) }
            do { _ = try GroupChannelListQuery(json: json) } catch { #expect(error.message.contains(field)) }
        }
        var query = GroupChannelListQuery()
        query.order = .metadataValueAlphabetical
        query.metadataOrderKey = "rank"
        #expect(try GroupChannelListQuery(json: query.json) == query)
    }

    @Test func theListEqualsTheServerListingAndFollowsChanges() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        for (index, name) in ["kiwi", "apple", "fig", "apple", "date"].enumerated() {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: "POST", path: "/v3/group_channels",
                                  body: ["user_ids": ["alice", "bob"], "channel_url": .string("s\(index)"), "name": .string(name)], completion: done)
            }
        }
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = server.directory + "/cache"
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: tokens["alice"] ?? "", completion: done) }

        let updates = Box<[(CollectionEventSource, String)]>([])
        var query = GroupChannelListQuery()
        query.order = .channelNameAlphabetical
        query.limit = 2
        query.includeEmpty = true  // the channels have no messages
        let collection = try client.groupChannelCollection(
            query: query,
            handler: GroupChannelCollectionHandler(updated: { context, channels in
                updates.update { $0 += channels.map { (context.source, $0.value["channel_url"]?.stringValue ?? "") } }
            }))
        defer { collection.dispose() }
        for _ in 0..<10 where collection.hasMore {
            let box = Box<Result<[JSONText], ParleyError>?>(nil)
            collection.loadMore { result in box.update { $0 = result } }
            #expect(engineWaitUntil { box.value != nil })
        }
        let truth = try waitFor { done throws(ParleyError) in
            try admin.request(method: "GET", path: "/v3/users/alice/my_group_channels?order=channel_name_alphabetical&show_empty=true&limit=100",
                              completion: done)
        }["channels"]?.arrayValue?.compactMap { $0["channel_url"]?.stringValue } ?? []
        #expect(truth == ["s1", "s3", "s4", "s2", "s0"])
        #expect(engineWaitUntil { !collection.hasMore && collection.channels.compactMap { $0["channel_url"]?.stringValue } == truth })
        // Changed once the view is live: before the stream opens, or while the catch-up after it
        // runs, the change comes by that catch-up, as a channel changelog.
        #expect(engineWaitUntil { collection.freshness == .live })

        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "PUT", path: "/v3/group_channels/s0", body: ["name": "aaa"], completion: done)
        }
        #expect(engineWaitUntil { updates.value.contains { $0 == (.realtime(.channelChanged), "s0") } })
        #expect(engineWaitUntil { collection.channels.first?["channel_url"]?.stringValue == "s0" })
        collection.dispose()
        #expect(collection.isDisposed)
    }

    /// The shared scenario (Tests/scenarios/channel_collection.json; its format is described
    /// in the file), as the C and Python suites run it.
    @Test func sharedChannelCollectionScenario() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let root = "/" + #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let scenario = try JSONValue.parse(try readTextFile(root + "/Tests/scenarios/channel_collection.json"))
        let viewer = scenario["viewer"]?.stringValue ?? ""
        let others = scenario["others"]?.arrayValue?.compactMap(\.stringValue) ?? []
        let tokens = try server.createUsers([viewer] + others, admin: admin)
        let token = tokens[viewer] ?? ""
        func adminCall(_ step: JSONValue) throws {
            _ = try waitFor { done throws(ParleyError) in
                try admin.request(method: step["admin"]?.stringValue ?? "", path: step["path"]?.stringValue ?? "",
                                  body: step["body"], completion: done)
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
        // answers, so a change made afterwards arrives live.
        func connectLive() throws {
            _ = try waitFor { done throws(ParleyError) in try client.connect(userID: viewer, sessionToken: token, completion: done) }
            #expect(engineWaitUntil { client.connectionState == .open })
        }
        try connectLive()

        // (view, kind, channel, source, channel object) per changed channel.
        let seen = Box<[(String, String, String, String, JSONValue)]>([])
        let mismatches = Box<[String]>([])
        var views: [(name: String, collection: GroupChannelCollection, listing: String)] = []
        for (name, view) in (scenario["views"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            let query = try GroupChannelListQuery(json: view["query"] ?? [:])
            let record: @Sendable (String, CollectionEventContext, [JSONText]) -> Void = { kind, context, channels in
                seen.update {
                    $0 += channels.map { (name, kind, $0.value["channel_url"]?.stringValue ?? "", context.source.name, $0.value) }
                }
            }
            // A deletion is recorded from its channel objects; its URL list must name the same channels.
            let deletedURLs = Box<[String]>([])
            let collection = try client.groupChannelCollection(query: query, handler: GroupChannelCollectionHandler(
                added: { record("added", $0, $1) }, updated: { record("updated", $0, $1) },
                deleted: { _, urls in deletedURLs.update { $0 = urls } },
                deletedChannels: { context, channels in
                    let urls = channels.map { $0.value["channel_url"]?.stringValue ?? "" }
                    if urls != deletedURLs.value { mismatches.update { $0.append("\(name): deleted \(deletedURLs.value) vs objects \(urls)") } }
                    record("deleted", context, channels)
                }))
            for _ in 0..<100 where collection.hasMore {
                let page = Box<Result<[JSONText], ParleyError>?>(nil)
                collection.loadMore { result in page.update { $0 = result } }
                #expect(engineWaitUntil { page.value != nil })
            }
            views.append((name, collection, view["listing"]?.stringValue ?? ""))
        }
        defer { views.forEach { $0.collection.dispose() } }

        /// Waits until every view lists what the server lists; with `load`, views with more are
        /// paged meanwhile (after a clear they reload their first page and are walked again).
        func listingsMatch(_ place: String, load: Bool = false) throws {
            for view in views {
                var truth: [String] = []
                var position = ""
                while true {
                    let page = try waitFor { done throws(ParleyError) in
                        try admin.request(method: "GET", path: "/v3/users/\(viewer)/my_group_channels?\(view.listing)&limit=100\(position)",
                                          completion: done)
                    }
                    truth += page["channels"]?.arrayValue?.compactMap { $0["channel_url"]?.stringValue } ?? []
                    guard let next = page["next"]?.stringValue, !next.isEmpty else { break }
                    position = "&token=" + URLEncoding.percentEncode(next)
                }
                let matched = engineWaitUntil {
                    if load && view.collection.hasMore {
                        let page = Box<Result<[JSONText], ParleyError>?>(nil)
                        view.collection.loadMore { result in page.update { $0 = result } }
                        _ = engineWaitUntil { page.value != nil }
                    }
                    return view.collection.channels.compactMap { $0["channel_url"]?.stringValue } == truth
                }
                #expect(matched, "\(place): view \(view.name) \(view.collection.channels.compactMap { $0["channel_url"]?.stringValue }) != \(truth)")
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
            } else if let operation = step["op"]?.stringValue {
                _ = try waitFor { done throws(ParleyError) in try client.perform(operation, params: step["params"] ?? [:], completion: done) }
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
                let channel = expected["channel"]?.stringValue ?? "", source = expected["source"]?.stringValue
                let fields = expected["fields"]?.objectValue ?? [:]
                var taken = false  // taken at most once, however often the condition is asked
                _ = engineWaitUntil {
                    guard !taken else { return true }
                    seen.update { entries in
                        if let index = entries.firstIndex(where: { entry in
                            entry.0 == view && entry.1 == kind && entry.2 == channel && (source == nil || entry.3 == source)
                                && fields.allSatisfy { entry.4[$0.key] == $0.value }
                        }) {
                            entries.remove(at: index)
                            taken = true
                        }
                    }
                    return taken
                }
                #expect(taken, "\(place): no \(kind) of \(channel) in \(view) (\(source ?? "any source"), \(fields)); seen \(seen.value.map { ($0.0, $0.1, $0.2, $0.3) })")
            }
            if online { try listingsMatch(place, load: step["clear"]?.boolValue == true) }
        }
        #expect(mismatches.value.isEmpty, "\(mismatches.value)")
    }
}
