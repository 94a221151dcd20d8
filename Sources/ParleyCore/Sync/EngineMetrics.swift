import Synchronization

// The engine's counters, for the client's metrics (`ParleyClient.metrics`).
//
// Written on the engine queue where the engine already decides what happened (a pass ends,
// a batch commits, a send completes), read from any thread: relaxed atomics, since each
// counter stands alone and a reader needs no order between them. Nothing here touches the
// cache: the sizes are read when the metrics are asked for (ChatCache+Statistics.swift).

final class EngineMetrics: Sendable {
    /// The stream's state as the engine applied it (`Engine.streamState`) and since when.
    private struct Connection {
        var state: ConnectionState = .closed
        var sinceNs: Int64 = monotonicNanoseconds()
    }

    private let connection = Locked(Connection())
    let reconnects = MetricCounter()
    let reconnectFailures = MetricCounter()
    let eventsReceived = MetricCounter()
    let eventsApplied = MetricCounter()
    let catchUpPasses = MetricCounter()
    let catchUpNanoseconds = MetricCounter()
    let resyncs = MetricCounter()
    let sends = MetricCounter()
    let sendsRetried = MetricCounter()
    let sendsSucceeded = MetricCounter()
    let sendFailures = MetricCounter()
    let evictedChannels = MetricCounter()
    let evictedMessages = MetricCounter()

    /// Engine queue: the stream's applied state is `state` now (its clock restarts only on a change).
    func noteConnection(_ state: ConnectionState) {
        connection.withLock { connection in
            guard connection.state != state else { return }
            connection = Connection(state: state, sinceNs: monotonicNanoseconds())
        }
    }

    /// The stream's applied state and the seconds since it began.
    func connectionState() -> (state: ConnectionState, seconds: Double) {
        let now = monotonicNanoseconds()
        return connection.withLock { ($0.state, Double(now - $0.sinceNs) / 1e9) }
    }
}

/// A count that only grows.
struct MetricCounter: ~Copyable, Sendable {
    private let total = Atomic<Int>(0)

    func add(_ amount: Int = 1) { total.add(amount, ordering: .relaxed) }

    var value: Int { total.load(ordering: .relaxed) }
}
