// Connecting, the real-time event stream, and catching up after a disconnection.

/// The application's handlers for connection changes and real-time events.
struct AppHandlers: Sendable {
    var connection: (@Sendable (ConnectionEvent, ParleyError?) -> Void)?
    var event: (@Sendable (_ category: String, _ channelURL: String, _ payloadJSON: String) -> Void)?
}

extension ParleyClient {
    /// Sets (nil: removes) the handler told about connection changes (`ConnectionEvent`),
    /// with the error that caused a change when there is one. Runs on the callback context.
    public func setConnectionHandler(_ handler: (@Sendable (ConnectionEvent, ParleyError?) -> Void)?) {
        appHandlers.withLock { $0.connection = handler }
    }

    /// Sets (nil: removes) the handler of real-time events: the event's category
    /// (docs/PROTOCOL.md §9, plus the local `message_*` categories of sending), the channel
    /// URL and the event's JSON. The cache is updated before the handler runs.
    public func setEventHandler(_ handler: (@Sendable (_ category: String, _ channelURL: String, _ payloadJSON: String) -> Void)?) {
        appHandlers.withLock { $0.event = handler }
    }

    func emitConnection(_ event: ConnectionEvent, _ error: ParleyError?) {
        guard let handler = appHandlers.withLock({ $0.connection }) else { return }
        dispatcher.enqueue { handler(event, error) }
    }

    func emitEvent(_ category: String, channelURL: String, payload: JSONValue) {
        guard let handler = appHandlers.withLock({ $0.event }) else { return }
        let text = payload.canonicalText
        dispatcher.enqueue { handler(category, channelURL, text) }
    }

    func engineLog(_ level: LogLevel, _ message: String) { log(level, message) }

