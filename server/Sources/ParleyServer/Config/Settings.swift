// The server's settings, each from the command line, else the environment, else the
// configuration file (`--config FILE`, JSON), else its default (docs/SERVER.md lists them).
// Secrets (the admin token, a database URL with its password) can come from a file named by
// the `..._file` setting, so that none has to appear on a command line, where `ps` shows it.
import ArgumentParser
import Foundation
import Logging

extension Settings {
    /// Resolves the settings from `commandLine`, the environment and the configuration file,
    /// or says on stderr what is wrong and exits with status 78 (EX_CONFIG).
    static func resolveOrExit(_ commandLine: CommandLine) throws -> Settings {
        do {
            return try resolve(commandLine: commandLine, environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("parley-server: invalid configuration: \(error)\n".utf8))
            throw ExitCode(78)
        }
    }

    /// Every setting with the value it resolved to, secrets shown as set or not.
    var described: [(key: String, value: String)] {
        func secret(_ value: String?) -> String { value == nil ? "none" : "(set)" }
        let hooks = hookDefaults
        let webhookURLs = hooks.settings.endpoints.map(\.url).joined(separator: ",")
        let webhookCategories = hooks.settings.endpoints.first?.categories.map(\.rawValue).joined(separator: ",")
        let webhooks: [(key: String, value: String)] = [
            ("webhook_urls", webhookURLs.isEmpty ? "none" : webhookURLs),
            ("webhook_categories", webhookCategories ?? "*"),
            ("webhook_secret", hooks.secret == nil ? "none (the api token)" : "(set)"),
            ("webhook_timeout_seconds", String(hooks.timeoutSeconds)),
            ("webhook_concurrency", String(hooks.concurrency)),
            ("webhook_max_attempts", String(hooks.maxAttempts)),
            ("webhook_retry_max_seconds", String(hooks.retryMaxSeconds)),
        ]
        let services: [(key: String, value: String)] = [
            ("push_gateway_url", hooks.push.url ?? "none"),
            ("push_gateway_timeout_seconds", String(hooks.push.timeoutSeconds)),
            ("push_gateway_concurrency", String(hooks.push.concurrency)),
            ("push_title_template", hooks.push.titleTemplate), ("push_body_template", hooks.push.bodyTemplate),
            ("translator_url", hooks.translator.url ?? "none"),
            ("translator_timeout_seconds", String(hooks.translator.timeoutSeconds)),
            ("translator_concurrency", String(hooks.translator.concurrency)),
        ]
        let others: [(key: String, value: String)] = [
            ("host", host), ("port", String(port)), ("listen_backlog", String(listenBacklog)),
            ("database", database.description),
            ("api_token", apiToken == nil ? "none (a random one at each start)" : "(set)"),
            ("upload_limit_bytes", String(uploadLimitBytes)), ("event_retention", String(eventRetention)),
            ("heartbeat_seconds", String(heartbeatSeconds)), ("max_streams_per_user", String(maxStreamsPerUser)),
            ("chat_history", applicationDefaults.chatHistory ? "on" : "off"),
            ("max_channels_per_user", String(applicationDefaults.maxChannelsPerUser)),
            ("max_members_per_channel", String(applicationDefaults.maxMembersPerChannel)),
            ("max_members_per_super_channel", String(applicationDefaults.maxMembersPerSuperChannel)),
            ("log_level", logLevel.rawValue), ("log_format", logFormat.rawValue),
            ("metrics_token", secret(metricsToken)),
            ("shutdown_grace_seconds", String(shutdownGraceSeconds)),
            ("shutdown_drain_seconds", String(shutdownDrainSeconds)),
            ("trusted_proxies", trustedProxies.description),
        ]
        return others + webhooks + services
    }
}

/// What `parley-server --version` prints; the same number as the library's (CMakeLists.txt).
enum ServerVersion {
    static let string = "0.1.0"
}

/// A setting refused at start, with the place it came from and the key it was given under.
struct SettingsError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// One setting's names: `name` in the configuration file, `--name-with-dashes` on the
/// command line, `PARLEY_NAME` in the environment (unless it has a name of its own).
struct SettingKey: Sendable {
    let name: String
    let environmentName: String?

    init(_ name: String, environment: String? = nil) {
        self.name = name
        self.environmentName = environment
    }

    var flag: String { "--" + name.replacingOccurrences(of: "_", with: "-") }
    var environment: String { environmentName ?? "PARLEY_" + name.uppercased() }

