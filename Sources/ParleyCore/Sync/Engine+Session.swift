// The session: who is connected and the real-time stream that keeps the cache current.
// The stream's callbacks hop to the engine queue and are ignored once their session ended
// (`session.epoch`); opening the stream starts a catch-up, a drop forgets which ranges reach
// the newest end, and connection changes are told to the application.

/// What the event stream delivered, waiting for the engine queue: events and state changes
/// in arrival order, each with the session epoch it belongs to. One drain job is scheduled
/// while anything waits.
final class StreamInbox: Sendable {
    enum Item: Sendable {
        case event(StreamFrame)
        case control(@Sendable (Engine) -> Void)
    }

    private struct State {
        var items: [(epoch: UInt64, item: Item)] = []
        var drainScheduled = false
    }

    private let state = Locked(State())

    /// Adds an item; true when the caller must schedule a drain.
    func push(_ item: Item, epoch: UInt64) -> Bool {
        state.withLock { inbox in
            inbox.items.append((epoch, item))
            if inbox.drainScheduled { return false }
            inbox.drainScheduled = true
            return true
        }
    }

    /// Takes up to `limit` items in order; `more` tells whether items remain (then the drain
    /// stays scheduled and the caller schedules the next one).
    func take(limit: Int) -> (items: [(epoch: UInt64, item: Item)], more: Bool) {
        state.withLock { inbox in
            let taken = Array(inbox.items.prefix(limit))
            inbox.items.removeFirst(taken.count)
            if inbox.items.isEmpty { inbox.drainScheduled = false }
            return (taken, !inbox.items.isEmpty)
        }
    }
}

extension Engine {
    /// Events applied per transaction at most: big enough that a catch-up of thousands of
    /// events costs few commits, small enough that other work on the queue (cached reads,
    /// sends) waits for one batch at most.
    static let streamBatchLimit = 128

    /// Engine queue: applies what the stream inbox holds, consecutive events in batches.
    func drainStreamInbox() {
        assertOnQueue()
        let (items, more) = streamInbox.take(limit: Self.streamBatchLimit)
        var events: [StreamEvent] = []
        for (epoch, item) in items where epoch == session.epoch {
            switch item {
            case .event(let frame):
                metrics.eventsReceived.add()
                // Parsed here rather than on the network thread: the values are made, used and
                // freed on one thread (freeing another thread's allocations costs both malloc's
                // arena lock and the allocating thread's cache of free blocks).
                do throws(ParleyError) {
                    events.append(try StreamEvent(frame: frame))
                } catch {
                    log(.warning, "event stream: skipped an event: \(error.message)")
                }

            case .control(let work):
                if !events.isEmpty { applyStreamEvents(events) }
                events = []
                work(self)
            }
        }
        if !events.isEmpty { applyStreamEvents(events) }
        // The rest waits behind whatever else was queued meanwhile.
        if more { queue.async { self.drainStreamInbox() } }
    }

    /// Before `connect` fetches the user: another user's session is refused; the user's
    /// cache is opened (reads work from now on, offline too).
    /// Returns whether the cache knows the user, so that an unreachable server can be
    /// answered from it (`beginSession`).
    func prepareSession(userID: String) throws(ParleyError) -> Bool {
        assertOnQueue()
        if let current = session.current, current.userID != userID {
            throw .invalidState("already connected as '\(current.userID)': disconnect first")
        }
        try openCache(userID: userID)
        return cachedUser() != nil
    }

    private func cachedUser() -> JSONValue? {
        read("reading the cached user") { cache throws(ParleyError) in
            try cache.metaValue("current_user").flatMap { try? JSONValue.parse($0) }
        } ?? nil
    }

    /// The user without the fields that change at every connection (`is_online`,
    /// `last_seen_at`): the cached copy is rewritten only when another field changed.
    private static func withoutPresence(_ user: JSONValue) -> JSONValue {
        guard case .object(var fields) = user else { return user }
        fields["is_online"] = nil
        fields["last_seen_at"] = nil
        return .object(fields)
    }

