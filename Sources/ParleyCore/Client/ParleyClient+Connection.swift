// Connecting and disconnecting: argument checks and the operation; the session and its
// stream are the Sync layer's (Sync/Engine+Session.swift).

extension ParleyClient {
    /// Sets (nil: removes) the handler told about connection changes (`ConnectionEvent`),
    /// with the error that caused a change when there is one. Runs on the callback context.
    /// It is the connection handler with the reserved identifier "" (`addConnectionHandler`).
    public func setConnectionHandler(_ handler: (@Sendable (ConnectionEvent, ParleyError?) -> Void)?) {
        appHandlers.connection.set(AppHandlers.reservedID, handler)
    }

    /// Sets (nil: removes) the handler of real-time events: the event's category
    /// (docs/PROTOCOL.md §9, plus the local `message_*` categories of sending), the channel
    /// URL and the event's JSON. The cache is updated before the handler runs. It is the
    /// event handler with the reserved identifier "" (`addEventHandler`).
    public func setEventHandler(_ handler: (@Sendable (_ category: String, _ channelURL: String, _ payloadJSON: String) -> Void)?) {
        appHandlers.event.set(AppHandlers.reservedID, handler)
    }

    /// Adds a connection handler under `id`, beside the others: every handler gets every
    /// connection change, in the order their identifiers were first added. An `id` already
    /// present replaces that handler in its place. `id` must be non-empty ("" is the handler
    /// of `setConnectionHandler`).
    public func addConnectionHandler(id: String, _ handler: @escaping @Sendable (ConnectionEvent, ParleyError?) -> Void) throws(ParleyError) {
        try Self.checkHandlerID(id)
        appHandlers.connection.set(id, handler)
    }

    /// Removes the connection handler under `id` (nothing when there is none). Also from inside a
    /// handler: a removed handler is not called again, not even for the change being delivered.
    public func removeConnectionHandler(id: String) throws(ParleyError) {
        try Self.checkHandlerID(id)
        appHandlers.connection.set(id, nil)
    }

    /// Adds an event handler under `id`, beside the others: every handler gets every event, in
    /// the order their identifiers were first added. An `id` already present replaces that
    /// handler in its place. `id` must be non-empty ("" is the handler of `setEventHandler`).
    public func addEventHandler(
        id: String, _ handler: @escaping @Sendable (_ category: String, _ channelURL: String, _ payloadJSON: String) -> Void
    ) throws(ParleyError) {
        try Self.checkHandlerID(id)
        appHandlers.event.set(id, handler)
    }

    /// Removes the event handler under `id` (nothing when there is none). Also from inside a
    /// handler: a removed handler is not called again, not even for the event being delivered.
    public func removeEventHandler(id: String) throws(ParleyError) {
        try Self.checkHandlerID(id)
        appHandlers.event.set(id, nil)
    }

    private static func checkHandlerID(_ id: String) throws(ParleyError) {
        guard !id.isEmpty else {
            throw .invalidArgument("id must be non-empty (the empty id is the handler of the set_ function)")
        }
    }

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
            let engine = self.engine
            let transport = self.transport
            engine.queue.async {
                let cacheKnowsUser: Bool
                do throws(ParleyError) {
                    cacheKnowsUser = try engine.prepareSession(userID: userID)
                } catch {
                    return finish(.failure(error))
                }
                // A first connect has no cached user to fall back on: a server refusing
                // connections (restarting, its backlog full) is tried again until the connect
                // timeout, as a slow connect would be waited for.
                transport.send(
                    operation: id, method: "GET", pathAndQuery: Endpoints.user(userID), body: nil, credential: .session(sessionToken),
                    retriesRefusedConnect: !cacheKnowsUser
                ) { result in
                    engine.queue.async { finish(engine.beginSession(userID: userID, token: sessionToken, fetchedUser: result)) }
                }
            }
        }
    }

    /// Forgets the session and stops the stream: operations then fail with `.invalidState`
    /// until `connect`. The cache stays open for cached reads. The connection handler gets
    /// `disconnected`.
    public func disconnect() {
        let engine = self.engine
        let stream = engine.queue.sync { engine.endSession() }
        stream?.stop()
        if stream != nil { engine.announce(.disconnected, nil) }
    }

    /// Reconnects the stream now (`EventStreamConnection.reconnectNow`). Throws
    /// `.invalidState` when not connected.
    public func reconnect() throws(ParleyError) {
        let stream = engine.queue.sync { engine.sessionStream }
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
        let stream = try engine.sync { () throws(ParleyError) -> EventStreamConnection? in try engine.replaceSessionToken(token) }
        try stream?.updateSessionToken(token)
    }

    /// The connection state of the real-time stream: "closed", "connecting", "open" or "reconnecting".
    public var connectionState: ConnectionState {
        engine.queue.sync { engine.streamState }
    }
}
