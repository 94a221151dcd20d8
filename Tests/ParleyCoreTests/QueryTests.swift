import Glibc
import Testing
@testable import ParleyCore

// Stateful queries (Client/Query.swift) and keyed handlers (Client/AppEvents.swift) against the
// real reference server: every walk is compared with the server's own full listing.

@Suite(.serialized) struct QueryTests {
    private func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    private func connectedClient(_ server: EngineTestServer, user: String, token: String) throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheMode = .memory
        let client = try ParleyClient(configuration: configuration)
        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: user, sessionToken: token, completion: done) }
        return client
    }

    private func admin(_ admin: ParleyClient, _ method: String, _ path: String, _ body: JSONValue? = nil) throws -> JSONValue {
        try waitFor { done throws(ParleyError) in try admin.request(method: method, path: path, body: body, completion: done) }
    }

    private func page(_ query: Query) throws -> [JSONValue] {
        let outcome = Box<Result<[JSONValue], ParleyError>?>(nil)
        try query.loadNextPage { result in outcome.update { $0 = result } }
        guard engineWaitUntil({ outcome.value != nil }), let result = outcome.value else { throw ParleyError(.timeout, "no page") }
        return try result.get()
    }

    /// Every page until `hasNext` is false.
    private func walk(_ query: Query) throws -> [[JSONValue]] {
        var pages: [[JSONValue]] = []
        while query.hasNext {
            pages.append(try page(query))
            guard pages.count < 200 else { throw ParleyError(.internalError, "the query never ends") }
        }
        return pages
    }

    private func ids(_ items: [JSONValue], _ key: String) -> [String] {
        items.map { item in
            let value = key.split(separator: ".").reduce(item) { $0[String($1)] ?? .null }
            return value.stringValue ?? value.int64Value.map(String.init) ?? "?"
        }
    }

    private func perform(_ client: ParleyClient, _ operation: String, _ params: JSONValue) throws -> JSONValue {
        try waitFor { done throws(ParleyError) in try client.perform(operation, params: params, completion: done) }
    }

    @Test func previousMessagesWalkToTheServersListingWithSharedMilliseconds() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        _ = try self.admin(admin, "POST", "/v3/group_channels", ["user_ids": ["alice", "bob"], "channel_url": "q-room"])
        // 30 messages in groups sharing a millisecond (sizes 1 to 5), so pages of 4 end inside groups.
        let base = now() - 60_000
        var offset: Int64 = 0
        var count = 0
        for size in [3, 1, 5, 2, 4, 3, 5, 1, 4, 2] {
            for _ in 0..<size {
                let sender = count % 3 == 0 ? "alice" : "bob"
                _ = try self.admin(admin, "POST", "/v3/group_channels/q-room/messages", [
                    "message_type": "MESG", "user_id": .string(sender), "message": .string("m\(count)"),
                    "custom_type": .string(count % 2 == 0 ? "even" : "odd"), "created_at": .int(base + offset),
                ])
                count += 1
            }
            offset += 1
        }
        let client = try connectedClient(server, user: "alice", token: tokens["alice"]!)
        defer { client.close() }
        let full = try perform(client, "list_messages", ["channel_url": "q-room", "prev_limit": 200, "include": true])
        let truth = ids(full["messages"]?.arrayValue ?? [], "message_id")
        #expect(truth.count == 30)

        // Oldest-first pages, walked newest to oldest: together exactly the listing.
        let query = try Query(client: client, kind: .previousMessages, options: ["channel_url": "q-room", "limit": 4])
        let pages = try walk(query)
        #expect(pages.count == 8)
        #expect(pages.reversed().flatMap { ids($0, "message_id") } == truth)
        #expect(pages.dropLast().allSatisfy { $0.count == 4 })
        #expect(!query.hasNext)
        #expect(try page(query).isEmpty)

        // reverse: each page newest first, so the pages in order are the listing backwards.
        let reversed = try Query(client: client, kind: .previousMessages, options: ["channel_url": "q-room", "limit": 3, "reverse": true])
        #expect(try walk(reversed).flatMap { ids($0, "message_id") } == truth.reversed())

        // Filters: the server's listing with the same filters.
        let filtered = try perform(client, "list_messages", [
            "channel_url": "q-room", "prev_limit": 200, "include": true, "sender_ids": ["bob"], "custom_types": ["even"],
        ])
        let bobsEven = try Query(client: client, kind: .previousMessages, options: [
            "channel_url": "q-room", "limit": 2, "sender_user_ids": ["bob"], "custom_types": ["even"],
        ])
        let filteredTruth = ids(filtered["messages"]?.arrayValue ?? [], "message_id")
        #expect(!filteredTruth.isEmpty)
        #expect(try walk(bobsEven).reversed().flatMap { ids($0, "message_id") } == filteredTruth)

        // A starting point inside a shared millisecond: is_inclusive says whether it belongs.
        let messages = full["messages"]?.arrayValue ?? []
        let tiedAt = base + 2  // the third group: five messages
        let before = messages.filter { ($0["created_at"]?.int64Value ?? 0) < tiedAt }
        let through = messages.filter { ($0["created_at"]?.int64Value ?? 0) <= tiedAt }
        let exclusive = try Query(client: client, kind: .previousMessages, options: ["channel_url": "q-room", "limit": 3, "starting_point": .int(tiedAt)])
        #expect(try walk(exclusive).reversed().flatMap { ids($0, "message_id") } == ids(before, "message_id"))
        let inclusive = try Query(client: client, kind: .previousMessages, options: [
            "channel_url": "q-room", "limit": 3, "starting_point": .int(tiedAt), "is_inclusive": true,
        ])
        #expect(try walk(inclusive).reversed().flatMap { ids($0, "message_id") } == ids(through, "message_id"))

        // Optional parts only when asked.
        let plain = try page(try Query(client: client, kind: .previousMessages, options: ["channel_url": "q-room", "limit": 1]))
        let withReactions = try page(try Query(client: client, kind: .previousMessages, options: [
            "channel_url": "q-room", "limit": 1, "include_reactions": true,
        ]))
        #expect(plain.first?["reactions"] == nil)
        #expect(withReactions.first?["reactions"] != nil)
    }

    @Test func aSecondLoadWhileOneRunsIsRefusedAndDisposeCancels() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice"], admin: admin)
        _ = try self.admin(admin, "POST", "/v3/group_channels", ["user_ids": ["alice"], "channel_url": "busy"])
        let client = try connectedClient(server, user: "alice", token: tokens["alice"]!)
        defer { client.close() }
        let query = try Query(client: client, kind: .members, options: ["channel_url": "busy"])
        let first = Box<Result<[JSONValue], ParleyError>?>(nil)
        // A load is running until its completion has run: hold the callback context meanwhile.
        let gate = Box(false)
        try client.post { _ = engineWaitUntil { gate.value } }
        try query.loadNextPage { result in first.update { $0 = result } }
        #expect(query.isLoading)
        do {
            try query.loadNextPage { _ in Issue.record("a refused load must not complete") }
            Issue.record("a second load was accepted")
        } catch {
            #expect(error.code == .invalidState)
            #expect(error.message.contains("query in progress"))
        }
        gate.update { $0 = true }
        #expect(engineWaitUntil { first.value != nil })
        #expect(try first.value?.get().map { $0["user_id"]?.stringValue } == ["alice"])
        #expect(!query.hasNext && !query.isLoading)

        // Options are checked at creation, naming the option.
        for (kind, options, named) in [
            (QueryKind.members, ["channel_url": "busy", "order": "sideways"] as JSONValue, "options.order"),
            (.previousMessages, ["limit": 5], "channel_url"),
            (.previousMessages, ["channel_url": "busy", "limit": 101], "options.limit"),
            (.operators, ["channel_url": "busy", "colour": "red"], "colour"),
            (.publicGroupChannels, ["order": "latest_last_message"], "options.order"),
        ] {
            #expect(throws: ParleyError.self) { try Query(client: client, kind: kind, options: options) }
            do { _ = try Query(client: client, kind: kind, options: options) } catch { #expect(error.message.contains(named)) }
        }

        // Dispose: the load in flight completes once, cancelled; later loads are refused.
        let held = Box(false)
        try client.post { _ = engineWaitUntil { held.value } }
        let second = try Query(client: client, kind: .operators, options: ["channel_url": "busy"])
        let outcome = Box<[Result<[JSONValue], ParleyError>]>([])
        try second.loadNextPage { result in outcome.update { $0.append(result) } }
        second.dispose()
        held.update { $0 = true }
        #expect(engineWaitUntil { !outcome.value.isEmpty })
        usleep(50_000)
        #expect(outcome.value.count == 1)
        if case .failure(let error)? = outcome.value.first { #expect(error.code == .cancelled) } else { Issue.record("not cancelled") }
        #expect(throws: ParleyError.self) { try second.loadNextPage { _ in } }

        // Not connected: the load completes with invalid state.
        client.disconnect()
        let offline = try Query(client: client, kind: .operators, options: ["channel_url": "busy"])
        #expect(throws: ParleyError.self) { _ = try page(offline) }
    }

    @Test func listQueriesWalkToTheServersListings() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let users = ["alice"] + (1...9).map { "user\($0)" }
        let tokens = try server.createUsers(users, admin: admin)
        for index in 0..<9 {
            _ = try self.admin(admin, "POST", "/v3/group_channels", [
                "user_ids": .array(["alice", .string("user\(index + 1)")]), "channel_url": .string("c\(index)"),
                "name": .string("channel \(9 - index)"), "is_public": .bool(index % 2 == 0),
            ])
            if index % 3 == 0 {
                _ = try self.admin(admin, "POST", "/v3/group_channels/c\(index)/messages",
                                   ["message_type": "MESG", "user_id": "alice", "message": "hi"])
            }
        }
        _ = try self.admin(admin, "POST", "/v3/group_channels", [
            "user_ids": .array(users.map(JSONValue.string)), "channel_url": "big", "operator_ids": ["alice", "user1", "user2", "user3"],
        ])
        for user in ["user4", "user5", "user6", "user7", "user8"] {
            _ = try self.admin(admin, "POST", "/v3/group_channels/big/mute", ["user_id": .string(user)])
        }
        for user in ["user9", "stranger1", "stranger2"] {
            if user.hasPrefix("stranger") { _ = try server.createUsers([user], admin: admin) }
            _ = try self.admin(admin, "POST", "/v3/group_channels/big/ban", ["user_id": .string(user)])
        }
        let client = try connectedClient(server, user: "alice", token: tokens["alice"]!)
        defer { client.close() }

        func compare(_ kind: QueryKind, _ options: JSONValue, _ operation: String, _ params: JSONValue, key: String, id: String) throws {
            let full = try perform(client, operation, params)
            let truth = ids(full[key]?.arrayValue ?? [], id)
            let query = try Query(client: client, kind: kind, options: options)
            let pages = try walk(query)
            #expect(truth.count > 2, "\(kind): too small to page")
            #expect(pages.flatMap { ids($0, id) } == truth, "\(kind)")
            #expect(pages.dropLast().allSatisfy { $0.count == 2 }, "\(kind)")
        }
        try compare(.groupChannels, ["limit": 2, "include_empty": true, "order": "chronological"],
                    "list_my_group_channels", ["limit": 100, "show_empty": true, "order": "chronological"], key: "channels", id: "channel_url")
        try compare(.groupChannels, ["limit": 2, "include_empty": true, "order": "channel_name_alphabetical", "public_channel_filter": "public"],
                    "list_my_group_channels", ["limit": 100, "show_empty": true, "order": "channel_name_alphabetical", "public_mode": "public"],
                    key: "channels", id: "channel_url")
        try compare(.publicGroupChannels, ["limit": 2, "include_empty": true], "list_public_group_channels",
                    ["limit": 100, "show_empty": true], key: "channels", id: "channel_url")
        try compare(.members, ["channel_url": "big", "limit": 2], "list_members", ["channel_url": "big", "limit": 100],
                    key: "members", id: "user_id")
        try compare(.members, ["channel_url": "big", "limit": 2, "order": "operator_then_member_alphabetical", "muted_member_filter": "unmuted"],
                    "list_members", ["channel_url": "big", "limit": 100, "order": "operator_then_member_alphabetical", "muted_member_filter": "unmuted"],
                    key: "members", id: "user_id")
        try compare(.operators, ["channel_url": "big", "limit": 2], "list_operators", ["channel_url": "big", "limit": 100],
                    key: "operators", id: "user_id")
        try compare(.bannedUsers, ["channel_url": "big", "limit": 2], "list_banned_users", ["channel_url": "big", "limit": 100],
                    key: "banned_list", id: "user.user_id")
        try compare(.mutedUsers, ["channel_url": "big", "limit": 2], "list_muted_users", ["channel_url": "big", "limit": 100],
                    key: "muted_list", id: "user.user_id")

        // include_member_list false: channels without members, as a collection hands them out.
        let bare = try page(try Query(client: client, kind: .groupChannels, options: ["include_empty": true, "include_member_list": false]))
        #expect(!bare.isEmpty && bare.allSatisfy { $0["members"] == nil })
    }

    @Test func keyedHandlersAllHearEachEventInOrderAndMayRemoveThemselvesAndOthers() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try server.adminClient()
        defer { admin.close() }
        let tokens = try server.createUsers(["alice", "bob"], admin: admin)
        _ = try self.admin(admin, "POST", "/v3/group_channels", ["user_ids": ["alice", "bob"], "channel_url": "h-room"])
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheMode = .memory
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }

        // One log in callback order: which handler heard which message.
        let heard = Box<[String]>([])
        let connections = Box<[String]>([])
        // The event's data holds the message text somewhere: m1 ... m4 are unique.
        @Sendable func text(_ payload: String) -> String {
            (1...4).map { "m\($0)" }.first { payload.contains("\"\($0)\"") } ?? "?"
        }
        client.setEventHandler { category, _, payload in
            if category == "message_received" { heard.update { $0.append("set:" + text(payload)) } }
        }
        try client.addEventHandler(id: "a") { category, _, payload in
            guard category == "message_received" else { return }
            heard.update { $0.append("a:" + text(payload)) }
            // At the second message "a" removes "b", which comes after it: b misses that one too.
            if text(payload) == "m2" { try? client.removeEventHandler(id: "b") }
        }
        try client.addEventHandler(id: "b") { category, _, payload in
            if category == "message_received" { heard.update { $0.append("b:" + text(payload)) } }
        }
        try client.addEventHandler(id: "c") { category, _, payload in
            guard category == "message_received" else { return }
            heard.update { $0.append("c:" + text(payload)) }
            if text(payload) == "m3" { try? client.removeEventHandler(id: "c") }
        }
        // Replacing keeps the place: "a2" replaces nothing, "c" is not replaced.
        for id in ["x", "y"] {
            try client.addConnectionHandler(id: id) { event, _ in connections.update { $0.append("\(id):\(event)") } }
        }
        try client.addConnectionHandler(id: "x") { event, _ in connections.update { $0.append("x2:\(event)") } }
        #expect(throws: ParleyError.self) { try client.addEventHandler(id: "") { _, _, _ in } }
        #expect(throws: ParleyError.self) { try client.removeConnectionHandler(id: "") }
        try client.removeEventHandler(id: "never-added")

        _ = try waitFor { done throws(ParleyError) in try client.connect(userID: "alice", sessionToken: tokens["alice"]!, completion: done) }
        #expect(engineWaitUntil { connections.value.count >= 4 })
        #expect(Array(connections.value.prefix(4)) == ["x2:connecting", "y:connecting", "x2:connected", "y:connected"])
        for index in 1...4 {
            _ = try self.admin(admin, "POST", "/v3/group_channels/h-room/messages",
                               ["message_type": "MESG", "user_id": "bob", "message": .string("m\(index)")])
        }
        #expect(engineWaitUntil { heard.value.filter { $0.hasSuffix("m4") }.count == 2 })
        usleep(100_000)
        #expect(heard.value == [
            "set:m1", "a:m1", "b:m1", "c:m1",
            "set:m2", "a:m2", "c:m2",
            "set:m3", "a:m3", "c:m3",
            "set:m4", "a:m4",
        ])
    }
}
