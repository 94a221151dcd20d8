// `parley-server admin ...` and `parley-server migrate` (docs/SERVER.md "Admin commands"):
// an operator's tools that work on the database directly, with the server's own settings
// (command line, environment, configuration file) and its own storage code (the record
// writes and queries of Storage/, the migrations of Storage/Migrations.swift). They run
// beside running servers: sessions are read from the database at every request, so a token
// issued or revoked here counts at once.
import ArgumentParser
import Foundation
import Logging

/// A failure an admin command reports in one line before it exits with status 1.
struct AdminFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Opening the database for a command, and reporting failures.
enum AdminRun {
    /// The heading of the settings in a command's help: it takes every setting of the
    /// server, from the same sources, though only the database's and the log's matter to it.
    static let settingsTitle = "Settings (as the server takes them)"

    /// Runs `body` and turns its failure into a line on stderr and exit status 1.
    static func reporting(_ command: String, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let exit as ExitCode {
            throw exit
        } catch {
            let message: String = switch error {
            case let failure as AdminFailure: failure.description
            case let api as APIError: api.message
            case let storage as StorageError: storage.description
            default: "\(error)"
            }
            FileHandle.standardError.write(Data("parley-server \(command): \(message)\n".utf8))
            throw ExitCode(1)
        }
    }

    /// The database the settings name, open for the length of `body`. A SQLite file must
    /// exist unless `creating` (a server, or `migrate`, creates it). With `currentSchema`
    /// the schema must be this server's: the commands write the current tables.
    static func withDatabase<T>(_ settings: Settings, creating: Bool = false, currentSchema: Bool = true,
                                _ body: (any SQLDatabase) async throws -> T) async throws -> T {
        let database: any SQLDatabase
        var postgres: PostgresDatabase? = nil
        switch settings.database {
        case .sqlite(let path):
            if !creating && !FileManager.default.fileExists(atPath: path) {
                throw AdminFailure("no database at \(path) (a server creates it at its first start, as does `parley-server migrate`)")
            }
            database = try SQLiteDatabase(path: path)
        case .postgres(let url):
            var logger = Logger(label: "parley-server.postgres")
            logger.logLevel = settings.logLevel
            let opened = try await PostgresDatabase.open(url: url, logger: logger, maximumConnections: 2)
            postgres = opened
            database = opened
        }
        let result: T
        do {
            if currentSchema { try await requireCurrentSchema(database) }
            result = try await body(database)
        } catch {
            await postgres?.close()
            throw error
        }
        await postgres?.close()
        return result
    }

    static func requireCurrentSchema(_ database: any SQLDatabase) async throws {
        let status = try await Migrations.status(of: database)
        if status.isNewer {
            throw AdminFailure("the database has schema version \(status.version); this server knows versions up to \(Migrations.latestVersion) (a newer server migrated it)")
        }
        if status.version < Migrations.latestVersion {
            throw AdminFailure("the database has schema version \(status.version), this server needs \(Migrations.latestVersion): run `parley-server migrate` first")
        }
    }

    /// Settings for a command: logs go to stderr at the configured level (default notice).
    static func settings(_ commandLine: Settings.CommandLine) throws -> Settings {
        let settings = try Settings.resolveOrExit(commandLine)
        ServerLogging.bootstrap(format: settings.logFormat, level: settings.logLevel)
        return settings
    }

