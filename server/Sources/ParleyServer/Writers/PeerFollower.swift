// PostgreSQL: how a server learns what the other servers on its database committed, so that
// its streams receive their events (docs/ARCHITECTURE.md "Requests and locks", *Other servers' events*).
// A connection of its own listens for the writers' announcements (CommitFollowUp.swift): each
// tells this server's bound (StreamPositions.swift), and the hub reads the events up to it
// from the log. The bound is read again every `pollInterval` and after
// every (re)connection, so a missed announcement only delays delivery. The same connection hears
// which users' streams open and close on the other servers (`ClusterPresence`, Storage/Postgres/Presence.swift).
import Logging

final class PeerFollower: Sendable {
    private let url: PostgresURL
    private let runner: RequestRunner
    private let logger: Logger
    static let pollInterval: UInt64 = 1_000_000_000

    init(url: PostgresURL, runner: RequestRunner, logger: Logger) {
        self.url = url
        self.runner = runner
        self.logger = logger
    }

    /// Listens and polls, and beats the presence heartbeat, until the process ends.
    func start() {
        Task { await self.listen() }
        Task {
            while true {
                try? await Task.sleep(nanoseconds: Self.pollInterval)
                try? await self.runner.catchUp()
                try? await self.runner.pruneLog()
            }
        }
        Task {
            while true {
                try? await Task.sleep(nanoseconds: UInt64(ClusterPresence.heartbeatMillis) * 1_000_000)
                await self.beat()
            }
        }
    }

    /// One presence heartbeat; the users of servers found dead were last seen with them. The
    /// log tells when another server begins running and when it is taken for dead.
    func beat() async {
        guard let cluster = runner.shared.cluster else { return }
        do {
            let beat = try await cluster.heartbeat()
            for other in beat.serversFound {
                logger.notice("another server found", metadata: ["node_id": .string(other)])
            }
            for other in beat.serversLost {
                logger.warning("another server lost: no heartbeat for \(ClusterPresence.aliveWindow / 1000) s",
                               metadata: ["node_id": .string(other)])
            }
            for (userId, seenAt) in beat.forgotten where !runner.shared.isOnline(userId) {
                _ = try await runner.run { s in try await EventStream.markLastSeen(s, userId: userId, at: seenAt) }
            }
        } catch {
            logger.warning("presence heartbeat failed: \(String(reflecting: error))")
        }
    }

    /// The listening connection's thread: it blocks there waiting for announcements.
    private let listeningThread = ThreadExecutor(name: "parley-pg-listen")

    private func listen() async {
        let node = runner.shared.nodeId
        let cluster = runner.shared.cluster
        let database = runner.shared.database as? PostgresDatabase
        // Named apart from the pool's sessions in pg_stat_activity. No idle timeout: it waits
        // for announcements, idle, for as long as nobody writes.
        let settings = PostgresDatabase.connectionSettings(url, [("application_name", "parley-server listening")])
        var pause: UInt64 = 100_000_000
        while true {
            do {
                let connection = try await PQConnection.connect(settings, on: listeningThread)
                defer { connection.close() }
                database?.setReachable(true)
                _ = try await connection.run("LISTEN \"\(CommitFollowUp.channel)\"")
                _ = try await connection.run("LISTEN \"\(ClusterPresence.channel)\"")
                // Whatever was committed before the listening began, and who opened or closed
                // streams meanwhile (read at the next heartbeat).
                cluster?.requireFullRead()
                try await runner.catchUp()
                pause = 100_000_000
                while true {
                    // The announcements heard together make one advance, to the highest of
                    // their bounds (each holds when heard, so the highest holds too): a
                    // server that was held up reads what it missed in one pull, and, if the
                    // log lost some of it, tells its streams one `resync`.
                    var highest: Int64? = nil
                    var boundUnknown = false
                    let notices = try await connection.notifications(waitingUpTo: 1_000)
                    let heardAt = ContinuousClock.now
                    for notice in notices {
                        if notice.channel == CommitFollowUp.channel {
                            let heard = CommitFollowUp.Announcement(notice.payload)
                            guard heard.node != node else { continue }
                            if let bound = heard.bound(for: node), let handedOut = heard.handedOut {
                                runner.shared.order.saw(handedOut)
                                highest = max(highest ?? bound, bound)
                            } else {
                                boundUnknown = true
                            }
                        } else {
                            cluster?.heard(notice.payload)
                        }
                    }
                    if let highest { runner.shared.hub.advance(committedThrough: highest, heardAt: heardAt) }
                    if boundUnknown { runner.catchUpSoon(heardAt: heardAt) }
                }
            } catch {
                logger.warning("listening for other servers' commits failed, retrying: \(String(reflecting: error))")
            }
            // This connection is lost: the pool's are too, most likely (PostgreSQL restarts).
            database?.setReachable(false)
            try? await Task.sleep(nanoseconds: pause)
            pause = min(pause * 2, 1_000_000_000)
        }
    }
}