    static let host = SettingKey("host")
    static let port = SettingKey("port")
    static let listenBacklog = SettingKey("listen_backlog")
    static let database = SettingKey("database", environment: "PARLEY_DATABASE_URL")
    static let databaseFile = SettingKey("database_file", environment: "PARLEY_DATABASE_URL_FILE")
    static let apiToken = SettingKey("api_token")
    static let apiTokenFile = SettingKey("api_token_file")
    static let uploadLimitBytes = SettingKey("upload_limit_bytes")
    static let eventRetention = SettingKey("event_retention")
    static let heartbeatSeconds = SettingKey("heartbeat_seconds")
    static let maxStreamsPerUser = SettingKey("max_streams_per_user")
    static let logLevel = SettingKey("log_level")
    static let logFormat = SettingKey("log_format")
    static let metricsToken = SettingKey("metrics_token")
    static let metricsTokenFile = SettingKey("metrics_token_file")
    static let shutdownGraceSeconds = SettingKey("shutdown_grace_seconds")
    static let shutdownDrainSeconds = SettingKey("shutdown_drain_seconds")
    static let trustedProxies = SettingKey("trusted_proxies")
    static let chatHistory = SettingKey("chat_history")
    static let maxChannelsPerUser = SettingKey("max_channels_per_user")
    static let webhookURLs = SettingKey("webhook_urls")
    static let webhookCategories = SettingKey("webhook_categories")
    static let webhookSecret = SettingKey("webhook_secret")
    static let webhookSecretFile = SettingKey("webhook_secret_file")
    static let webhookTimeoutSeconds = SettingKey("webhook_timeout_seconds")
    static let webhookConcurrency = SettingKey("webhook_concurrency")
    static let webhookMaxAttempts = SettingKey("webhook_max_attempts")
    static let webhookRetryMaxSeconds = SettingKey("webhook_retry_max_seconds")
    static let pushGatewayURL = SettingKey("push_gateway_url")
    static let pushGatewayTimeoutSeconds = SettingKey("push_gateway_timeout_seconds")
    static let pushGatewayConcurrency = SettingKey("push_gateway_concurrency")
    static let pushTitleTemplate = SettingKey("push_title_template")
    static let pushBodyTemplate = SettingKey("push_body_template")
    static let translatorURL = SettingKey("translator_url")
    static let translatorTimeoutSeconds = SettingKey("translator_timeout_seconds")
    static let translatorConcurrency = SettingKey("translator_concurrency")
    static let maxMembersPerChannel = SettingKey("max_members_per_channel")
    static let maxMembersPerSuperChannel = SettingKey("max_members_per_super_channel")

    /// Every key a configuration file may hold.
    static let all: [SettingKey] = [
        host, port, listenBacklog, database, databaseFile, apiToken, apiTokenFile, uploadLimitBytes, eventRetention,
        heartbeatSeconds, maxStreamsPerUser, logLevel, logFormat, metricsToken, metricsTokenFile,
        shutdownGraceSeconds, shutdownDrainSeconds, trustedProxies, chatHistory, maxChannelsPerUser,
        webhookURLs, webhookCategories, webhookSecret, webhookSecretFile, webhookTimeoutSeconds, webhookConcurrency,
        webhookMaxAttempts, webhookRetryMaxSeconds, pushGatewayURL, pushGatewayTimeoutSeconds, pushGatewayConcurrency,
        pushTitleTemplate, pushBodyTemplate, translatorURL, translatorTimeoutSeconds, translatorConcurrency,
        maxMembersPerChannel, maxMembersPerSuperChannel,
    ]
}

