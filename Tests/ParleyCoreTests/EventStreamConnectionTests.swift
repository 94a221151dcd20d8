import Dispatch
import Glibc
import Synchronization
import Testing
@testable import ParleyCore

// EventStreamConnection on its own, against a scripted loopback peer: resume ids, duplicate
// and malformed events, refusals, token expiry, backoff limits, idle detection, reconnect on
// demand and stop. The real server's side of the same behaviour is covered by the engine
// tests; here every byte on the wire is chosen so each rule is exercised exactly.

/// Everything the connection told its handler, in order.
private final class StreamRecorder: Sendable {
    enum Entry: Sendable, Equatable {
        case state(ConnectionState, ConnectionState, ParleyErrorCode?)
        case connected(Int64?)
        case event(Int64, String)
        case resync(String, Int64)
        case tokenExpired
        case attempt(Int)
        case skipped
    }

    private let entries = Locked<[Entry]>([])
    /// The events as handed over, data unparsed.
    let frames = Locked<[StreamFrame]>([])
    private let errors = Locked<[ParleyError]>([])
    /// Runs inside the handler for each entry (on the callback queue).
    let onEntry: Locked<(@Sendable (Entry) -> Void)?> = Locked(nil)

    private func add(_ entry: Entry) {
        entries.withLock { $0.append(entry) }
        let hook = onEntry.withLock { $0 }
        hook?(entry)
    }

    var all: [Entry] { entries.withLock { $0 } }
    var lastError: ParleyError? { errors.withLock { $0.last } }

    var states: [ConnectionState] {
        all.compactMap { if case .state(_, let new, _) = $0 { new } else { nil } }
    }

    var eventIDs: [Int64] {
        all.compactMap { if case .event(let id, _) = $0 { id } else { nil } }
    }

    func count(_ entry: Entry) -> Int { all.filter { $0 == entry }.count }

    var handler: EventStreamHandler {
        EventStreamHandler(
            stateChanged: { old, new, error in
                if let error { self.errors.withLock { $0.append(error) } }
                self.add(.state(old, new, error?.code))
            },
            connected: { self.add(.connected($0)) },
            event: { frame in
                self.frames.withLock { $0.append(frame) }
                self.add(.event(frame.id, frame.type))
            },
            resyncRequired: { self.add(.resync($0, $1)) },
            tokenExpired: { self.add(.tokenExpired) },
            reconnectAttempt: { attempt, _ in self.add(.attempt(attempt)) },
            eventSkipped: { _ in self.add(.skipped) })
    }
}

/// A scripted stream server: connection number `n` (1-based) is handed to `script(n, ...)`.
private func streamPeer(_ script: @escaping @Sendable (Int, LoopbackConnection) -> Void) throws -> LoopbackPeer {
    let counter = Atomic<Int>(0)
    return try LoopbackPeer { connection in
        let number = counter.add(1, ordering: .relaxed).newValue
        script(number, connection)
    }
}

extension LoopbackConnection {
    /// Reads the request and starts a chunked event-stream answer.
    fileprivate func openStream() -> RecordedRequest? {
        guard let request = readRequest() else { return nil }
        send("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        return request
    }

    fileprivate func sendConnected(lastEventID: Int64) {
        sendChunk("event: connected\ndata: {\"last_event_id\":\(lastEventID)}\n\n")
    }

    fileprivate func sendEvent(id: Int64, category: String = "message_received") {
        sendChunk("id: \(id)\nevent: \(category)\ndata: {\"channel_url\":\"c\",\"n\":\(id)}\n\n")
    }

    /// Ends the chunked body cleanly (the server ending the stream).
    fileprivate func endStream() {
        send("0\r\n\r\n")
    }

    /// Keeps the connection open until the client goes away (or `timeoutMs`).
    fileprivate func holdOpen(timeoutMs: Int = 10_000) {
        _ = waitForClientClose(timeoutMs: timeoutMs)
    }
}

@Suite struct EventStreamConnectionTests {
    private static let quickPolicy = ReconnectPolicy(
        initialDelayMs: 20, maxDelayMs: 40, jitter: .none, idleTimeoutSec: 0, connectTimeoutMs: 2000)

    private func makeConnection(
        _ peer: LoopbackPeer, _ recorder: StreamRecorder, lastEventID: Int64? = nil,
        policy: ReconnectPolicy = quickPolicy, token: String = "key-1"
    ) throws -> (EventStreamConnection, HTTPClient) {
        let http = try HTTPClient(configuration: HTTPClientConfiguration(proxy: ""))
        let connection = try EventStreamConnection(
            http: http, serverURL: peer.baseURL, userID: "al ice", sessionToken: token,
            lastEventID: lastEventID, policy: policy, handler: recorder.handler)
        return (connection, http)
    }

