/// Connecting as a user, and the catalog operations performed on the user's behalf.
extension ParleyClient {
    /// The connected user's id, if any.
    public var currentUserID: String? { engine.queue.sync { engine.session.current?.userID } }

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
                guard let session = self.engine.session.current else {
                    finish(.failure(.invalidState("\(operation): not connected (call connect first)")))
                    return
                }
                // A page read while the stream is up can vouch for the newest end if it stays up.
                let liveSince = self.engine.isStreamOpen ? self.engine.session.streamBreaks : nil
                let call: PreparedCall
                do throws(ParleyError) {
                    call = try spec.prepare(params: params, currentUserID: session.userID)
                } catch {
                    finish(.failure(error))
                    return
                }
                let readStart = self.engine.channelReads.begin()
                self.sendHTTP(operation: id, method: call.method, pathAndQuery: call.pathAndQuery, body: call.body,
                              credential: .session(session.token)) { result in
                    guard case .success(let answer) = result else {
                        self.engine.queue.async { _ = self.engine.channelReads.end(readStart) }
                        finish(result)
                        return
                    }
                    self.engine.queue.async {
                        let touchedByEvents = self.engine.channelReads.end(readStart)
                        self.engine.applyOperationResult(operation, spec.effect, params: params, answer: answer, liveSince: liveSince,
                                                         touchedByEvents: touchedByEvents)
                        finish(.success(answer))
                    }
                }
            }
        }
    }
}
