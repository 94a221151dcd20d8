/// Runs requests. Reads take no lock: each runs in a snapshot of its own beside the writers.
/// Writes go to the backend's write coordinator (Writers/Writers.swift), which registers each
/// writer in the write order before it takes a number and, once it committed, hands its events
/// to the hub, which delivers them in id order.
final class RequestRunner: Sendable {
    let shared: SharedState
    let writers: any Writers

    init(shared: SharedState, writers: any Writers) {
        self.shared = shared
        self.writers = writers
    }

    /// Starts the event hub (at start).
    func load() async throws {
        try await writers.start()
    }

    /// Makes the hub deliver what every server committed up to now (Writers.catchUp).
    func catchUp(heardAt: ContinuousClock.Instant? = nil) async throws {
        try await writers.catchUp(heardAt: heardAt)
    }

    /// Asks for a catch-up soon (`heardAt`: after another server's announcement heard then).
    func catchUpSoon(heardAt: ContinuousClock.Instant? = nil) {
        writers.catchUpSoon(heardAt: heardAt)
    }

    /// Prunes the event log where writers do not (Writers.pruneLog).
    func pruneLog() async throws {
        try await writers.pruneLog()
    }

    /// `readOnly`: the request only reads the database (a GET). One that changes something
    /// all the same (a first login) runs again as a write request. `channel`: the channel the
    /// request names in its path, if any (`RequestState.handleWriting`).
    /// `firstReads`: what a write's first statement may read for the handler (`FirstReads`).
    /// `readsNow`: the request answers with a changelog's "now" (`RequestTransaction.currentSeq`); on
    /// PostgreSQL the hub first catches up with every commit made so far, so that the token
    /// covers the writes the client made before it asked.
    /// `statementByStatement`: a read whose first statement reads together what must be
    /// consistent runs without a transaction of its own (`SQLDatabase.readStatementByStatement`).
    func run<T>(readOnly: Bool = false, statementByStatement: Bool = false, channel: String? = nil,
                firstReads: FirstReads = FirstReads(), readsNow: Bool = false,
                _ body: (RequestState) async throws -> T) async throws -> T {
        if readsNow { try await catchUp() }
        if readOnly, let result = try await RequestState(shared: shared, rules: writers.rules, readOnly: true)
            .handleReading(mode: statementByStatement ? .requestStatementByStatement : .oneSnapshot, body) {
            return result
        }
        let result = try await writers.write(channel: channel, firstReads: firstReads, body)
        // Committed: the webhook calls it may have queued can go.
        shared.webhooks.wake()
        return result
    }

    /// A read request that must not write (a stream's replay, run on the hub's queue).
    func read<T>(_ body: (RequestState) async throws -> T) async throws -> T {
        guard let result = try await RequestState(shared: shared, rules: writers.rules, readOnly: true).handleReading(body) else {
            throw APIError.internal("a read-only request changed something")
        }
        return result
    }
}