    /// Connects as `userID` with a session token issued by the server
    /// (`POST /v3/users/{user_id}/token`): opens the user's cache, fetches the user, starts
    /// the real-time stream, catches the cache up with changelogs and resends the outbox.
    /// Completes with the user object. When the server cannot be reached but the cache
    /// knows this user, it completes with the cached user and keeps reconnecting.
    @discardableResult
    public func connect(
        userID: String, sessionToken: String,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        guard !userID.isEmpty, userID.utf8.count <= 80 else {
            throw .invalidArgument("user_id must be 1 to 80 bytes long")
        }
        guard !sessionToken.isEmpty, !sessionToken.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw .invalidArgument("session_token must be non-empty and free of control characters")
        }
        return try startOperation(completion) { id, finish in
            self.engine.queue.async {
                let engine = self.engine
                if let current = engine.session, current.userID != userID {
                    finish(.failure(.invalidState("already connected as '\(current.userID)': disconnect first")))
                    return
                }
                engine.openCache(userID: userID, log: self.engineLog)
                let path = "/v3/users/" + URLEncoding.encodePathSegment(userID)
                self.sendHTTP(operation: id, method: "GET", pathAndQuery: path, body: nil, credential: .session(sessionToken)) { result in
                    engine.queue.async {
                        switch result {
                        case .success(let user):
                            engine.withCache("storing the user", log: self.engineLog) { cache throws(ParleyError) in
                                try cache.setMetaValue(user.canonicalText, forKey: "current_user")
                            }
                            self.beginSession(userID: userID, token: sessionToken, user: user)
                            finish(.success(user))
                        case .failure(let error) where error.code == .network || error.code == .timeout:
                            var cached: JSONValue?
                            engine.withCache("reading the cached user", log: self.engineLog) { cache throws(ParleyError) in
                                cached = try cache.metaValue("current_user").flatMap { try? JSONValue.parse($0) }
                            }
                            guard let cached else {
                                finish(.failure(error))
                                return
                            }
                            self.log(.info, "connect: server unreachable (\(error.message)); working from the cache")
                            self.beginSession(userID: userID, token: sessionToken, user: cached)
                            finish(.success(cached))
                        case .failure(let error):
                            finish(.failure(error))
                        }
                    }
                }
            }
        }
    }

    /// Engine queue: the session starts; the stream follows.
    private func beginSession(userID: String, token: String, user: JSONValue) {
        let engine = self.engine
        engine.assertOnQueue()
        engine.stream?.stop()
        engine.sessionEpoch &+= 1
        engine.session = Session(userID: userID, token: token)
        engine.user = user
        engine.streamWasOpen = false
        emitConnection(.connecting, nil)
        var lastEventID: Int64?
        engine.withCache("reading the resume point", log: engineLog) { cache throws(ParleyError) in
            lastEventID = try cache.metaValue("last_event_id").flatMap { Int64($0) }
        }
        let epoch = engine.sessionEpoch
        do {
            let stream = try EventStreamConnection(
                http: http, serverURL: configuration.serverURL ?? "", userID: userID, sessionToken: token,
                lastEventID: lastEventID, policy: configuration.reconnectPolicy, handler: streamHandler(epoch: epoch))
            engine.stream = stream
            stream.start()
        } catch {
            log(.error, "event stream: \(error)")
            emitConnection(.disconnected, error)
        }
    }

    /// The stream's callbacks, each hopping to the engine queue and ignored once the
    /// session they belong to has ended.
    private func streamHandler(epoch: UInt64) -> EventStreamHandler {
        let engine = self.engine
        let weak = WeakClient(self)
        let onEngine: @Sendable (@escaping @Sendable (ParleyClient) -> Void) -> Void = { work in
            engine.queue.async {
                guard let client = weak.client, engine.sessionEpoch == epoch else { return }
                work(client)
            }
        }
        return EventStreamHandler(
            stateChanged: { old, new, error in
                onEngine { $0.streamStateChanged(old, new, error) }
            },
            event: { event in
                onEngine { $0.streamEvent(event) }
            },
            resyncRequired: { reason, _ in
                onEngine { client in
                    client.log(.info, "event stream: resync required (\(reason)); running changelogs")
                    client.catchUp(then: nil)
                }
            },
            tokenExpired: {
                onEngine { $0.emitConnection(.sessionTokenRequired, nil) }
            },
            eventSkipped: { reason in
                weak.client?.log(.warning, "event stream: skipped an event: \(reason)")
            })
    }

    private func streamStateChanged(_ old: ConnectionState, _ new: ConnectionState, _ error: ParleyError?) {
        let engine = self.engine
        switch new {
        case .open:
            if !engine.streamWasOpen {
                engine.streamWasOpen = true
                emitConnection(.connected, nil)
                catchUp(then: nil)
            } else {
                catchUp { self.emitConnection(.reconnectSucceeded, nil) }
            }
        case .reconnecting:
            if old == .open || !engine.streamWasOpen && old == .closed {
                // Messages may arrive unseen until the stream is back: no range reaches the newest end.
                engine.withCache("marking ranges", log: engineLog) { cache throws(ParleyError) in try cache.clearReachesNewest() }
                emitConnection(.reconnectStarted, error)
            } else if old == .connecting {
                if !engine.streamWasOpen && engine.reconnectFailures == 0 { emitConnection(.reconnectStarted, error) }
                engine.reconnectFailures += 1
                emitConnection(.reconnectFailed, error)
            }
        case .closed:
            if let error { emitConnection(.disconnected, error) }
        case .connecting:
            break
        }
        if new == .open { engine.reconnectFailures = 0 }
    }

    private func streamEvent(_ event: StreamEvent) {
        // The server also streams a sender's own messages. One this client sent reaches the
        // app as `message_sent` (with its req_id), so its echo is applied but not reported
        // as received: a second report would show the message twice. Other devices' sends
        // are reported as usual.
        let echo = event.category == "message_received" ? ownSend(event.data["message"]) : nil
        engine.applyEvent(event, log: engineLog)
        guard let echo else {
            emitEvent(event.category, channelURL: event.data["channel_url"]?.stringValue ?? "", payload: event.data)
            return
        }
        if case .waitingLocally(let reqID, let channelURL) = echo, let message = event.data["message"] {
            // Not on the wire from here (e.g. sent before a crash, the answer never seen): the
            // echo is the delivery confirmation once it replaced the local copy (and with it
            // the outbox entry).
            var replaced = false
            engine.withCache("checking a confirmed send", log: engineLog) { cache throws(ParleyError) in
                replaced = try cache.localMessage(reqID: reqID) == nil
            }
            if replaced { reportSent(message, reqID: reqID, channelURL: channelURL) }
        }
    }

    enum OwnSend {
        /// On the wire now, or confirmed lately: its `message_sent` comes or came from the answer.
        case inFlightOrSent
        /// A pending or failed local message not being sent right now.
        case waitingLocally(reqID: String, channelURL: String)
    }

    /// Whether `message` is one this client sent (by req_id and sender), nil when not.
    private func ownSend(_ message: JSONValue?) -> OwnSend? {
        guard let message, let reqID = message["req_id"]?.stringValue, !reqID.isEmpty,
            let me = engine.session?.userID, message["user"]?["user_id"]?.stringValue == me
        else { return nil }
        if engine.sendsInFlight.contains(reqID) || engine.recentlySent.contains(reqID) { return .inFlightOrSent }
        var local: CachedLocalMessage?
        engine.withCache("looking up a local message", log: engineLog) { cache throws(ParleyError) in
            local = try cache.localMessage(reqID: reqID)
        }
        guard let local, local.channelURL == message["channel_url"]?.stringValue else { return nil }
        return .waitingLocally(reqID: reqID, channelURL: local.channelURL)
    }

    /// Forgets the session and stops the stream: operations then fail with `.invalidState`
    /// until `connect`. The cache stays open for cached reads. The connection handler gets
    /// `disconnected`.
    public func disconnect() {
        let engine = self.engine
        let stream = engine.queue.sync { () -> EventStreamConnection? in
            defer {
                engine.stream = nil
                engine.session = nil
                engine.user = nil
                engine.sessionEpoch &+= 1
            }
            return engine.stream
        }
        stream?.stop()
        if stream != nil { emitConnection(.disconnected, nil) }
    }

    /// Reconnects the stream now (`EventStreamConnection.reconnectNow`). Throws
    /// `.invalidState` when not connected.
    public func reconnect() throws(ParleyError) {
        let stream = engine.queue.sync { engine.session == nil ? nil : engine.stream }
        guard let stream else { throw .invalidState("not connected (call connect first)") }
        if stream.state == .closed { stream.start() } else { stream.reconnectNow() }
    }

    /// Replaces the session token (after `sessionTokenRequired`, or before it expires):
    /// REST calls use it at once; a stream waiting for it reconnects.
    public func setSessionToken(_ token: String) throws(ParleyError) {
        guard !token.isEmpty, !token.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw .invalidArgument("session_token must be non-empty and free of control characters")
        }
        let engine = self.engine
        let stream = try engine.sync { () throws(ParleyError) -> EventStreamConnection? in
            guard engine.session != nil else { throw .invalidState("not connected (call connect first)") }
            engine.session?.token = token
            return engine.stream
        }
        try stream?.updateSessionToken(token)
    }

    /// The connection state of the real-time stream: "closed", "connecting", "open" or "reconnecting".
    public var connectionState: ConnectionState {
        engine.queue.sync { engine.stream?.state ?? .closed }
    }
}
