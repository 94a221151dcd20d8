import Foundation

/// Runs requests. Write requests run one at a time (the lock): each commits, hands its events
/// to the hub in commit order, and lets the next one go before its events are delivered. Read
/// requests take no lock: they run in their own snapshots beside the writer.
final class Service: @unchecked Sendable {
    private let writeLock = AsyncLock()
    let shared: SharedState
    /// Queued deliveries past which a writer waits for its own.
    static let deliveryBacklog = 32

    init(shared: SharedState) { self.shared = shared }

    /// Reads the counters and starts the event hub (at start).
    func load() async throws {
        shared.committed = try await Counters.load(shared.database)
        shared.hub.start(deliveredThrough: shared.committed.seq)
    }

    /// `readOnly`: the request only reads the database (a GET). One that changes something
    /// all the same (a first login) runs again as a write request.
    func run<T>(readOnly: Bool = false, _ body: (ServerState) async throws -> T) async throws -> T {
        if readOnly, let result = try await ServerState(shared: shared, readOnly: true).handleReading(body) {
            return result
        }
        await writeLock.lock()
        let request = ServerState(shared: shared, readOnly: false)
        let result: T
        do {
            result = try await request.handleWriting(body)
        } catch {
            writeLock.unlock()
            throw error
        }
        let delivery = shared.hub.enqueue(request.committedChanges)
        writeLock.unlock()
        // Writers faster than the streams wait for their events to go out (not holding the
        // lock), so that the queue, and the finished requests it holds, stays bounded: at most
        // `deliveryBacklog` plus one per writer in flight.
        if shared.hub.backlog > Service.deliveryBacklog { await delivery.wait() }
        return result
    }

    /// A read request that must not write (a stream's replay, run on the hub's queue).
    func read<T>(_ body: (ServerState) async throws -> T) async throws -> T {
        guard let result = try await ServerState(shared: shared, readOnly: true).handleReading(body) else {
            throw APIError.internal("a read-only request changed something")
        }
        return result
    }
}
