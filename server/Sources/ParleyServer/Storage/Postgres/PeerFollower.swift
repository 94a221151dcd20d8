// PostgreSQL: how a server learns what the other servers on its database committed, so that
// its streams receive their events (docs/ARCHITECTURE.md "Several servers on one PostgreSQL").
// A connection of its own listens for the writers' announcements (`WriteTurn.channel`), which
// carry numbers only; the hub then reads the events from the log. An announcement is a hint:
// the counters in the database are the truth, read again every `pollInterval` and after every
// (re)connection, so a missed announcement only delays delivery.
import Logging
import PostgresNIO

final class PeerFollower: Sendable {
    private let url: PostgresURL
    private let service: Service
    private let logger: Logger
    static let pollInterval: UInt64 = 1_000_000_000

    init(url: PostgresURL, service: Service, logger: Logger) {
        self.url = url
        self.service = service
        self.logger = logger
    }

    /// Listens and polls until the process ends.
    func start() {
        Task { await self.listen() }
        Task {
            while true {
                try? await Task.sleep(nanoseconds: Self.pollInterval)
                try? await self.service.catchUp()
            }
        }
    }

    private func listen() async {
        let hub = service.shared.hub
        let node = service.shared.nodeId
        var pause: UInt64 = 100_000_000
        while true {
            do {
                let connection = try await PostgresDatabase.connect(url, id: 1, logger: logger)
                do {
                    try await connection.listen(on: WriteTurn.channel) { announcements in
                        // Whatever was committed before the listening began.
                        try await self.service.catchUp()
                        pause = 100_000_000
                        for try await announcement in announcements {
                            guard let (sender, seq) = WriteTurn.parse(announcement.payload), sender != node else { continue }
                            hub.advance(committedThrough: seq)
                        }
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                try? await connection.close()
            } catch {
                logger.warning("listening for other servers' commits failed, retrying: \(String(reflecting: error))")
            }
            try? await Task.sleep(nanoseconds: pause)
            pause = min(pause * 2, 5_000_000_000)
        }
    }
}
