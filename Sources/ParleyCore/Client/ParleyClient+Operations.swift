/// Connecting as a user, and the catalog operations performed on the user's behalf.
extension ParleyClient {
    /// The connected user's id, if any.
    public var currentUserID: String? { engine.queue.sync { engine.connectedUserID } }

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
        let engine = self.engine
        let transport = self.transport
        return try startOperation(completion) { id, finish in
            engine.queue.async {
                guard let call = Self.preparedCall(spec, params: params, engine: engine, finish: finish) else { return }
                engine.runOperation(operation, effect: spec.effect, params: params, finish: finish) { credential, done in
                    transport.send(
                        operation: id, method: call.method, pathAndQuery: call.pathAndQuery, body: call.body, credential: credential,
                        multipart: call.multipartBody, finish: done)
                }
            }
        }
    }

    /// On the engine queue: the operation's request for the connected user, or nil after
    /// `finish` got the failure (not connected, bad parameters).
    static func preparedCall(
        _ spec: OperationSpec, params: JSONValue, engine: any ClientEngine,
        finish: @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) -> PreparedCall? {
        guard let userID = engine.connectedUserID else {
            finish(.failure(.invalidState("\(spec.name): not connected (call connect first)")))
            return nil
        }
        do throws(ParleyError) {
            return try spec.prepare(params: params, currentUserID: userID)
        } catch {
            finish(.failure(error))
            return nil
        }
    }
}