    static func print(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}

struct AdminCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "admin",
        abstract: "Manage users, session tokens and channels, and check the configuration and the schema.",
        discussion: """
            Each command works on the database the server's settings name (--database, \
            PARLEY_DATABASE_URL, or the configuration file), with or without servers running. \
            Exit status: 0 done, 1 failed (the reason on stderr), 64 bad usage, 78 bad settings.
            """,
        subcommands: [CreateUser.self, DeactivateUser.self, IssueToken.self, RevokeToken.self, ListChannels.self,
                      CheckConfig.self, SchemaVersion.self])

    struct CreateUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "create-user", abstract: "Create a user (as POST /v3/users); with --issue-token, print a session token.")

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions
        @Argument(help: "The new user's id.") var userId: String
        @Option(help: "The nickname (default: none).") var nickname: String = ""
        @Option(help: "The profile image URL (default: none).") var profileUrl: String = ""
        @Flag(help: "Also issue a session token and print it alone on the last line.") var issueToken = false

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            try await AdminRun.reporting("admin create-user") {
                try validateUserId(userId)
                if nickname.utf8.count > 80 { throw APIError.tooLong("nickname", 80) }
                if profileUrl.utf8.count > 2048 { throw APIError.tooLong("profile_url", 2048) }
                try await AdminRun.withDatabase(settings) { database in
                    let now = nowMillis()
                    let user = UserRecord(userId: userId, nickname: nickname, profileUrl: profileUrl, isActive: true,
                                          createdAt: now, lastSeenAt: 0, hasEverLoggedIn: false, metadata: [:],
                                          discoveryKeys: [], preferredLanguages: [], autoAccept: true)
                    let token: String? = try await database.write { db in
                        if try await !UserQueries.users([userId], db).isEmpty {
                            throw AdminFailure("user \"\(userId)\" exists already")
                        }
                        try await RecordTables.putUser(user, db)
                        guard issueToken else { return nil }
                        let session = SessionRecord(token: randomHex(20), userId: userId, expiresAt: 0, createdAt: now)
                        try await RecordTables.putSession(session, db)
                        return session.token
                    }
                    AdminRun.print("created user \(userId)")
                    if let token { AdminRun.print(token) }
                }
            }
        }
    }

    struct DeactivateUser: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "deactivate-user",
            abstract: "Deactivate a user and revoke their session tokens.",
            discussion: """
                The user's requests are refused (401) from then on, on every server; event streams \
                already open end when they next reconnect. PUT /v3/users/{user_id} with \
                {"is_active": false} through a server also ends them at once.
                """)

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions
        @Argument(help: "The user's id.") var userId: String

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            try await AdminRun.reporting("admin deactivate-user") {
                try await AdminRun.withDatabase(settings) { database in
                    let (wasActive, revoked) = try await database.write { db in
                        guard var user = try await UserQueries.users([userId], db).first?.user else {
                            throw AdminFailure("no user \"\(userId)\"")
                        }
                        let wasActive = user.isActive
                        if wasActive {
                            user.isActive = false
                            try await RecordTables.putUser(user, db)
                        }
                        return (wasActive, try await RecordTables.deleteSessions(ofUser: userId, db))
                    }
                    AdminRun.print("\(wasActive ? "deactivated" : "already deactivated:") user \(userId); revoked \(revoked) session token\(revoked == 1 ? "" : "s")")
                }
            }
        }
    }

    struct IssueToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "issue-token",
            abstract: "Issue a session token for a user (as POST /v3/users/{user_id}/token) and print it.")

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions
        @Argument(help: "The user's id.") var userId: String
        @Option(help: "Seconds until the token expires (default: never).") var expiresIn: Int?

        func validate() throws {
            if let expiresIn, expiresIn <= 0 || expiresIn > 100 * 365 * 86_400 {
                throw ValidationError("--expires-in must be a number of seconds from 1 to 3153600000")
            }
        }

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            try await AdminRun.reporting("admin issue-token") {
                try await AdminRun.withDatabase(settings) { database in
                    let now = nowMillis()
                    let session = SessionRecord(token: randomHex(20), userId: userId,
                                                expiresAt: expiresIn.map { now + Int64($0) * 1000 } ?? 0, createdAt: now)
                    try await database.write { db in
                        guard let user = try await UserQueries.users([userId], db).first?.user else {
                            throw AdminFailure("no user \"\(userId)\"")
                        }
                        if !user.isActive { throw AdminFailure("user \"\(userId)\" is deactivated: a token would be refused") }
                        try await RecordTables.putSession(session, db)
                    }
                    AdminRun.print(session.token)
                }
            }
        }
    }

    struct RevokeToken: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "revoke-token",
            abstract: "Revoke one session token, or every token of a user (--user).",
            discussion: "A request with a revoked token is refused (401) from then on, on every server.")

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions
        @Argument(help: "The session token to revoke.") var token: String?
        @Option(help: "Revoke every session token of this user instead.") var user: String?

        func validate() throws {
            if (token == nil) == (user == nil) { throw ValidationError("give either a token or --user USER_ID") }
        }

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            try await AdminRun.reporting("admin revoke-token") {
                try await AdminRun.withDatabase(settings) { database in
                    if let token {
                        let revoked = try await database.write { db in try await RecordTables.deleteSession(token, db) }
                        if !revoked { throw AdminFailure("no session has this token") }
                        AdminRun.print("revoked 1 session token")
                    } else if let user {
                        let revoked = try await database.write { db in
                            if try await UserQueries.users([user], db).isEmpty { throw AdminFailure("no user \"\(user)\"") }
                            return try await RecordTables.deleteSessions(ofUser: user, db)
                        }
                        AdminRun.print("revoked \(revoked) session token\(revoked == 1 ? "" : "s") of user \(user)")
                    }
                }
            }
        }
    }

    struct ListChannels: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list-channels",
            abstract: "List group channels, newest first (as GET /v3/group_channels), one per line, tab-separated.",
            discussion: "Columns: url, name, custom_type, joined members, created_at (UTC), frozen.")

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions
        @Option(help: "Only the channels this user is a member of.") var member: String?
        @Option(help: "How many channels at most, 1 to 10000 (default 100).") var limit = 100

        func validate() throws {
            if !(1...10_000).contains(limit) { throw ValidationError("--limit must be from 1 to 10000") }
        }

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            try await AdminRun.reporting("admin list-channels") {
                try await AdminRun.withDatabase(settings) { database in
                    let channels = try await database.read { db in
                        let urls = try await ChannelQueries.listing(
                            member.map { .memberOf($0) } ?? .visibleTo(nil), filter: Channels.ListFilter(),
                            order: "chronological", metadataOrderKey: nil, after: nil, limit: limit, db)
                        let loaded = Dictionary(try await ChannelQueries.channels(urls, db).channels.map { ($0.channel.url, $0.channel) },
                                                uniquingKeysWith: { first, _ in first })
                        return urls.compactMap { loaded[$0] }
                    }
                    AdminRun.print(["url", "name", "custom_type", "members", "created_at", "frozen"].joined(separator: "\t"))
                    for channel in channels {
                        let joined = channel.members.values.filter { $0.state == "joined" }.count
                        AdminRun.print([channel.url, channel.name, channel.customType, String(joined),
                                        JSONLineLogHandler.timestamp(channel.createdAt), channel.freeze ? "yes" : "no"]
                            .map { $0.replacingOccurrences(of: "\t", with: " ").replacingOccurrences(of: "\n", with: " ") }
                            .joined(separator: "\t"))
                    }
                }
            }
        }
    }

    struct CheckConfig: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "check-config",
            abstract: "Resolve the settings as the server would, print them, and check the database.",
            discussion: """
                Exit status 78 when a setting is refused (the \
                line says which and where it came from), 1 when the database cannot be reached or \
                a newer server migrated it, else 0. Secrets are shown as (set), never printed.
                """)

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            for (key, value) in settings.described { AdminRun.print("\(key) = \(value)") }
            try await AdminRun.reporting("admin check-config") {
                try await AdminRun.withDatabase(settings, currentSchema: false) { database in
                    let status = try await Migrations.status(of: database)
                    if status.isNewer { try await AdminRun.requireCurrentSchema(database) }
                    AdminRun.print("database: reachable; " + SchemaVersion.describe(status))
                }
            }
        }
    }

    struct SchemaVersion: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "schema-version", abstract: "Print the database's schema version and the migrations it lacks.")

        @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions

        static func describe(_ status: Migrations.Status) -> String {
            let known = "this server's: \(Migrations.latestVersion)"
            if status.isNewer { return "schema version \(status.version) (\(known)): written by a newer server" }
            let pending = status.pending.count
            if pending == 0 { return "schema version \(status.version) (\(known)): current" }
            return "schema version \(status.version) (\(known)): \(pending) migration\(pending == 1 ? "" : "s") to apply "
                + "(parley-server migrate, or the server's next start)"
        }

        func run() async throws {
            let settings = try AdminRun.settings(options.commandLine)
            try await AdminRun.reporting("admin schema-version") {
                try await AdminRun.withDatabase(settings, currentSchema: false) { database in
                    AdminRun.print(Self.describe(try await Migrations.status(of: database)))
                }
            }
        }
    }
}