    @Test func resumesWithTheLastAcceptedIdAndDropsReplayedDuplicates() throws {
        let peer = try streamPeer { number, connection in
            guard connection.openStream() != nil else { return }
            switch number {
            case 1:
                connection.sendConnected(lastEventID: 10)
                connection.sendEvent(id: 11)
                connection.sendEvent(id: 12)
                connection.endStream()
            default:
                connection.sendConnected(lastEventID: 13)
                connection.sendEvent(id: 12)  // already delivered: must be dropped
                connection.sendEvent(id: 13)
                connection.holdOpen()
            }
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { recorder.eventIDs.count == 3 })
        stream.stop()
        #expect(recorder.eventIDs == [11, 12, 13])
        #expect(stream.duplicateEventCount == 1)
        #expect(stream.lastEventID == 13)
        let requests = peer.requests
        #expect(requests.count == 2)
        #expect(requests.first?.target == "/v3/users/al%20ice/events")
        #expect(requests.first?.header("last-event-id") == nil)
        #expect(requests.first?.header("session-key") == "key-1")
        #expect(requests.last?.header("last-event-id") == "12")
        #expect(recorder.count(.connected(nil)) == 1 && recorder.count(.connected(12)) == 1)
        #expect(recorder.states == [.connecting, .open, .reconnecting, .connecting, .open, .closed])
    }

    @Test func aFreshConnectionAdoptsTheServersPositionSoAQuietDropMissesNothing() throws {
        let peer = try streamPeer { number, connection in
            guard connection.openStream() != nil else { return }
            connection.sendConnected(lastEventID: 41)
            if number == 1 {
                connection.endStream()
            } else {
                connection.holdOpen()
            }
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { peer.requests.count == 2 && stream.state == .open })
        stream.stop()
        #expect(peer.requests.last?.header("last-event-id") == "41")
        #expect(recorder.eventIDs.isEmpty)
    }

    @Test func reconnectNowOnAnOpenStreamReplacesTheConnectionAndResumes() throws {
        let firstClosed = Atomic<Bool>(false)
        let peer = try streamPeer { number, connection in
            guard connection.openStream() != nil else { return }
            connection.sendConnected(lastEventID: 4)
            if number == 1 {
                connection.sendEvent(id: 5)
                if connection.waitForClientClose(timeoutMs: 10_000) { firstClosed.store(true, ordering: .relaxed) }
            } else {
                connection.sendEvent(id: 6)
                connection.holdOpen()
            }
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { recorder.eventIDs == [5] })
        stream.reconnectNow()
        #expect(pollUntil(timeoutMs: 5000) { recorder.eventIDs == [5, 6] })
        #expect(pollUntil(timeoutMs: 5000) { firstClosed.load(ordering: .relaxed) })
        #expect(peer.requests.last?.header("last-event-id") == "5")
        #expect(stream.state == .open)
        stream.stop()
        #expect(recorder.states == [.connecting, .open, .reconnecting, .connecting, .open, .closed])
        // A manual reconnect is not a backoff attempt.
        #expect(!recorder.all.contains { if case .attempt = $0 { true } else { false } })
    }

    @Test func reconnectNowDoesNothingWhenClosed() throws {
        let peer = try streamPeer { _, connection in connection.holdOpen(timeoutMs: 500) }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.reconnectNow()
        usleep(200_000)
        #expect(stream.state == .closed)
        #expect(peer.connectionCount == 0)
        #expect(recorder.all.isEmpty)
    }

