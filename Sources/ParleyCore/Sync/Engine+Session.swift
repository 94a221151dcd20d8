// The session: who is connected and the real-time stream that keeps the cache current.
// The stream's callbacks hop to the engine queue and are ignored once their session ended
// (`session.epoch`); opening the stream starts a catch-up, a drop forgets which ranges reach
// the newest end, and connection changes are told to the application.

/// A reference that does not keep the engine alive (the stream's callbacks hold it).
final class WeakEngine: Sendable {
    weak let engine: Engine?

    init(_ engine: Engine) { self.engine = engine }
}

extension Engine {
    /// Engine queue: the session starts; the stream follows.
    func beginSession(userID: String, token: String, user: JSONValue) {
        assertOnQueue()
        self.session.stream?.stop()
        self.session.epoch &+= 1
        self.session.current = Session(userID: userID, token: token)
        self.session.user = user
        self.session.streamWasOpen = false
        services.connectionEvent(.connecting, nil)
        let lastEventID = read("reading the resume point") { cache throws(ParleyError) in
            try cache.metaValue("last_event_id").flatMap { Int64($0) }
        } ?? nil
        let epoch = self.session.epoch
        do {
            let stream = try EventStreamConnection(
                http: services.http, serverURL: configuration.serverURL ?? "", userID: userID, sessionToken: token,
                lastEventID: lastEventID, policy: configuration.reconnectPolicy, handler: streamHandler(epoch: epoch))
            self.session.stream = stream
            stream.start()
        } catch {
            log(.error, "event stream: \(error)")
            services.connectionEvent(.disconnected, error)
        }
    }

    /// The stream's callbacks, each hopping to the engine queue and ignored once the
    /// session they belong to has ended.
    private func streamHandler(epoch: UInt64) -> EventStreamHandler {
        let weak = WeakEngine(self)
        let queue = self.queue
        let onEngine: @Sendable (@escaping @Sendable (Engine) -> Void) -> Void = { work in
            queue.async {
                guard let engine = weak.engine, engine.session.epoch == epoch else { return }
                work(engine)
            }
        }
        return EventStreamHandler(
            stateChanged: { old, new, error in
                onEngine { $0.streamStateChanged(old, new, error) }
            },
            connected: { _ in
                onEngine { $0.streamOpened() }
            },
            event: { event in
                onEngine { $0.applyStreamEvent(event) }
            },
            resyncRequired: { reason, _ in
                onEngine { engine in
                    engine.log(.info, "event stream: resync required (\(reason)); running changelogs")
                    // Events were lost: no range may be extended over them by the next live message.
                    engine.write(.connectionLost, "marking ranges after a resync") { transaction throws(ParleyError) in
                        try transaction.forgetNewestEnd()
                    }
                    engine.runCatchUp(then: nil)
                }
            },
            tokenExpired: {
                onEngine { $0.services.connectionEvent(.sessionTokenRequired, nil) }
            },
            eventSkipped: { reason in
                weak.engine?.log(.warning, "event stream: skipped an event: \(reason)")
            })
    }

    /// The server's `connected` event: the stream is open and its position known. The
    /// position is stored as the resume point before anything is reported (on a fresh
    /// connection it is the server's newest event id, so a client that sees no event before it
    /// goes away, or exits, still resumes from there and misses nothing); then the catch-up.
    private func streamOpened() {
        storeStreamPosition()
        if !self.session.streamWasOpen {
            self.session.streamWasOpen = true
            services.connectionEvent(.connected, nil)
            self.runCatchUp(then: nil)
        } else {
            self.runCatchUp { self.services.connectionEvent(.reconnectSucceeded, nil) }
        }
    }

    private func storeStreamPosition() {
        guard let position = session.stream?.lastEventID else { return }
        let stored = read("reading the resume point") { cache throws(ParleyError) in try cache.metaValue("last_event_id") } ?? nil
        guard stored != String(position) else { return }
        write(.operation("stream_position"), "storing the resume point") { transaction throws(ParleyError) in
            try transaction.setMetaValue(String(position), forKey: "last_event_id")
        }
    }

    private func streamStateChanged(_ old: ConnectionState, _ new: ConnectionState, _ error: ParleyError?) {
        switch new {
        case .open:
            break  // reported when the `connected` event has told the stream's position (streamOpened)
        case .reconnecting:
            if old == .open || !self.session.streamWasOpen && old == .closed {
                // Messages may arrive unseen until the stream is back: no range reaches the newest end.
                self.write(.connectionLost, "marking ranges") { transaction throws(ParleyError) in
                    try transaction.forgetNewestEnd()
                }
                services.connectionEvent(.reconnectStarted, error)
            } else if old == .connecting {
                if !self.session.streamWasOpen && self.session.reconnectFailures == 0 { services.connectionEvent(.reconnectStarted, error) }
                self.session.reconnectFailures += 1
                services.connectionEvent(.reconnectFailed, error)
            }
        case .closed:
            if let error { services.connectionEvent(.disconnected, error) }
        case .connecting:
            break
        }
        if new == .open { self.session.reconnectFailures = 0 }
    }
}