    /// `connect` fetched the user (or failed to): the session starts with the user, stored
    /// for offline starts; when the server is unreachable, with the user the cache kept. The
    /// result is what `connect` completes with.
    func beginSession(userID: String, token: String, fetchedUser: Result<JSONValue, ParleyError>) -> Result<JSONValue, ParleyError> {
        assertOnQueue()
        switch fetchedUser {
        case .success(let user):
            // A reconnecting user is most often unchanged but for its presence (the last
            // disconnect moved `last_seen_at`): no write then. A warm connect's first write
            // would create the WAL and sync its header, the largest part of its CPU.
            let text = user.canonicalText
            let stored = read("reading the cached user") { cache throws(ParleyError) in try cache.metaValue("current_user") } ?? nil
            if stored != text, stored.flatMap({ try? JSONValue.parse($0) }).map(Self.withoutPresence) != Self.withoutPresence(user) {
                write(.operation("connect"), "storing the user") { transaction throws(ParleyError) in
                    try transaction.setMetaValue(text, forKey: "current_user")
                }
            }
            beginSession(userID: userID, token: token, user: user)
            return .success(user)
        case .failure(let error) where error.code == .network || error.code == .timeout:
            guard let cached = cachedUser() else { return .failure(error) }
            log(.info, "connect: server unreachable (\(error.message)); working from the cache")
            beginSession(userID: userID, token: token, user: cached)
            return .success(cached)
        case .failure(let error):
            return .failure(error)
        }
    }

    /// `disconnect`: the session ends; returns its stream, to stop off the queue. Ranges no
    /// longer reach the newest end (messages may arrive unseen until the next connection).
    func endSession() -> EventStreamConnection? {
        assertOnQueue()
        // Offline first: what the drop does to the views comes after (never as a live view's change).
        setLink(open: false)
        if session.stream != nil {
            write(.connectionLost, "marking ranges") { transaction throws(ParleyError) in
                try transaction.forgetNewestEnd()
            }
        }
        defer {
            session.stream = nil
            session.current = nil
            session.user = nil
            session.epoch &+= 1
            metrics.noteConnection(.closed)
        }
        return session.stream
    }

    /// `close`: late callbacks of the session are ignored from now on; returns its stream, to stop.
    func abandonSession() -> EventStreamConnection? {
        session.epoch &+= 1
        defer {
            session.stream = nil
            metrics.noteConnection(.closed)
        }
        return session.stream
    }

    /// The session's credential for REST calls (nil when not connected).
    var sessionCredential: APIEndpoint.Credential? { session.current.map { .session($0.token) } }

    /// The connected user (nil when not connected).
    var connectedUserID: String? { session.current?.userID }

    /// The session's stream (nil when not connected).
    var sessionStream: EventStreamConnection? { session.current == nil ? nil : session.stream }

    /// The stream's state as the engine has applied it: "open" only once the engine took the
    /// server's `connected` event (`streamOpened`). The session's first `connected` is queued
    /// in the same step, so whoever reads "open" gets that event before any `disconnected`
    /// that follows. Until then the attempt reads "connecting".
    var streamState: ConnectionState {
        let state = session.stream?.state ?? .closed
        return state == .open && !session.linkOpen ? .connecting : state
    }

    /// The session's new token: REST calls use it at once; returns the stream, to pass it on.
    func replaceSessionToken(_ token: String) throws(ParleyError) -> EventStreamConnection? {
        guard session.current != nil else { throw .invalidState("not connected (call connect first)") }
        session.current?.token = token
        return session.stream
    }

