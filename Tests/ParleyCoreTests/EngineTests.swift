import Glibc
import Synchronization
import Testing
@testable import ParleyCore

/// The reference server for engine tests: `parley-server --port 0` on a temp database,
/// binary from PARLEY_SERVER_BIN or the package's server/.build/debug.
private final class EngineTestServer: Sendable {
    let url: String
    let apiToken = "engine-test-token"
    let directory: String
    private let pid: pid_t

    init() throws {
        var template = Array("/tmp/parley-engine-test-XXXXXX".utf8CString)
        let made: String? = template.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        guard let directory = made else { throw ParleyError(.io, "mkdtemp failed") }
        self.directory = directory
        let root = String(#filePath.split(separator: "/").dropLast(3).joined(separator: "/"))
        let binary = getenv("PARLEY_SERVER_BIN").map { String(cString: $0) } ?? "/\(root)/server/.build/debug/parley-server"
        guard access(binary, X_OK) == 0 else {
            throw ParleyError(.io, "parley-server not found at \(binary): build it or set PARLEY_SERVER_BIN")
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw ParleyError(.io, "pipe failed") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], STDOUT_FILENO)
        posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
        let arguments = [binary, "--port", "0", "--database", directory + "/server.sqlite", "--api-token", apiToken]
        var cArguments: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, binary, &actions, nil, &cArguments, environ)
        close(pipeFDs[1])
        guard spawned == 0 else {
            close(pipeFDs[0])
            throw ParleyError(.io, "posix_spawn failed: \(spawned)")
        }
        pid = child
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while read(pipeFDs[0], &byte, 1) == 1 && byte != 10 { line.append(byte) }
        close(pipeFDs[0])
        let text = String(decoding: line, as: UTF8.self)
        let prefix = "parley-server listening on "
        guard text.hasPrefix(prefix) else {
            kill(child, SIGKILL)
            throw ParleyError(.io, "parley-server did not start: '\(text)'")
        }
        url = String(text.dropFirst(prefix.count))
    }

    func stop() {
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        _ = system("rm -rf '\(directory)'")
    }
}

private final class Box<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>
    init(_ value: Value) { storage = Mutex(value) }
    func update(_ change: (inout Value) -> Void) { storage.withLock { change(&$0) } }
    var value: Value { storage.withLock { $0 } }
}

private func waitUntil(timeoutMs: Int = 20_000, _ condition: () -> Bool) -> Bool {
    for _ in 0..<(timeoutMs / 10) where !condition() { usleep(10_000) }
    return condition()
}

/// Runs an async client call and waits for its completion.
private func waitFor(_ start: (@escaping @Sendable (Result<JSONValue, ParleyError>) -> Void) throws(ParleyError) -> UInt64) throws -> JSONValue {
    let outcome = Box<Result<JSONValue, ParleyError>?>(nil)
    _ = try start { result in outcome.update { $0 = result } }
    guard waitUntil({ outcome.value != nil }), let result = outcome.value else {
        throw ParleyError(.timeout, "no completion")
    }
    return try result.get()
}

@Suite(.serialized) struct EngineTests {
    private func admin(_ server: EngineTestServer) throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.apiToken = server.apiToken
        configuration.cacheMode = .memory
        return try ParleyClient(configuration: configuration)
    }

    private func user(_ server: EngineTestServer, cacheDirectory: String) throws -> ParleyClient {
        var configuration = ClientConfiguration()
        configuration.serverURL = server.url
        configuration.cacheDirectory = cacheDirectory
        return try ParleyClient(configuration: configuration)
    }

    @Test func connectSendReceiveAndReadTheCache() throws {
        let server = try EngineTestServer()
        defer { server.stop() }
        let admin = try admin(server)
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
        #expect(waitUntil { connection.value.contains(.connected) })
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
        #expect(waitUntil { delivered.value != nil })
        let message = try #require(try delivered.value?.get())
        #expect(message["req_id"]?.stringValue == accepted.reqID)
        #expect((message["message_id"]?.int64Value ?? 0) > 0)

        // Another member's message arrives as an event, after the cache has it.
        _ = try waitFor { done throws(ParleyError) in
            try admin.request(method: "POST", path: "/v3/group_channels/swift-room/messages",
                              body: ["message_type": "MESG", "user_id": "bob", "message": "from bob"], completion: done)
        }
        #expect(waitUntil { events.value.filter { $0 == "message_received" }.count >= 2 })
        let cached = try JSONValue.parse(try client.cachedMessages(channelURL: "swift-room"))
        #expect(cached.arrayValue?.compactMap { $0["message"]?.stringValue } == ["from Swift", "from bob"])
        #expect(try client.cachedChannel(url: "swift-room") != nil)

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
        #expect(waitUntil { connection.value.contains(.disconnected) })
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