/// The settings once resolved: every value checked.
struct Settings: Sendable {
    /// `/proc/sys/net/core/somaxconn`, the kernel's cap on any listen backlog (4096 on current
    /// Linux); 4096 when it cannot be read.
    static let systemMaxBacklog: Int = {
        guard let text = try? String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8),
            let value = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)), value > 0
        else { return 4096 }
        return value
    }()

    var host = "127.0.0.1"
    var port = 8080
    /// Connections the kernel queues before the server accepts them; by default the system's
    /// largest (`net.core.somaxconn`), so that thousands of clients connecting together are
    /// queued rather than refused or dropped.
    var listenBacklog = Settings.systemMaxBacklog
    var database: DatabaseLocation = .sqlite(path: DatabaseLocation.defaultSQLitePath)
    /// Nil: none was given; the server makes one up and prints it.
    var apiToken: String?
    var uploadLimitBytes = 26_214_400
    var eventRetention = 10_000
    var heartbeatSeconds = 15.0
    var maxStreamsPerUser = 20
    var logLevel: Logger.Level = .notice
    var logFormat: LogFormat = .text
    /// Nil: /metrics needs no token.
    var metricsToken: String?
    var shutdownGraceSeconds = 10.0
    /// How long `/health/ready` answers 503 after a stop is asked for, before the streams end
    /// and the port closes: a balancer's health check has time to take the server out.
    var shutdownDrainSeconds = 5.0
    /// The peers whose `X-Forwarded-For` names the client in the access log (none: the peer
    /// is the client).
    var trustedProxies = TrustedProxies()
    /// The application settings a database starts with; the admin API's stored values win
    /// over them (Services/Application.swift).
    var applicationDefaults = ApplicationSettings()
    /// The webhook endpoints a database starts with (the admin API's stored ones win) and how
    /// deliveries are made (OutgoingCalls/Webhooks.swift).
    var hookDefaults = HookDefaults()

    /// The values given on the command line (nil: not given there).
    struct CommandLine {
        var values: [String: String] = [:]
        var configFile: String?
    }

    /// Resolves every setting: the command line, else `environment`, else the configuration
    /// file (from the command line or PARLEY_CONFIG), else the default.
    static func resolve(commandLine: CommandLine, environment: [String: String]) throws(SettingsError) -> Settings {
        let configPath = commandLine.configFile ?? environment["PARLEY_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let file = try configPath.map { path throws(SettingsError) in try ConfigFile.read(path) } ?? [:]
        let source = Source(commandLine: commandLine.values, environment: environment, file: file,
                            filePath: configPath ?? "")
        var settings = Settings()
        if let (value, origin) = source.string(.host) {
            if value.isEmpty { throw SettingsError("\(origin): the address to bind is empty") }
            settings.host = value
        }
        if let port = try source.integer(.port, in: 0...65_535) { settings.port = port }
        if let (value, origin) = try source.secret(.database, file: .databaseFile) {
            do { settings.database = try DatabaseLocation.parse(value) } catch {
                throw SettingsError("\(origin): \(error)")
            }
        }
        if let (token, _) = try source.secret(.apiToken, file: .apiTokenFile) { settings.apiToken = token }
        if let (token, _) = try source.secret(.metricsToken, file: .metricsTokenFile) { settings.metricsToken = token }
        if let value = try source.integer(.uploadLimitBytes, in: 1...Int(Int32.max)) { settings.uploadLimitBytes = value }
        if let value = try source.integer(.eventRetention, in: 1...100_000_000) { settings.eventRetention = value }
        if let value = try source.seconds(.heartbeatSeconds) { settings.heartbeatSeconds = value }
        if let value = try source.integer(.maxStreamsPerUser, in: 1...100_000) { settings.maxStreamsPerUser = value }
        if let value = try source.integer(.listenBacklog, in: 1...1_048_576) { settings.listenBacklog = value }
        if let value = try source.seconds(.shutdownGraceSeconds) { settings.shutdownGraceSeconds = value }
        if let value = try source.seconds(.shutdownDrainSeconds, allowingZero: true) { settings.shutdownDrainSeconds = value }
        if let (value, origin) = source.string(.trustedProxies) {
            do { settings.trustedProxies = try TrustedProxies.parse(value) } catch {
                throw SettingsError("\(origin): \(error)")
            }
        }
        if let (value, origin) = source.string(.chatHistory) {
            switch value.lowercased() {
            case "on": settings.applicationDefaults.chatHistory = true
            case "off": settings.applicationDefaults.chatHistory = false
            default: throw SettingsError("\(origin): '\(value)' is neither on nor off")
            }
        }
        if let value = try source.integer(.maxChannelsPerUser, in: 1...ApplicationSettings.channelLimitRange.upperBound) {
            settings.applicationDefaults.maxChannelsPerUser = value
        }
        try resolveWebhooks(source, into: &settings.hookDefaults)
        try resolveOutgoingServices(source, into: &settings.hookDefaults)
        let memberRange = ApplicationSettings.memberLimitRange
        if let value = try source.integer(.maxMembersPerChannel, in: memberRange) {
            settings.applicationDefaults.maxMembersPerChannel = value
        }
        if let value = try source.integer(.maxMembersPerSuperChannel, in: memberRange) {
            settings.applicationDefaults.maxMembersPerSuperChannel = value
        }
        if let (value, origin) = source.string(.logLevel) {
            guard let level = Logger.Level(rawValue: value.lowercased()) else {
                throw SettingsError("\(origin): '\(value)' is no log level (trace, debug, info, notice, warning, error, critical)")
            }
            settings.logLevel = level
        }
        if let (value, origin) = source.string(.logFormat) {
            guard let format = LogFormat(rawValue: value.lowercased()) else {
                throw SettingsError("\(origin): '\(value)' is no log format (text or json)")
            }
            settings.logFormat = format
        }
        return settings
    }

    private static func resolveWebhooks(_ source: Source, into hooks: inout HookDefaults) throws(SettingsError) {
        if let (secret, _) = try source.secret(.webhookSecret, file: .webhookSecretFile) { hooks.secret = secret }
        if let value = try source.seconds(.webhookTimeoutSeconds) {
            guard WebhookEndpoint.timeoutRange.contains(value) else {
                throw SettingsError("\(source.string(.webhookTimeoutSeconds)?.1 ?? ""): '\(value)' is not a number of seconds in 0.1...300")
            }
            hooks.timeoutSeconds = value
        }
        let concurrency = WebhookEndpoint.concurrencyRange
        if let value = try source.integer(.webhookConcurrency, in: concurrency.lowerBound...concurrency.upperBound) { hooks.concurrency = value }
        if let value = try source.integer(.webhookMaxAttempts, in: 1...100) { hooks.maxAttempts = value }
        if let value = try source.seconds(.webhookRetryMaxSeconds) { hooks.retryMaxSeconds = value }
        var categories = WebhookCategory.allCases
        if let (value, origin) = source.string(.webhookCategories) {
            switch WebhookEndpoint.parseCategories(value.split(separator: ",").map(String.init)) {
            case .success(let parsed): categories = parsed
            case .failure(let error): throw SettingsError("\(origin): \(error)")
            }
        }
        guard let (value, origin) = source.string(.webhookURLs) else { return }
        for url in value.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !url.isEmpty {
            if let problem = WebhookEndpoint.checkURL(url) { throw SettingsError("\(origin): \(problem)") }
            if hooks.settings.endpoints.contains(where: { $0.url == url }) { throw SettingsError("\(origin): '\(url)' is listed twice") }
            hooks.settings.endpoints.append(WebhookEndpoint(url: url, categories: categories, timeoutSeconds: hooks.timeoutSeconds,
                                                            concurrency: hooks.concurrency))
        }
        if hooks.settings.endpoints.count > WebhookSettings.maxEndpoints {
            throw SettingsError("\(origin): more than \(WebhookSettings.maxEndpoints) URLs")
        }
    }

    /// The push gateway and the translator (OutgoingCalls/Push.swift, Translation.swift).
    private static func resolveOutgoingServices(_ source: Source, into hooks: inout HookDefaults) throws(SettingsError) {
        func url(_ key: SettingKey) throws(SettingsError) -> String? {
            guard let (value, origin) = source.string(key) else { return nil }
            let trimmed = value.trimmingCharacters(in: .whitespaces)
            if let problem = WebhookEndpoint.checkURL(trimmed) { throw SettingsError("\(origin): \(problem)") }
            return trimmed
        }
        func timeout(_ key: SettingKey) throws(SettingsError) -> Double? {
            guard let value = try source.seconds(key) else { return nil }
            guard WebhookEndpoint.timeoutRange.contains(value) else {
                throw SettingsError("\(source.string(key)?.1 ?? ""): '\(value)' is not a number of seconds in 0.1...300")
            }
            return value
        }
        let concurrency = WebhookEndpoint.concurrencyRange.lowerBound...WebhookEndpoint.concurrencyRange.upperBound
        hooks.push.url = try url(.pushGatewayURL)
        if let value = try timeout(.pushGatewayTimeoutSeconds) { hooks.push.timeoutSeconds = value }
        if let value = try source.integer(.pushGatewayConcurrency, in: concurrency) { hooks.push.concurrency = value }
        if let (value, _) = source.string(.pushTitleTemplate) { hooks.push.titleTemplate = value }
        if let (value, _) = source.string(.pushBodyTemplate) { hooks.push.bodyTemplate = value }
        hooks.translator.url = try url(.translatorURL)
        if let value = try timeout(.translatorTimeoutSeconds) { hooks.translator.timeoutSeconds = value }
        if let value = try source.integer(.translatorConcurrency, in: concurrency) { hooks.translator.concurrency = value }
        if let push = hooks.push.url, push == hooks.translator.url {
            throw SettingsError("push_gateway_url and translator_url are the same URL ('\(push)'); give each its own")
        }
    }

    /// Where one key's value is looked up, in order.
    private struct Source {
        let commandLine: [String: String]
        let environment: [String: String]
        let file: [String: ConfigValue]
        let filePath: String

        /// The value as text, and a phrase naming where it came from. An empty environment
        /// variable counts as not set (`PARLEY_PORT=` in a script).
        func string(_ key: SettingKey) -> (String, String)? {
            if let value = commandLine[key.name] { return (value, key.flag) }
            if let value = environment[key.environment], !value.isEmpty { return (value, key.environment) }
            if let value = file[key.name] { return (value.text, "\(filePath): \"\(key.name)\"") }
            return nil
        }

        func integer(_ key: SettingKey, in range: ClosedRange<Int>) throws(SettingsError) -> Int? {
            guard let (text, origin) = string(key) else { return nil }
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
                throw SettingsError("\(origin): '\(text)' is not a whole number in \(range.lowerBound)...\(range.upperBound)")
            }
            return value
        }

        func seconds(_ key: SettingKey, allowingZero: Bool = false) throws(SettingsError) -> Double? {
            guard let (text, origin) = string(key) else { return nil }
            guard let value = Double(text.trimmingCharacters(in: .whitespaces)), value.isFinite,
                  allowingZero ? value >= 0 : value > 0, value <= 86_400
            else {
                throw SettingsError("\(origin): '\(text)' is not a number of seconds \(allowingZero ? "from 0" : "above 0") (at most 86400)")
            }
            return value
        }

        /// A secret given directly, or read from the file that `fileKey` names (its content
        /// without the final line break). Both at the same level is a mistake.
        func secret(_ key: SettingKey, file fileKey: SettingKey) throws(SettingsError) -> (String, String)? {
            let direct = string(key)
            let named = string(fileKey)
            let level = { (origin: String?) -> Int in
                guard let origin else { return 3 }
                return origin.hasPrefix("--") ? 0 : origin.hasPrefix("PARLEY_") ? 1 : 2
            }
            if let direct, let named, level(direct.1) == level(named.1) {
                throw SettingsError("\(direct.1) and \(named.1) are both given; give one of them")
            }
            if let named, level(named.1) < level(direct?.1) {
                let (path, origin) = named
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw SettingsError("\(origin): cannot read '\(path)'")
                }
                guard var text = String(data: data, encoding: .utf8) else {
                    throw SettingsError("\(origin): '\(path)' is not UTF-8 text")
                }
                while text.last == "\n" || text.last == "\r" { text.removeLast() }
                if text.isEmpty { throw SettingsError("\(origin): '\(path)' is empty") }
                return (text, "\(origin) ('\(path)')")
            }
            if let direct, direct.0.isEmpty { throw SettingsError("\(direct.1): the value is empty") }
            return direct
        }
    }
}

