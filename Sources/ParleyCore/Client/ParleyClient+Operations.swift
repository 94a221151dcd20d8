/// Connecting as a user, and the catalog operations performed on the user's behalf.
extension ParleyClient {
    /// Connects as `userID` with a session token issued by the server
    /// (`POST /v3/users/{user_id}/token`). Completes with the user object.
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
                if let current = self.engine.session, current.userID != userID {
                    finish(.failure(.invalidState("already connected as '\(current.userID)': disconnect first")))
                    return
                }
                let path = "/v3/users/" + URLEncoding.encodePathSegment(userID)
                self.sendHTTP(operation: id, method: "GET", pathAndQuery: path, body: nil, credential: .session(sessionToken)) { result in
                    self.engine.queue.async {
                        switch result {
                        case .success(let user):
                            self.engine.session = Session(userID: userID, token: sessionToken)
                            self.engine.user = user
                            finish(.success(user))
                        case .failure(let error):
                            finish(.failure(error))
                        }
                    }
                }
            }
        }
    }

    /// Forgets the session: operations then fail with `.invalidState` until `connect`.
    public func disconnect() {
        engine.queue.sync {
            engine.session = nil
            engine.user = nil
        }
    }

    /// The connected user's id, if any.
    public var currentUserID: String? { engine.queue.sync { engine.session?.userID } }

    /// Performs a catalog operation (`OperationCatalog`) as the connected user and applies
    /// its result to the cache. Completes with the server's answer.
    @discardableResult
    public func perform(
        _ operation: String, params: JSONValue = .object([:]),
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        guard let spec = OperationCatalog.spec(named: operation) else {
            throw .invalidArgument("unknown operation '\(operation)'")
        }
        guard case .object = params else {
            throw .invalidArgument("\(operation): params must be a JSON object, got \(params.typeName)")
        }
        return try startOperation(completion) { id, finish in
            self.engine.queue.async {
                guard let session = self.engine.session else {
                    finish(.failure(.invalidState("\(operation): not connected (call connect first)")))
                    return
                }
                let call: PreparedCall
                do throws(ParleyError) {
                    call = try spec.prepare(params: params, currentUserID: session.userID)
                } catch {
                    finish(.failure(error))
                    return
                }
                self.sendHTTP(operation: id, method: call.method, pathAndQuery: call.pathAndQuery, body: call.body,
                              credential: .session(session.token)) { result in
                    guard case .success(let answer) = result else {
                        finish(result)
                        return
                    }
                    self.engine.queue.async {
                        self.applyEffect(spec.effect, params: params, answer: answer)
                        finish(.success(answer))
                    }
                }
            }
        }
    }

    /// Writes what an operation's answer says to the cache (engine queue).
    func applyEffect(_ effect: CacheEffect, params: JSONValue, answer: JSONValue) {
        engine.assertOnQueue()
        engine.applyToCache(effect, params: params, answer: answer) { [weak self] message in self?.log(.warning, message) }
    }
}