struct MigrateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Apply the schema migrations the database lacks (a server also applies them when it starts).",
        discussion: """
            Prints each migration applied, or with --dry-run each one that would be, changing \
            nothing. Stop every server on the database first (docs/SERVER.md "Upgrades"). \
            Exit status: 0 done, 1 failed, 78 bad settings.
            """)

    @OptionGroup(title: AdminRun.settingsTitle) var options: ServerOptions
    @Flag(help: "List the migrations that would run; change nothing.") var dryRun = false

    func run() async throws {
        let settings = try AdminRun.settings(options.commandLine)
        try await AdminRun.reporting("migrate") {
            if dryRun {
                let status = try await Self.statusWithoutChanges(settings)
                AdminRun.print(AdminCommand.SchemaVersion.describe(status))
                if status.isNewer { throw AdminFailure("a newer server migrated this database: nothing can be applied") }
                if status.holdsRecordLayout { AdminRun.print("would import the record layout into tables first") }
                for migration in status.pending {
                    AdminRun.print("would apply \(migration.version): \(migration.summary)" + Self.note(migration, settings))
                }
                return
            }
            try await AdminRun.withDatabase(settings, creating: true, currentSchema: false) { database in
                var legacyUploads: String? = nil
                if case .sqlite(let path) = settings.database { legacyUploads = path + ".files" }
                let applied = try await Migrations.apply(to: database, legacyUploads: legacyUploads) { line in
                    AdminRun.print(line)
                }
                for migration in applied {
                    AdminRun.print("applied \(migration.version): \(migration.summary)" + Self.note(migration, settings))
                }
                AdminRun.print(applied.isEmpty ? "schema version \(Migrations.latestVersion): current, nothing to apply"
                                               : "schema version \(Migrations.latestVersion): current")
            }
        }
    }

    /// What a migration of the other backend amounts to here: its number is recorded.
    static func note(_ migration: Migration, _ settings: Settings) -> String {
        let dialect: SQLDialect = if case .postgres = settings.database { .postgres } else { .sqlite }
        guard let only = migration.onlyFor, only != dialect else { return "" }
        return " (recorded only: nothing to do on \(dialect == .sqlite ? "SQLite" : "PostgreSQL"))"
    }

    /// The schema's status, read without writing a byte: a SQLite file is opened read-only (a
    /// server's opening switches it to WAL), and a missing one is not created.
    static func statusWithoutChanges(_ settings: Settings) async throws -> Migrations.Status {
        switch settings.database {
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else { return Migrations.Status(version: 0, holdsRecordLayout: false) }
            let connection = try SQLiteConnection(path: path, readOnly: true)
            return try await Migrations.status(connection)
        case .postgres:
            return try await AdminRun.withDatabase(settings, currentSchema: false) { database in
                try await Migrations.status(of: database)
            }
        }
    }
}
