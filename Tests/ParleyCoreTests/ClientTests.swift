import Dispatch
import Glibc
import Testing
@testable import ParleyCore

/// A listening socket that never accepts, so requests to it hang until cancelled.
private final class BlackHole {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(fd, raw, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound else { throw ParleyError(.io, "black hole socket failed: errno \(errno)") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}

private final class Outcomes: Sendable {
    let results = Locked<[Result<JSONValue, ParleyError>]>([])
    func add(_ result: Result<JSONValue, ParleyError>) { results.withLock { $0.append(result) } }
    var all: [Result<JSONValue, ParleyError>] { results.withLock { $0 } }
}

@Suite struct ClientConfigurationTests {
    @Test func defaultsFromEmptyDocument() throws {
        for text in ["", "  ", "{}"] {
            let configuration = try ClientConfiguration(json: text)
            #expect(configuration == ClientConfiguration())
            #expect(configuration.callbackMode == .thread)
            #expect(configuration.verifyTLS)
        }
    }

    @Test func parsesEveryKey() throws {
        let configuration = try ClientConfiguration(json: """
            {"server_url": "https://chat.example/", "dispatch_mode": "manual", "log_level": "debug",
             "request_timeout_ms": 1500, "connect_timeout_ms": 700, "tls_verify": false,
             "ca_file": "/etc/ca.pem", "api_token": "t", "user_agent": "app/1"}
            """)
        #expect(configuration.serverURL == "https://chat.example")
        #expect(configuration.callbackMode == .manual)
        #expect(configuration.logLevel == .debug)
        #expect(configuration.requestTimeoutMs == 1500)
        #expect(configuration.connectTimeoutMs == 700)
        #expect(!configuration.verifyTLS)
        #expect(configuration.caFile == "/etc/ca.pem")
        #expect(configuration.apiToken == "t")
        #expect(configuration.userAgent == "app/1")
    }

    @Test(arguments: [
        ("{\"unknown\": 1}", "unknown"),
        ("{\"server_url\": 5}", "server_url"),
        ("{\"server_url\": \"ws://x\"}", "server_url"),
        ("{\"dispatch_mode\": \"eventually\"}", "dispatch_mode"),
        ("{\"log_level\": \"loud\"}", "log_level"),
        ("{\"request_timeout_ms\": 0}", "request_timeout_ms"),
        ("{\"tls_verify\": \"yes\"}", "tls_verify"),
        ("[]", "config"),
    ])
    func refusesBadDocumentsNamingTheKey(text: String, key: String) {
        do {
            _ = try ClientConfiguration(json: text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.code == .invalidArgument)
            #expect(error.message.contains(key), "\(error.message)")
        }
    }

    /// The table parley_configuration_keys returns (docs/C-REFERENCE.md) says what the parser
    /// does: every default given explicitly is the default, a value of another type is refused,
    /// a range's bounds hold and every choice named is accepted.
    @Test func keyTableMatchesTheParser() throws {
        func accepts(_ fields: [String: JSONValue]) -> Bool {
            (try? ClientConfiguration(json: JSONValue.object(fields).canonicalText)) != nil
        }
        let keys = ClientConfiguration.keys
        #expect(Set(keys.map(\.name)).count == keys.count)
        var defaults: [String: JSONValue] = [:]
        for key in keys where key.defaultValue != .null { defaults[key.name] = key.defaultValue }
        #expect(try ClientConfiguration(json: JSONValue.object(defaults).canonicalText) == ClientConfiguration())
        for key in keys {
            #expect(["string", "integer", "boolean"].contains(key.type), "\(key.name)")
            #expect(key.defaultValue == .null || key.defaultValue.typeName == key.type, "\(key.name)")
            #expect(!accepts([key.name: key.type == "string" ? 1 : "1"]), "\(key.name)")
            if key.type == "integer" {
                // "lo..hi", maybe followed by words ("except 0", ", at least ...").
                let range = key.values.prefix { $0 != " " && $0 != "," }.split(separator: ".")
                let low = try #require(range.first.flatMap { Int64($0) }, "\(key.name): \(key.values)")
                let high = try #require(range.last.flatMap { Int64($0) }, "\(key.name): \(key.values)")
                // reconnect_max_delay_ms is at least reconnect_initial_delay_ms, as its values say.
                let companions: [String: JSONValue] = key.name == "reconnect_max_delay_ms" ? ["reconnect_initial_delay_ms": 0] : [:]
                #expect(accepts(companions.merging([key.name: .int(low)]) { $1 }), "\(key.name)")
                #expect(accepts([key.name: .int(high)]), "\(key.name)")
                #expect(!accepts([key.name: .int(low - 1)]), "\(key.name)")
                #expect(!accepts([key.name: .int(high + 1)]), "\(key.name)")
                if key.values.hasSuffix("except 0") { #expect(!accepts([key.name: 0]), "\(key.name)") }
            }
            let choices = key.values.split(separator: "\"", omittingEmptySubsequences: false).enumerated()
                .filter { $0.offset % 2 == 1 }.map { String($0.element) }
            for choice in choices {
                #expect(accepts([key.name: .string(choice)]), "\(key.name): \(choice)")
            }
            if !choices.isEmpty { #expect(!accepts([key.name: "no-such-choice"]), "\(key.name)") }
        }
    }

    @Test func malformedJSONIsInvalidJSON() {
        #expect(throws: ParleyError.self) { try ClientConfiguration(json: "{\"server_url\": ") }
        do { _ = try ClientConfiguration(json: "{,}") } catch { #expect(error.code == .invalidJSON) }
    }
}

@Suite struct ClientTests {
    /// The application's handlers are read for every event and log record. Read through a
    /// generic lock holding them in a tuple, each read wrapped the stored closure in two more
    /// thunks for good: after 300,000 reads a call walked 600,000 frames and overflowed the
    /// stack (and long before that, a catch-up spent its time there).
    @Test func handlersReadManyTimesStayOneCallDeep() {
        let handlers = AppHandlers()
        let events = Box(0)
        handlers.event.set("", { _, _, _ in events.update { $0 += 1 } })
        var event: AppHandlers.EventHandler?
        for _ in 0..<300_000 { handlers.event.forEach { event = $0 } }
        event?("message_received", "room", "{}")
        #expect(events.value == 1)

        let sink = ParleyClient.LogSink(level: .debug, handler: { _, _ in events.update { $0 += 1 } })
        var log: ParleyClient.LogHandler?
        for _ in 0..<300_000 { log = sink.state.withLock { $0.handler } }
        log?(.info, "still one call deep")
        #expect(events.value == 2)
    }

    @Test func requestToRefusedPortFailsWithNetworkError() throws {
        var configuration = ClientConfiguration()
        configuration.serverURL = "http://127.0.0.1:9"
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        let outcomes = Outcomes()
        try client.request(method: "GET", path: "/v3/users") { outcomes.add($0) }
        #expect(engineWaitUntil(timeoutMs: 10_000) { outcomes.all.count == 1 })
        guard case .failure(let error) = outcomes.all.first else { Issue.record("expected a failure"); return }
        #expect(error.code == .network)
    }

    @Test func closeCancelsInFlightRequestsExactlyOnceBeforeReturning() throws {
        let hole = try BlackHole()
        var configuration = ClientConfiguration()
        configuration.serverURL = "http://127.0.0.1:\(hole.port)"
        let client = try ParleyClient(configuration: configuration)
        let outcomes = Outcomes()
        for _ in 0..<5 { try client.request(method: "GET", path: "/slow") { outcomes.add($0) } }
        let single = try client.request(method: "GET", path: "/slow") { outcomes.add($0) }
        #expect(client.cancel(operation: single))
        #expect(!client.cancel(operation: single))
        usleep(50_000)
        client.close()
        let results = outcomes.all
        #expect(results.count == 6)
        #expect(results.allSatisfy { if case .failure(let error) = $0 { error.code == .cancelled } else { false } })
        // Nothing after close: new operations are refused, nothing more arrives.
        #expect(throws: ParleyError.self) { try client.request(method: "GET", path: "/x") { outcomes.add($0) } }
        #expect(throws: ParleyError.self) { try client.post {} }
        usleep(50_000)
        #expect(outcomes.all.count == 6)
        client.close()
    }

    /// The blocks an operation queues on the engine queue do not hold the client: the
    /// application's last reference frees it where it is dropped, never on the engine queue
    /// (where its `close()` would wait for callbacks that may wait for that queue).
    @Test func queuedOperationsDoNotKeepTheClientAlive() throws {
        let hole = try BlackHole()
        var configuration = ClientConfiguration()
        configuration.serverURL = "http://127.0.0.1:\(hole.port)"
        var client: ParleyClient? = try ParleyClient(configuration: configuration)
        let engine = client!.syncEngine
        let weakClient = WeakReference(client)
        let outcomes = Outcomes()
        // The engine queue is held until the client is gone (or for 5 s), so every block below
        // stays queued; close(), from deinit, then needs the queue and gets it.
        let held = DispatchSemaphore(value: 0)
        engine.queue.async { held.wait() }
        DispatchQueue.global().async {
            let deadline = DispatchTime.now() + .seconds(5)
            while weakClient.object != nil, DispatchTime.now() < deadline { usleep(1_000) }
            held.signal()
        }
        try client!.request(method: "GET", path: "/slow") { outcomes.add($0) }
        try client!.perform("get_group_channel", params: ["channel_url": "c"]) { outcomes.add($0) }
        client = nil
        #expect(weakClient.object == nil)
        // Both blocks ran before close() went on: the request reached the black hole and was
        // cancelled, the operation found nobody connected.
        let codes = outcomes.all.map { outcome -> ParleyErrorCode? in if case .failure(let error) = outcome { error.code } else { nil } }
        #expect(codes.count == 2 && codes.contains(.cancelled) && codes.contains(.invalidState))
    }

    @Test func requestArgumentsAreValidated() throws {
        let client = try ParleyClient(configuration: ClientConfiguration())
        defer { client.close() }
        #expect(throws: ParleyError.self) { try client.request(method: "GET", path: "/v3/users") { _ in } }  // no server_url
        var configuration = ClientConfiguration()
        configuration.serverURL = "http://127.0.0.1:9"
        let configured = try ParleyClient(configuration: configuration)
        defer { configured.close() }
        for (method, path) in [("FETCH", "/a"), ("GET", "a"), ("GET", "/a b"), ("GET", "/a\nb")] {
            do {
                try configured.request(method: method, path: path) { _ in }
                Issue.record("accepted \(method) \(path)")
            } catch {
                #expect(error.code == .invalidArgument)
            }
        }
    }

    /// Two clients in one process: work on one engine's queue is not on the other's, so the
    /// other's `runNow` waits for its own queue instead of running beside it.
    @Test func eachEngineKnowsOnlyItsOwnQueue() throws {
        let first = try ParleyClient(configuration: ClientConfiguration())
        defer { first.close() }
        let second = try ParleyClient(configuration: ClientConfiguration())
        defer { second.close() }
        let (one, other) = (first.syncEngine, second.syncEngine)
        #expect(!one.isOnQueue && !other.isOnQueue)
        let seen = one.queue.sync { (own: one.isOnQueue, other: other.isOnQueue, nested: other.runNow { other.isOnQueue }) }
        #expect(seen.own && !seen.other && seen.nested)
    }

    @Test func logRecordsGoThroughTheDispatcherUpToTheLevel() throws {
        var configuration = ClientConfiguration()
        configuration.callbackMode = .manual
        let client = try ParleyClient(configuration: configuration)
        defer { client.close() }
        let records = Locked<[String]>([])
        client.setLogHandler(level: .info) { level, message in records.withLock { $0.append("\(level.name):\(message)") } }
        client.log(.error, "e")
        client.log(.info, "i")
        client.log(.debug, "d")
        #expect(records.withLock { $0 }.isEmpty)  // manual mode: nothing until dispatch
        #expect(try client.dispatcher.dispatch() == 2)
        #expect(records.withLock { $0 } == ["error:e", "info:i"])
    }

    @Test func answersMapToResultsAndErrors() {
        let ok = HTTPResponse(status: 200, headers: [], body: Array("{\"a\":1}".utf8))
        #expect((try? APIEndpoint.decodeAnswer(ok).get()) == ["a": 1])
        let empty = HTTPResponse(status: 204, headers: [], body: [])
        #expect((try? APIEndpoint.decodeAnswer(empty).get()) == .object([:]))
        let garbage = HTTPResponse(status: 200, headers: [], body: Array("<html>".utf8))
        if case .failure(let error) = APIEndpoint.decodeAnswer(garbage) { #expect(error.code == .protocolViolation) } else { Issue.record("garbage accepted") }
        let forbidden = HTTPResponse(status: 403, headers: [], body: Array("{\"error\":true,\"code\":400108,\"message\":\"not an operator\"}".utf8))
        if case .failure(let error) = APIEndpoint.decodeAnswer(forbidden) {
            #expect(error == ParleyError(.forbidden, "not an operator", httpStatus: 403, serverCode: 400108))
        } else { Issue.record("403 accepted") }
        let bare = HTTPResponse(status: 502, headers: [], body: Array("Bad Gateway".utf8))
        if case .failure(let error) = APIEndpoint.decodeAnswer(bare) {
            #expect(error.code == .server && error.httpStatus == 502)
        } else { Issue.record("502 accepted") }
    }
}