/// A value of the configuration file (a JSON string or number), as text.
struct ConfigValue {
    let text: String
}

enum ConfigFile {
    /// Reads a JSON object of settings. Unknown keys and values that are neither strings nor
    /// numbers are refused, naming the key, so that a misspelt setting is not silently ignored.
    static func read(_ path: String) throws(SettingsError) -> [String: ConfigValue] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw SettingsError("configuration file '\(path)' cannot be read")
        }
        let parsed: Any
        do { parsed = try JSONSerialization.jsonObject(with: data) } catch {
            throw SettingsError("configuration file '\(path)' is not valid JSON: \(error.localizedDescription)")
        }
        guard let object = parsed as? [String: Any] else {
            throw SettingsError("configuration file '\(path)' must hold a JSON object of settings")
        }
        let known = Set(SettingKey.all.map(\.name))
        var values: [String: ConfigValue] = [:]
        for (key, value) in object {
            guard known.contains(key) else {
                throw SettingsError(
                    "\(path): unknown key \"\(key)\" (known: \(SettingKey.all.map(\.name).joined(separator: ", ")))")
            }
            switch value {
            case let text as String:
                values[key] = ConfigValue(text: text)
            case let number as NSNumber:
                // JSON's true and false come back as NSNumbers of type "c" (char); `is Bool`
                // cannot tell them from 0 and 1.
                if String(cString: number.objCType) == "c" {
                    throw SettingsError("\(path): \"\(key)\" must be a string or a number, not true or false")
                }
                values[key] = ConfigValue(text: number.stringValue)
            default:
                throw SettingsError("\(path): \"\(key)\" must be a string or a number")
            }
        }
        return values
    }
}
