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
        abstract: "The Parley reference chat server: REST and Server-Sent Events over SQLite or PostgreSQL.",
        discussion: """
            Every option can also be set by its environment variable (named in its help), or \
            by a key of a JSON configuration file given with --config (the option's name with \
            underscores: "max_streams_per_user"). The command line wins over the environment, \
            which wins over the file. Secrets need never be on the command line: give \
            PARLEY_API_TOKEN or --api-token-file, and PARLEY_DATABASE_URL or \
            --database-file. docs/SERVER.md describes every setting.
            """,
        version: ServerVersion.string)

    @Option(help: "A JSON file of settings (env PARLEY_CONFIG).") var config: String?
    @Option(help: "Address to bind (env PARLEY_HOST; default 127.0.0.1).") var host: String?
    @Option(help: "Port to listen on, 0 for any free one (env PARLEY_PORT; default 8080).") var port: String?
    @Option(help: """
        Where the data lives: a SQLite file (PATH or sqlite:PATH) \
        or postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require|verify-full] \
        (env PARLEY_DATABASE_URL; default parley-server.sqlite).
        """) var database: String?
    @Option(help: "A file holding the --database value, e.g. a URL with its password (env PARLEY_DATABASE_URL_FILE).")
    var databaseFile: String?
    @Option(help: "Admin API token (env PARLEY_API_TOKEN; default: a random one, printed to stderr).") var apiToken: String?
    @Option(help: "A file holding the admin API token (env PARLEY_API_TOKEN_FILE).") var apiTokenFile: String?
    @Option(help: "Largest upload in bytes (env PARLEY_UPLOAD_LIMIT_BYTES; default 26214400).") var uploadLimitBytes: String?
    @Option(help: "Events kept for a Last-Event-ID resume (env PARLEY_EVENT_RETENTION; default 10000).")
    var eventRetention: String?
    @Option(help: "Seconds between the event streams' keep-alive comments (env PARLEY_HEARTBEAT_SECONDS; default 15).")
    var heartbeatSeconds: String?
    @Option(help: "Event streams one user may have open at once (env PARLEY_MAX_STREAMS_PER_USER; default 20).")
    var maxStreamsPerUser: String?
    @Option(help: """
        trace, debug, info (adds one access-log line per request), notice, warning, error or critical \
        (env PARLEY_LOG_LEVEL; default error).
        """)
    var logLevel: String?
    @Option(help: "text, or json for one JSON object per line (env PARLEY_LOG_FORMAT; default text).")
    var logFormat: String?
    @Option(help: "A token GET /metrics then asks for as \"Authorization: Bearer TOKEN\" (env PARLEY_METRICS_TOKEN; default: open).")
    var metricsToken: String?
    @Option(help: "A file holding the metrics token (env PARLEY_METRICS_TOKEN_FILE).")
    var metricsTokenFile: String?
    @Option(help: "Seconds a stop (SIGTERM) waits for requests in flight (env PARLEY_SHUTDOWN_GRACE_SECONDS; default 10).")
    var shutdownGraceSeconds: String?
    @Option(help: """
        on: members who join a channel see the messages sent before they joined; off: their history \
        starts when they join (env PARLEY_CHAT_HISTORY; default on). The admin API's setting wins.
        """)
    var chatHistory: String?
    @Option(help: """
        Group channels one user may have joined at once (env PARLEY_MAX_CHANNELS_PER_USER; default 2000). \
        The admin API's setting wins.
        """)
    var maxChannelsPerUser: String?

    /// The options given on the command line, by setting name.
    private var commandLine: Settings.CommandLine {
        var given: [String: String] = [:]
        let pairs: [(SettingKey, String?)] = [
            (.host, host), (.port, port), (.database, database), (.databaseFile, databaseFile),
            (.apiToken, apiToken), (.apiTokenFile, apiTokenFile), (.uploadLimitBytes, uploadLimitBytes),
            (.eventRetention, eventRetention), (.heartbeatSeconds, heartbeatSeconds),
            (.maxStreamsPerUser, maxStreamsPerUser), (.logLevel, logLevel), (.logFormat, logFormat),
            (.metricsToken, metricsToken), (.metricsTokenFile, metricsTokenFile),
            (.shutdownGraceSeconds, shutdownGraceSeconds), (.chatHistory, chatHistory),
            (.maxChannelsPerUser, maxChannelsPerUser),
        ]
        for (key, value) in pairs { if let value { given[key.name] = value } }
        return Settings.CommandLine(values: given, configFile: config)
    }

    func run() async throws {
        let settings: Settings
        do {
            settings = try Settings.resolve(commandLine: commandLine, environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("parley-server: invalid configuration: \(error)\n".utf8))
            throw ExitCode(78)  // EX_CONFIG
        }
        let logLevel = settings.logLevel
        ServerLogging.bootstrap(format: settings.logFormat, level: logLevel)
        var token = settings.apiToken ?? ""
        if token.isEmpty {
            token = randomHex(16)
            FileHandle.standardError.write(Data("parley-server: generated api token \(token)\n".utf8))
        }
        // libvips starts once, before any request (Images.swift); without it the server still runs.
        if !Images.available {
            FileHandle.standardError.write(Data("parley-server: libvips did not start: uploads get no thumbnails, covers are not checked\n".utf8))
        }
        let location = settings.database
        let storage: any SQLDatabase
        var legacyUploads: String? = nil
        var postgresPools: (main: PostgresClient, peerReads: PostgresClient)? = nil
        var postgresURL: PostgresURL? = nil
        switch location {
        case .sqlite(let path):
            storage = try SQLiteDatabase(path: path)
            legacyUploads = path + ".files"
        case .postgres(let url):
            // The pools run as services of the application (added below).
            var postgresLogger = Logger(label: "parley-server.postgres")
            postgresLogger.logLevel = logLevel
            let postgres = try await PostgresDatabase.open(url: url, logger: postgresLogger, startsClient: false)
            storage = postgres
            postgresPools = (postgres.client, postgres.peerReadsClient)
            postgresURL = url
        }
        let verify = ProcessInfo.processInfo.environment["PARLEY_VERIFY_COUNTERS"] == "1"
        let shared = SharedState(database: storage, retention: settings.eventRetention, uploadLimit: settings.uploadLimitBytes,
                                 applicationDefaults: settings.applicationDefaults, verify: verify)
        let service = Service(shared: shared)
        let config = ServerConfig(apiToken: token, uploadLimit: settings.uploadLimitBytes,
                                  heartbeatSeconds: settings.heartbeatSeconds,
                                  maxStreamsPerUser: settings.maxStreamsPerUser,
                                  metricsToken: settings.metricsToken,
                                  testHooks: ProcessInfo.processInfo.environment["PARLEY_TEST_HOOKS"] == "1")
        
        let (host, port) = (settings.host, settings.port)
        let displayHost = host
        var logger = Logger(label: "parley-server")
        logger.logLevel = logLevel
        let responder = ParleyResponder(service: service, config: config, logger: logger)
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
        if let postgresPools { app.addServices(postgresPools.main, postgresPools.peerReads) }
        // Once the pool runs and before the port opens: the schema, then what memory holds.
        app.beforeServerStarts { [legacyUploads, postgresURL, logger] in
            try await Migrations.apply(to: storage, legacyUploads: legacyUploads) { line in
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
            // From here on the schema has the table of noted changes (migration 10).
            (storage as? SQLiteDatabase)?.beforeCommit = SearchQueries.indexNotedChanges
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
        let grace = settings.shutdownGraceSeconds
        let endStreams: @Sendable () -> Void = { [logger] in
            // Requests still running after the grace period are given up: a stop must not
            // wait for a client that never finishes its upload, say. Everything answered
            // before was committed first, so nothing acknowledged is lost.
            if !shared.hub.isShuttingDown {
                DispatchQueue.global().asyncAfter(deadline: .now() + grace) {
                    logger.warning("requests still running \(grace) s after the stop was asked for; exiting without them")
                    Foundation.exit(0)
                }
            }
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

