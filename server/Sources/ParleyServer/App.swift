import Logging
import ArgumentParser
import Foundation
import Hummingbird
import NIOCore
import ServiceLifecycle

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
            --database-file. docs/SERVER.md describes every setting. `parley-server admin` \
            and `parley-server migrate` work on the database the same settings name.
            """,
        version: ServerVersion.string,
        subcommands: [AdminCommand.self, MigrateCommand.self])

    @OptionGroup var options: ServerOptions

    func run() async throws {
        let settings = try Settings.resolveOrExit(options.commandLine)
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
        var postgresURL: PostgresURL? = nil
        // The backend's write coordinator (Writers/Writers.swift), made once the shared state is.
        let makeWriters: (SharedState) -> any Writers
        switch location {
        case .sqlite(let path):
            let sqlite = try SQLiteDatabase(path: path)
            storage = sqlite
            legacyUploads = path + ".files"
            makeWriters = { shared in SQLiteWriters(shared: shared, database: sqlite) }
        case .postgres(let url):
            var postgresLogger = Logger(label: "parley-server.postgres")
            postgresLogger.logLevel = logLevel
            let postgres = try await PostgresDatabase.open(url: url, logger: postgresLogger)
            storage = postgres
            postgresURL = url
            makeWriters = { shared in PostgresWriters(shared: shared) }
        }
        let verify = ProcessInfo.processInfo.environment["PARLEY_VERIFY_COUNTERS"] == "1"
        let shared = SharedState(database: storage, retention: settings.eventRetention, uploadLimit: settings.uploadLimitBytes,
                                 applicationDefaults: settings.applicationDefaults, hookDefaults: settings.hookDefaults,
                                 verify: verify)
        let runner = RequestRunner(shared: shared, writers: makeWriters(shared))
        let config = ServerConfig(apiToken: token, uploadLimit: settings.uploadLimitBytes,
                                  heartbeatSeconds: settings.heartbeatSeconds,
                                  maxStreamsPerUser: settings.maxStreamsPerUser,
                                  metricsToken: settings.metricsToken,
                                  trustedProxies: settings.trustedProxies,
                                  testHooks: ProcessInfo.processInfo.environment["PARLEY_TEST_HOOKS"] == "1")
        
        let (host, port) = (settings.host, settings.port)
        let displayHost = host
        var logger = Logger(label: "parley-server")
        logger.logLevel = logLevel
        let responder = ParleyResponder(runner: runner, config: config, logger: logger)
        var app = Application(
            responder: responder,
            // Each connection tells when it ends (an event stream ends with it, HTTP/ConnectionEnd.swift).
            server: .http1(configuration: .init(additionalChannelHandlers: [ConnectionEndHandler()])),
            configuration: .init(address: .hostname(host, port: port), serverName: "parley-server",
                                 backlog: settings.listenBacklog),
            onServerRunning: { channel in
                let actualPort = channel.localAddress?.port ?? 0
                let base = "http://\(displayHost):\(actualPort)"
                shared.publicBaseURL = base
                // One unbuffered write: tests and scripts read this line to find the port.
                FileHandle.standardOutput.write(Data("parley-server listening on \(base)\n".utf8))
            },
            logger: logger)
        // The database outlives the services: a stop ends the worker with its deliveries in
        // flight recorded.
        let hookWorker = HookDeliveryWorker(runner: runner, registry: shared.webhooks, apiToken: token, logger: logger,
                                            answerHandlers: [Translation.category: { call, answer in
                                                await Translation.applyQueuedAnswer(call, answer: answer, runner: runner)
                                            }])
        app.addServices(hookWorker)
        // A held push notification that goes out is queued as the send would have queued it.
        shared.pushHold.start { calls in
            _ = try? await runner.run { s in for call in calls { s.queueHookCall(call) } }
        }
        // Once the pool runs and before the port opens: the schema, then what memory holds.
        app.beforeServerStarts { [legacyUploads, postgresURL, logger, hookWorker] in
            let applied = try await Migrations.apply(to: storage, legacyUploads: legacyUploads) { line in
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
            // From here on the schema has the table of noted changes (migration 10).
            (storage as? SQLiteDatabase)?.beforeCommit = SearchQueries.indexNotedChanges
            (storage as? SQLiteDatabase)?.afterOtherProcessCommits = { [cache = runner.shared.cache] in cache.forgetUsers() }
            try await runner.load()
            await hookWorker.begin()
            // Other servers may write the same PostgreSQL database: their events reach this
            // server's streams too.
            if let postgresURL {
                let follower = PeerFollower(url: postgresURL, runner: runner, logger: logger)
                // The first heartbeat says this server runs before any stream can open.
                await follower.beat()
                follower.start()
                DatabaseWatch.start(shared: shared, logger: logger)
            }
            logger.notice("started", metadata: [
                "version": .string(ServerVersion.string),
                "backend": .string(storage.dialect.rawValue),
                "node_id": .string(shared.nodeId),
                "schema_version": .stringConvertible(Migrations.latestVersion),
                "migrations_applied": .string(applied.isEmpty ? "none" : applied.map { String($0.version) }.joined(separator: ",")),
            ])
        }
        // Event streams never end by themselves, and a graceful shutdown waits for open
        // responses: after the drain the stop ends them first, so that the server stops
        // promptly (clients reconnect and resume by Last-Event-ID).
        let serviceGroup = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let shutdown = ShutdownSequence(shared: shared, drainSeconds: settings.shutdownDrainSeconds,
                                        graceSeconds: settings.shutdownGraceSeconds, logger: logger,
                                        shutDown: { await serviceGroup.triggerGracefulShutdown() })
        let signalSources = shutdown.handleSignals()
        defer { signalSources.forEach { $0.cancel() } }
        try await serviceGroup.run()
        logger.notice("shutdown done")
    }
}

/// Every setting as a command-line option: the server's, and `admin check-config`'s.
struct ServerOptions: ParsableArguments {
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
    @Option(help: "Connections queued before they are accepted (env PARLEY_LISTEN_BACKLOG; default the system's largest, net.core.somaxconn).")
    var listenBacklog: String?
    @Option(help: """
        trace, debug, info (adds one access-log line per request), notice (the server's start and \
        stop, and warnings), warning, error or critical (env PARLEY_LOG_LEVEL; default notice).
        """)
    var logLevel: String?
    @Option(help: "text, or json for one JSON object per line (env PARLEY_LOG_FORMAT; default text).")
    var logFormat: String?
    @Option(help: "A token GET /metrics then asks for as \"Authorization: Bearer TOKEN\" (env PARLEY_METRICS_TOKEN; default: open).")
    var metricsToken: String?
    @Option(help: "A file holding the metrics token (env PARLEY_METRICS_TOKEN_FILE).")
    var metricsTokenFile: String?
    @Option(help: "Seconds a stop (SIGTERM) waits for requests in flight after the drain (env PARLEY_SHUTDOWN_GRACE_SECONDS; default 10).")
    var shutdownGraceSeconds: String?
    @Option(help: """
        Seconds between a stop (SIGTERM) and the port's closing, while /health/ready answers 503 and \
        requests are still served; 0 for none (env PARLEY_SHUTDOWN_DRAIN_SECONDS; default 5).
        """)
    var shutdownDrainSeconds: String?
    @Option(help: """
        Addresses and ADDRESS/BITS ranges, comma-separated, of the balancers whose X-Forwarded-For \
        names the client in the access log (env PARLEY_TRUSTED_PROXIES; default none).
        """)
    var trustedProxies: String?
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
    @Option(help: "Webhook endpoints, http:// or https:// URLs, comma-separated (env PARLEY_WEBHOOK_URLS; default none). The admin API's endpoints win.")
    var webhookUrls: String?
    @Option(help: "The event categories the --webhook-urls receive, comma-separated, or * (env PARLEY_WEBHOOK_CATEGORIES; default all).")
    var webhookCategories: String?
    @Option(help: "The key of the webhook signatures (env PARLEY_WEBHOOK_SECRET; default the admin API token).")
    var webhookSecret: String?
    @Option(help: "A file holding the webhook signature key (env PARLEY_WEBHOOK_SECRET_FILE).")
    var webhookSecretFile: String?
    @Option(help: "Seconds one webhook delivery may take, 0.1 to 300 (env PARLEY_WEBHOOK_TIMEOUT_SECONDS; default 10).")
    var webhookTimeoutSeconds: String?
    @Option(help: "Webhook deliveries in flight at once per endpoint and server, 1 to 64 (env PARLEY_WEBHOOK_CONCURRENCY; default 4).")
    var webhookConcurrency: String?
    @Option(help: "Attempts of one webhook delivery before it is given up, 1 to 100 (env PARLEY_WEBHOOK_MAX_ATTEMPTS; default 10).")
    var webhookMaxAttempts: String?
    @Option(help: "The longest pause between two attempts of a webhook delivery (env PARLEY_WEBHOOK_RETRY_MAX_SECONDS; default 300).")
    var webhookRetryMaxSeconds: String?
    @Option(help: "The push gateway: an http:// or https:// URL that takes the push requests of messages (env PARLEY_PUSH_GATEWAY_URL; default none: nothing is sent).")
    var pushGatewayUrl: String?
    @Option(help: "Seconds one push gateway call may take, 0.1 to 300 (env PARLEY_PUSH_GATEWAY_TIMEOUT_SECONDS; default 10).")
    var pushGatewayTimeoutSeconds: String?
    @Option(help: "Push gateway calls in flight at once per server, 1 to 64 (env PARLEY_PUSH_GATEWAY_CONCURRENCY; default 4).")
    var pushGatewayConcurrency: String?
    @Option(help: "The title of a notification, with {channel_name}, {channel_url}, {sender_id}, {sender_nickname}, {message}, {file_name} (env PARLEY_PUSH_TITLE_TEMPLATE; default {channel_name}).")
    var pushTitleTemplate: String?
    @Option(help: "The body of a notification, with the title's placeholders (env PARLEY_PUSH_BODY_TEMPLATE; default \"{sender_nickname}: {message}\").")
    var pushBodyTemplate: String?
    @Option(help: "The translator: an http:// or https:// URL that translates message texts (env PARLEY_TRANSLATOR_URL; default none: translation is refused).")
    var translatorUrl: String?
    @Option(help: "Seconds one translator call may take, 0.1 to 300 (env PARLEY_TRANSLATOR_TIMEOUT_SECONDS; default 5).")
    var translatorTimeoutSeconds: String?
    @Option(help: "Queued translator calls in flight at once per server, 1 to 64 (env PARLEY_TRANSLATOR_CONCURRENCY; default 4).")
    var translatorConcurrency: String?
    @Option(help: "Members one group channel may hold (env PARLEY_MAX_MEMBERS_PER_CHANNEL; default 2000).")
    var maxMembersPerChannel: String?
    @Option(help: "Members one Supergroup channel may hold (env PARLEY_MAX_MEMBERS_PER_SUPER_CHANNEL; default 20000).")
    var maxMembersPerSuperChannel: String?

    /// The options given on the command line, by setting name.
    var commandLine: Settings.CommandLine {
        var given: [String: String] = [:]
        let pairs: [(SettingKey, String?)] = [
            (.host, host), (.port, port), (.database, database), (.databaseFile, databaseFile),
            (.apiToken, apiToken), (.apiTokenFile, apiTokenFile), (.uploadLimitBytes, uploadLimitBytes),
            (.eventRetention, eventRetention), (.heartbeatSeconds, heartbeatSeconds),
            (.maxStreamsPerUser, maxStreamsPerUser), (.listenBacklog, listenBacklog), (.logLevel, logLevel), (.logFormat, logFormat),
            (.metricsToken, metricsToken), (.metricsTokenFile, metricsTokenFile),
            (.shutdownGraceSeconds, shutdownGraceSeconds), (.shutdownDrainSeconds, shutdownDrainSeconds),
            (.trustedProxies, trustedProxies), (.chatHistory, chatHistory),
            (.maxChannelsPerUser, maxChannelsPerUser), (.maxMembersPerChannel, maxMembersPerChannel),
            (.maxMembersPerSuperChannel, maxMembersPerSuperChannel), (.webhookURLs, webhookUrls), (.webhookCategories, webhookCategories),
            (.webhookSecret, webhookSecret), (.webhookSecretFile, webhookSecretFile),
            (.webhookTimeoutSeconds, webhookTimeoutSeconds), (.webhookConcurrency, webhookConcurrency),
            (.webhookMaxAttempts, webhookMaxAttempts), (.webhookRetryMaxSeconds, webhookRetryMaxSeconds),
            (.pushGatewayURL, pushGatewayUrl), (.pushGatewayTimeoutSeconds, pushGatewayTimeoutSeconds),
            (.pushGatewayConcurrency, pushGatewayConcurrency), (.pushTitleTemplate, pushTitleTemplate),
            (.pushBodyTemplate, pushBodyTemplate), (.translatorURL, translatorUrl),
            (.translatorTimeoutSeconds, translatorTimeoutSeconds), (.translatorConcurrency, translatorConcurrency),
        ]
        for (key, value) in pairs { if let value { given[key.name] = value } }
        return Settings.CommandLine(values: given, configFile: config)
    }
}
