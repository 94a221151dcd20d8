import Glibc
import Synchronization
import Testing

@testable import ParleyCore

/// The group channel collection used from Swift directly, against the real server.
@Suite(.serialized) struct GroupChannelCollectionTests {
    @Test func queryParsingRefusesBadFieldsAndKeepsDefaults() throws {
        let defaults = try GroupChannelListQuery(json: [:])
        #expect(defaults == GroupChannelListQuery())
        #expect(defaults.order == .latestLastMessage && defaults.limit == 20 && defaults.includeEmpty)
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
        let collection = try client.groupChannelCollection(
            query: query,
            handler: GroupChannelCollectionHandler(updated: { context, channels in
                updates.update { $0 += channels.map { (context.source, $0["channel_url"]?.stringValue ?? "") } }
            }))
        defer { collection.dispose() }
        for _ in 0..<10 where collection.hasMore {
            let box = Box<Result<[JSONValue], ParleyError>?>(nil)
            collection.loadMore { result in box.update { $0 = result } }
            #expect(engineWaitUntil { box.value != nil })
        }
        let truth = try waitFor { done throws(ParleyError) in
            try admin.request(method: "GET", path: "/v3/users/alice/my_group_channels?order=channel_name_alphabetical&show_empty=true&limit=100",
                              completion: done)
        }["channels"]?.arrayValue?.compactMap { $0["channel_url"]?.stringValue } ?? []
        #expect(truth == ["s1", "s3", "s4", "s2", "s0"])
        #expect(engineWaitUntil { !collection.hasMore && collection.channels.compactMap { $0["channel_url"]?.stringValue } == truth })

        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "PUT", path: "/v3/group_channels/s0", body: ["name": "aaa"], completion: done)
        }
        #expect(engineWaitUntil { updates.value.contains { $0 == (.channelChanged, "s0") } })
        #expect(engineWaitUntil { collection.channels.first?["channel_url"]?.stringValue == "s0" })
        collection.dispose()
        #expect(collection.isDisposed)
    }
}
