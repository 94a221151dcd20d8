import Logging
import ArgumentParser
import Foundation
import Hummingbird
import NIOCore
import PostgresNIO

@main
struct ParleyServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "parley-server",
        abstract: "The Parley reference chat server (REST + Server-Sent Events, SQLite storage).")

    @Option(help: "Address to bind.") var host = "127.0.0.1"
    @Option(help: "Port to listen on (0 = ephemeral).") var port = 8080
    @Option(help: """
        Where the data lives: a SQLite file (PATH or sqlite:PATH, the default is parley-server.sqlite) \
        or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-full]. \
        Default: $PARLEY_DATABASE_URL, which keeps a password out of the process list.
        """) var database: String?
    @Option(help: "Admin API token (default: $PARLEY_API_TOKEN, else random, printed to stderr).") var apiToken: String?
    @Option(help: "Maximum upload size in bytes.") var uploadLimitBytes = 26_214_400
    @Option(help: "Number of events kept for Last-Event-ID resume.") var eventRetention = 10_000
    @Option(help: "Seconds between SSE heartbeat comments.") var heartbeatSeconds = 15.0
    @Option(help: "Event streams one user may have open at once.") var maxStreamsPerUser = 20

    /// PARLEY_LOG_LEVEL (trace, debug, info, notice, warning, error, critical; default error).
    static var logLevel: Logger.Level {
        ProcessInfo.processInfo.environment["PARLEY_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .error
    }

    func validate() throws {
        if port < 0 || port > 65535 { throw ValidationError("--port must be 0...65535") }
        if uploadLimitBytes < 1 { throw ValidationError("--upload-limit-bytes must be positive") }
        if eventRetention < 1 { throw ValidationError("--event-retention must be positive") }
        if heartbeatSeconds <= 0 { throw ValidationError("--heartbeat-seconds must be positive") }
        if maxStreamsPerUser < 1 { throw ValidationError("--max-streams-per-user must be positive") }
    }

    func run() async throws {
        var token = apiToken ?? ProcessInfo.processInfo.environment["PARLEY_API_TOKEN"] ?? ""
        if token.isEmpty {
            token = randomHex(16)
            FileHandle.standardError.write(Data("parley-server: generated api token \(token)\n".utf8))
        }
        let location: DatabaseLocation
        do { location = try DatabaseLocation.resolve(argument: database) } catch { throw ValidationError("\(error)") }
        let storage: any SQLDatabase
        var legacyUploads: String? = nil
        var postgresPool: PostgresClient? = nil
        var postgresURL: PostgresURL? = nil
        switch location {
        case .sqlite(let path):
            storage = try SQLiteDatabase(path: path)
            legacyUploads = path + ".files"
        case .postgres(let url):
            // The pool runs as a service of the application (added below).
            var postgresLogger = Logger(label: "parley-server.postgres")
            postgresLogger.logLevel = Self.logLevel
            let postgres = try await PostgresDatabase.open(url: url, logger: postgresLogger, startsClient: false)
            storage = postgres
            postgresPool = postgres.client
            postgresURL = url
        }
        let verify = ProcessInfo.processInfo.environment["PARLEY_VERIFY_COUNTERS"] == "1"
        let shared = SharedState(database: storage, retention: eventRetention, uploadLimit: uploadLimitBytes, verify: verify)
        let service = Service(shared: shared)
        let config = ServerConfig(apiToken: token, uploadLimit: uploadLimitBytes,
                                  heartbeatSeconds: heartbeatSeconds,
                                  maxStreamsPerUser: maxStreamsPerUser,
                                  testHooks: ProcessInfo.processInfo.environment["PARLEY_TEST_HOOKS"] == "1")
        let responder = ParleyResponder(service: service, config: config)
        let displayHost = host
        var logger = Logger(label: "parley-server")
        logger.logLevel = Self.logLevel
        var app = Application(
            responder: responder,
            configuration: .init(address: .hostname(host, port: port), serverName: "parley-server"),
            onServerRunning: { channel in
                let actualPort = channel.localAddress?.port ?? 0
                let base = "http://\(displayHost):\(actualPort)"
                shared.publicBaseURL = base
                // One unbuffered write: tests and scripts read this line to find the port.
                FileHandle.standardOutput.write(Data("parley-server listening on \(base)\n".utf8))
            },
            logger: logger)
        if let postgresPool { app.addServices(postgresPool) }
        // Once the pool runs and before the port opens: the schema, then what memory holds.
        app.beforeServerStarts { [legacyUploads, postgresURL, logger] in
            try await Migrations.apply(to: storage, legacyUploads: legacyUploads) { line in
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
            try await service.load()
            // Other servers may write the same PostgreSQL database: their events reach this
            // server's streams too.
            if let postgresURL {
                let follower = PeerFollower(url: postgresURL, service: service, logger: logger)
                // The first heartbeat says this server runs before any stream can open.
                await follower.beat()
                follower.start()
            }
        }
        // Event streams never end by themselves, and a graceful shutdown waits for open
        // responses: on SIGTERM/SIGINT end them first, so that the server stops promptly
        // (clients reconnect and resume by Last-Event-ID).
        let endStreams: @Sendable () -> Void = {
            shared.hub.finishAll()
            // The other servers learn at once that this one's streams are gone (while the
            // pool still runs: it stops last; should this lose the race, the rows go when
            // the others find this server's heartbeat stopped).
            if let cluster = shared.cluster { Task { await cluster.leave() } }
        }
        var signalSources: [DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler(handler: endStreams)
            source.resume()
            signalSources.append(source)
        }
        defer { signalSources.forEach { $0.cancel() } }
        try await app.runService()
    }
}

