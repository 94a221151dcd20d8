// The server's life as an operator sees it (docs/SERVER.md "Logs" and "Stopping"): the
// lines logged when it starts, loses and finds its database, and stops, and the stop itself:
// a drain (readiness says 503 while everything is still served, so that a balancer's health
// check takes the server out), then the streams told to reconnect and the port closed.
import Foundation
import Logging
import Synchronization

/// Whether a stop was asked for; `/health/ready` answers 503 from then on.
final class StopRequest: Sendable {
    private let requested = Atomic<Bool>(false)

    var isRequested: Bool { requested.load(ordering: .acquiring) }

    func request() { requested.store(true, ordering: .releasing) }
}

/// Runs the stop that SIGTERM or SIGINT asks for: `drain` seconds of readiness 503 (a second
/// signal cuts it short), then the event streams end and the application shuts down
/// gracefully; requests still running `grace` seconds later are given up.
final class ShutdownSequence: Sendable {
    enum Phase { case running, draining, stopping }

    private let phase = Mutex(Phase.running)
    private let shared: SharedState
    private let drain: Double
    private let grace: Double
    private let logger: Logger
    private let shutDown: @Sendable () async -> Void

    /// `shutDown`: the graceful shutdown of the application (its port closes, the requests in
    /// flight finish).
    init(shared: SharedState, drainSeconds: Double, graceSeconds: Double, logger: Logger,
         shutDown: @escaping @Sendable () async -> Void) {
        self.shared = shared
        self.drain = drainSeconds
        self.grace = graceSeconds
        self.logger = logger
        self.shutDown = shutDown
    }

    /// Handles SIGTERM and SIGINT from now on (their default action, ending the process at
    /// once, is turned off). The sources must be kept while the server runs.
    func handleSignals() -> [DispatchSourceSignal] {
        [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")].map { pair in
            let (number, name) = pair
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in self.signalled(name) }
            source.resume()
            return source
        }
    }

    private func signalled(_ name: String) {
        let previous = phase.withLock { current -> Phase in
            let before = current
            switch current {
            case .running: current = .draining
            case .draining: current = .stopping
            case .stopping: break
            }
            return before
        }
        switch previous {
        case .running:
            shared.stop.request()
            logger.notice("shutdown begun", metadata: ["signal": .string(name), "drain_seconds": .stringConvertible(drain)])
            if drain <= 0 {
                beginStopping()
                return
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + drain) { [self] in
                let drained = phase.withLock { current -> Bool in
                    guard current == .draining else { return false }
                    current = .stopping
                    return true
                }
                if drained { beginStopping() }
            }
        case .draining:
            logger.notice("second stop signal: the drain is cut short", metadata: ["signal": .string(name)])
            beginStopping()
        case .stopping:
            break
        }
    }

    /// After the drain: the streams end with a hint to reconnect, the port closes, and the
    /// requests in flight get `grace` seconds.
    private func beginStopping() {
        logger.notice("drain over: event streams told to reconnect, port closing", metadata: [
            "event_streams": .stringConvertible(shared.hub.openStreamTotal),
        ])
        // Requests still running after the grace period are given up: a stop must not wait
        // for a client that never finishes its upload, say. Everything answered before was
        // committed first, so nothing acknowledged is lost.
        DispatchQueue.global().asyncAfter(deadline: .now() + grace) { [logger, grace] in
            logger.warning("requests still running \(grace) s after the drain; exiting without them")
            logger.notice("shutdown done")
            Foundation.exit(0)
        }
        shared.hub.finishAll()
        // The other servers learn at once that this one's streams are gone (while the pool
        // still runs: it stops last; should this lose the race, the rows go when the others
        // find this server's heartbeat stopped).
        if let cluster = shared.cluster { Task { await cluster.leave() } }
        Task { await self.shutDown() }
    }
}

/// PostgreSQL: logs when the database stops answering and when it answers again, probing it
/// once a second (a request's failure alone cannot tell when it is back).
enum DatabaseWatch {
    static func start(shared: SharedState, logger: Logger) {
        Task.detached {
            var lostAt: ContinuousClock.Instant? = nil
            while !shared.stop.isRequested {
                try? await Task.sleep(for: .seconds(1))
                let reachable = await Health.schemaState(shared.database) != .unreachable
                // The pools close during a stop: no "lost" line for that.
                if shared.stop.isRequested { return }
                if !reachable, lostAt == nil {
                    lostAt = .now
                    logger.warning("PostgreSQL unreachable: requests are answered 503 until it is back")
                } else if reachable, let since = lostAt {
                    lostAt = nil
                    let seconds = Double(since.duration(to: .now).components.seconds)
                    logger.notice("PostgreSQL reachable again", metadata: ["unreachable_seconds": .stringConvertible(seconds)])
                }
            }
        }
    }
}