    @Test func eventsWithoutAnIntegerIdAreSkippedAndTheStreamStaysUp() throws {
        let peer = try streamPeer { _, connection in
            guard connection.openStream() != nil else { return }
            connection.sendConnected(lastEventID: 0)
            // No id line yet (a later one would inherit the previous id, as SSE defines).
            connection.sendChunk("event: message_received\ndata: {\"a\":1}\n\n")
            connection.sendChunk("id: 1\nevent: message_received\ndata: {not json\n\n")
            connection.sendChunk("id: x7\nevent: message_received\ndata: {\"a\":1}\n\n")  // id not an integer
            connection.sendChunk("id: 2\nevent: message_received\ndata: [1,2]\n\n")  // not an object
            connection.sendChunk(": a heartbeat comment\n\n")
            connection.sendEvent(id: 3)
            connection.sendChunk("id: 4\nevent: message\ndata: {\"category\":\"channel_changed\"}\n\n")
            connection.holdOpen()
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        // Data is handed on unparsed: the engine parses it (`StreamEvent(frame:)`, below).
        #expect(pollUntil(timeoutMs: 5000) { recorder.eventIDs == [1, 2, 3, 4] }, "\(recorder.all)")
        #expect(stream.skippedEventCount == 2)
        #expect(recorder.count(.skipped) == 2)
        #expect(stream.state == .open)
        #expect(peer.connectionCount == 1)
        stream.stop()
        let parsed = recorder.frames.withLock { $0 }.map { frame in Result { () throws(ParleyError) in try StreamEvent(frame: frame) } }
        #expect(parsed.count == 4)
        guard parsed.count == 4 else { return }
        #expect((try? parsed[0].get()) == nil)
        if case .failure(let error) = parsed[0] { #expect(error.message.hasPrefix("event 1: data is not JSON")) }
        if case .failure(let error) = parsed[1] { #expect(error.message == "event 2: data is a JSON array, not an object") }
        #expect((try? parsed[1].get()) == nil)
        #expect((try? parsed[2].get())?.id == 3)
        // Sent without an `event:` line's name, the event is named by its data's category.
        #expect((try? parsed[3].get())?.category == "channel_changed")
    }


    @Test func resyncMovesTheResumePointAndTellsTheOwner() throws {
        let peer = try streamPeer { number, connection in
            guard connection.openStream() != nil else { return }
            connection.sendConnected(lastEventID: 900)
            if number == 1 {
                connection.sendChunk("id: 900\nevent: resync\ndata: {\"reason\":\"retention\",\"last_event_id\":900}\n\n")
                connection.endStream()
            } else {
                connection.holdOpen()
            }
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder, lastEventID: 3)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { peer.requests.count == 2 })
        stream.stop()
        #expect(recorder.all.contains(.resync("retention", 900)))
        #expect(peer.requests.first?.header("last-event-id") == "3")
        #expect(peer.requests.last?.header("last-event-id") == "900")
    }

    @Test func anExpiredTokenWaitsForANewOneWithoutRetrying() throws {
        let peer = try streamPeer { number, connection in
            if number == 1 {
                guard connection.readRequest() != nil else { return }
                connection.respond(
                    status: 401, reason: "Unauthorized", headers: ["Content-Type: application/json"],
                    body: Array(#"{"error":true,"code":400302,"message":"session key expired"}"#.utf8))
            } else {
                guard connection.openStream() != nil else { return }
                connection.sendConnected(lastEventID: 1)
                connection.holdOpen()
            }
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { recorder.count(.tokenExpired) == 1 })
        #expect(stream.state == .reconnecting)
        #expect(recorder.lastError?.code == .unauthorized && recorder.lastError?.serverCode == 400302)
        // No attempt is scheduled and reconnectNow does not bypass the wait for a token.
        stream.reconnectNow()
        usleep(300_000)
        #expect(peer.requests.count == 1)
        #expect(throws: ParleyError.self) { try stream.updateSessionToken("") }
        #expect(throws: ParleyError.self) { try stream.updateSessionToken("bad\ntoken") }
        try stream.updateSessionToken("key-2")
        #expect(pollUntil(timeoutMs: 5000) { stream.state == .open })
        #expect(peer.requests.last?.header("session-key") == "key-2")
        stream.stop()
    }

    @Test func anUnknownKeyThatNeverWorkedClosesTheStream() throws {
        let peer = try streamPeer { _, connection in
            guard connection.readRequest() != nil else { return }
            connection.respond(
                status: 401, reason: "Unauthorized",
                body: Array(#"{"error":true,"code":400301,"message":"unknown session key"}"#.utf8))
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { stream.state == .closed && !recorder.states.isEmpty })
        usleep(200_000)
        #expect(peer.requests.count == 1)
        #expect(recorder.lastError?.code == .unauthorized)
        #expect(recorder.lastError?.message.contains("unknown session key") == true)
        #expect(recorder.count(.tokenExpired) == 0)
    }

    @Test func aForbiddenAnswerClosesAndServerErrorsRetryUntilTheLimit() throws {
        let forbidden = try streamPeer { _, connection in
            guard connection.readRequest() != nil else { return }
            connection.respond(status: 403, reason: "Forbidden", body: Array(#"{"error":true,"code":400108,"message":"no"}"#.utf8))
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(forbidden, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { recorder.states.last == .closed })
        #expect(recorder.lastError?.code == .forbidden && recorder.lastError?.httpStatus == 403)
        #expect(forbidden.requests.count == 1)

        let failing = try streamPeer { _, connection in
            guard connection.readRequest() != nil else { return }
            connection.respond(status: 503, reason: "Service Unavailable", body: [])
        }
        var policy = Self.quickPolicy
        policy.maxAttempts = 2
        let giveUp = StreamRecorder()
        let (limited, http2) = try makeConnection(failing, giveUp, policy: policy)
        defer { http2.shutdown() }
        limited.start()
        #expect(pollUntil(timeoutMs: 5000) { giveUp.states.last == .closed })
        #expect(failing.requests.count == 3)  // the first try and two reconnection attempts
        #expect(giveUp.all.filter { if case .attempt = $0 { true } else { false } } == [.attempt(1), .attempt(2)])
        #expect(giveUp.lastError?.message.contains("gave up after 2") == true)
    }

    @Test func aWrongContentTypeIsRetriedNotParsed() throws {
        let peer = try streamPeer { number, connection in
            if number == 1 {
                guard connection.readRequest() != nil else { return }
                connection.respond(
                    headers: ["Content-Type: text/html"], body: Array("id: 5\nevent: x\ndata: {}\n\n".utf8))
            } else {
                guard connection.openStream() != nil else { return }
                connection.sendConnected(lastEventID: 0)
                connection.holdOpen()
            }
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { stream.state == .open })
        stream.stop()
        #expect(recorder.eventIDs.isEmpty)
        #expect(recorder.all.contains(.state(.connecting, .reconnecting, .protocolViolation)))
    }

    @Test func aSilentStreamIsDetectedByTheIdleWatchdog() throws {
        let peer = try streamPeer { _, connection in
            guard connection.openStream() != nil else { return }
            connection.sendConnected(lastEventID: 0)
            connection.holdOpen()  // and says nothing more
        }
        var policy = Self.quickPolicy
        policy.idleTimeoutSec = 1
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder, policy: policy)
        defer { http.shutdown() }
        stream.start()
        #expect(pollUntil(timeoutMs: 8000) { peer.connectionCount >= 2 })
        stream.stop()
        #expect(recorder.states.prefix(3) == [.connecting, .open, .reconnecting])
    }

    @Test func stopFromInsideAHandlerEndsDeliveryAfterTheClosedState() throws {
        let peer = try streamPeer { _, connection in
            guard connection.openStream() != nil else { return }
            connection.sendConnected(lastEventID: 0)
            for id in 1...20 { connection.sendEvent(id: Int64(id)) }
            connection.holdOpen()
        }
        let recorder = StreamRecorder()
        let (stream, http) = try makeConnection(peer, recorder)
        defer { http.shutdown() }
        recorder.onEntry.withLock {
            $0 = { entry in
                if entry == .event(3, "message_received") { stream.stop() }
            }
        }
        stream.start()
        #expect(pollUntil(timeoutMs: 5000) { recorder.states.last == .closed })
        usleep(200_000)
        #expect(recorder.eventIDs == [1, 2, 3])
        #expect(recorder.all.last == .state(.open, .closed, nil))
        // Events accepted but not handed over are replayed by the next start.
        #expect(stream.lastEventID == 3)
        recorder.onEntry.withLock { $0 = nil }
    }

    @Test func invalidArgumentsAreRejectedAtCreation() throws {
        let http = try HTTPClient(configuration: HTTPClientConfiguration(proxy: ""))
        defer { http.shutdown() }
        let handler = StreamRecorder().handler
        #expect(throws: ParleyError.self) {
            _ = try EventStreamConnection(http: http, serverURL: "ftp://x", userID: "u", sessionToken: "t", lastEventID: nil, handler: handler)
        }
        #expect(throws: ParleyError.self) {
            _ = try EventStreamConnection(http: http, serverURL: "http://x", userID: "", sessionToken: "t", lastEventID: nil, handler: handler)
        }
        #expect(throws: ParleyError.self) {
            _ = try EventStreamConnection(http: http, serverURL: "http://x", userID: "u", sessionToken: "", lastEventID: nil, handler: handler)
        }
        #expect(throws: ParleyError.self) {
            _ = try EventStreamConnection(http: http, serverURL: "http://x", userID: "u", sessionToken: "t", lastEventID: -1, handler: handler)
        }
        #expect(throws: ParleyError.self) {
            _ = try EventStreamConnection(
                http: http, serverURL: "http://x", userID: "u", sessionToken: "t", lastEventID: nil,
                policy: ReconnectPolicy(initialDelayMs: 100, maxDelayMs: 10), handler: handler)
        }
    }
}