    /// Engine queue: the session starts; the stream follows.
    private func beginSession(userID: String, token: String, user: JSONValue) {
        assertOnQueue()
        self.session.stream?.stop()
        setLink(open: false)
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

    /// The stream's callbacks. They go through the stream inbox, in the order they came, so
    /// that events waiting there are applied in batches (one transaction each) while state
    /// changes still take effect between the events they came between; each is ignored once
    /// the session it belongs to has ended.
    private func streamHandler(epoch: UInt64) -> EventStreamHandler {
        let weak = WeakReference(self)
        let queue = self.queue
        let inbox = self.streamInbox
        let push: @Sendable (StreamInbox.Item) -> Void = { item in
            guard inbox.push(item, epoch: epoch) else { return }
            queue.async { weak.object?.drainStreamInbox() }
        }
        let onEngine: @Sendable (@escaping @Sendable (Engine) -> Void) -> Void = { work in push(.control(work)) }
        return EventStreamHandler(
            stateChanged: { old, new, error in
                onEngine { $0.streamStateChanged(old, new, error) }
            },
            connected: { resumedFrom in
                onEngine { $0.streamOpened(resumed: resumedFrom != nil) }
            },
            replaying: { throughID in
                onEngine { $0.session.replayThrough = throughID }
            },
            event: { event in push(.event(event)) },
            resyncRequired: { reason, _ in
                onEngine { engine in
                    engine.log(.info, "event stream: resync required (\(reason)); running changelogs")
                    engine.metrics.resyncs.add()
                    // Events were lost: no range may be extended over them by the next live message.
                    // The application is told which channels changed meanwhile once the
                    // channel changelogs have found them (`reportResyncIfFound`): those of a
                    // pass running since the stream reopened (the server sends `resync` after
                    // `connected`), else of the next pass.
                    let breaks = engine.session.streamBreaks
                    let passCovers = engine.catchUp.inProgress && engine.catchUp.passBreaks == breaks
                    // A pass of this session since the break may have read its channel
                    // changelogs already (the stream can open after that, even while the pass
                    // still reads the message changelogs): what it found counts as well, or
                    // the next pass, which finds nothing new, would report no channel. A pass
                    // of an earlier session (before a disconnect) found what it found before
                    // the loss: it does not count.
                    let passSinceBreak = engine.catchUp.lastPassBreaks == breaks && engine.catchUp.lastPassEpoch == engine.session.epoch
                    let found = passSinceBreak ? engine.catchUp.lastPassChannelURLs : []
                    engine.catchUp.resync = PendingResync(reason: reason, collecting: passCovers, alreadyFound: found)
                    engine.session.streamBreaks &+= 1
                    // Member lists the changelogs left out may have changed in the events lost.
                    engine.channelRereads.wanted.formUnion(engine.channelRereads.storedWithoutMembers)
                    engine.channelRereads.storedWithoutMembers = []
                    engine.fetchWantedChannels()
                    // The catch-up is announced first: what the loss does to the views comes
                    // while they are catching up (never as a live view's change).
                    engine.runCatchUp(then: nil)
                    engine.write(.connectionLost, "marking ranges after a resync") { transaction throws(ParleyError) in
                        try transaction.forgetNewestEnd()
                    }
                }
            },
            tokenExpired: {
                onEngine { $0.services.connectionEvent(.sessionTokenRequired, nil) }
            },
            eventSkipped: { reason in
                weak.object?.log(.warning, "event stream: skipped an event: \(reason)")
            })
    }

    /// The server's `connected` event: the stream is open and its position known. The
    /// position is stored as the resume point before anything is reported (on a fresh
    /// connection it is the server's newest event id, so a client that sees no event before it
    /// goes away, or exits, still resumes from there and misses nothing); then the catch-up.
    private func streamOpened(resumed: Bool) {
        session.resumedAtBreaks = resumed ? session.streamBreaks : nil
        storeStreamPosition()
        // Open before the catch-up is announced, published after: a view never sees an open
        // stream without the catch-up that follows it (it would pass for live in between).
        let opened = !session.linkOpen
        session.linkOpen = true
        // Noted before anything is announced: a handler that reads the metrics sees the state it is told of.
        metrics.noteConnection(streamState)
        if !self.session.streamWasOpen {
            self.session.streamWasOpen = true
            services.connectionEvent(.connected, nil)
            self.runCatchUp(then: nil)
        } else {
            metrics.reconnects.add()
            self.runCatchUp { self.services.connectionEvent(.reconnectSucceeded, nil) }
        }
        if opened { feed.publish(cause: .connectivityChanged(streamOpen: true), changes: []) }
    }

    /// The stream opened or dropped as the engine queue learned it; views learn it from the feed.
    func setLink(open: Bool) {
        guard session.linkOpen != open else { return }
        session.linkOpen = open
        if !open { settleHiddenStateWaits() }
        feed.publish(cause: .connectivityChanged(streamOpen: open), changes: [])
    }

    /// The session's side of every view's freshness (Sync/ViewFreshness.swift).
    var freshnessLink: FreshnessLink {
        FreshnessLink(streamOpen: session.current != nil && session.linkOpen, catchingUp: catchUp.announced)
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
        // Offline first: what the drop does to the views comes after (never as a live view's change).
        if new != .open { setLink(open: false) }
        metrics.noteConnection(streamState)
        switch new {
        case .open:
            break  // reported when the `connected` event has told the stream's position (streamOpened)
        case .reconnecting:
            if old == .open || !self.session.streamWasOpen && old == .closed {
                // Messages may arrive unseen until the stream is back: no range reaches the newest end.
                self.session.streamBreaks &+= 1
                self.write(.connectionLost, "marking ranges") { transaction throws(ParleyError) in
                    try transaction.forgetNewestEnd()
                }
                services.connectionEvent(.reconnectStarted, error)
            } else if old == .connecting {
                if !self.session.streamWasOpen && self.session.reconnectFailures == 0 { services.connectionEvent(.reconnectStarted, error) }
                self.session.reconnectFailures += 1
                metrics.reconnectFailures.add()
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
