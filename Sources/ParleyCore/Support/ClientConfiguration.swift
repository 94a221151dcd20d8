/// Log verbosity. Raw values are the ABI's `PARLEY_LOG_*`: a handler set at level N
/// receives records of level 1...N.
public enum LogLevel: Int32, Sendable, Comparable, CaseIterable {
    case off = 0, error = 1, warning = 2, info = 3, debug = 4, trace = 5

    public var name: String {
        switch self {
        case .off: "off"
        case .error: "error"
        case .warning: "warning"
        case .info: "info"
        case .debug: "debug"
        case .trace: "trace"
        }
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Everything a client is created with. Built from a JSON document so that the C ABI can
/// grow without breaking: unknown keys are refused (a typo must not pass silently).
public struct ClientConfiguration: Sendable, Equatable {
    /// Base URL of the server, e.g. `http://127.0.0.1:8080`. Required for network calls.
    public var serverURL: String?
    public var callbackMode: CallbackMode = .thread
    public var logLevel: LogLevel = .warning
    public var requestTimeoutMs = 30_000
    public var connectTimeoutMs = 10_000
    public var verifyTLS = true
    public var caFile: String?
    /// Admin credential sent as `Api-Token` on raw requests (tools and tests; apps use sessions).
    public var apiToken: String?
    public var userAgent = "parley/\(ParleyVersion.string)"
    /// Where the per-user cache lives: a file under `cacheDirectory`, or memory only.
    public var cacheMode: CacheMode = .persistent
    /// Directory of the cache files; nil = `$XDG_CACHE_HOME/parley`, else `$HOME/.cache/parley`.
    public var cacheDirectory: String?
    /// The cache's size limit; eviction keeps it below (minimum 64 MiB).
    public var cacheSizeLimitBytes: Int64 = 256 << 20
    /// Encrypts the cache file at rest (nil: a plain file). See `CacheSecret`.
    public var cacheSecret: CacheSecret?
    /// What happens to a message whose send failed (see `ResendPolicy`).
    public var resendPolicy: ResendPolicy = .automatic
    /// With `.automatic`: how many times a message is resent after its first failure before
    /// it is kept as failed (nil: no limit).
    public var resendRetryLimit: Int?
    /// The most failed messages kept per channel: past it the oldest are removed (reported
    /// as canceled). nil: no limit.
    public var maxFailedMessagesPerChannel: Int?
    /// The older switch: true is `.automatic`, false `.manual`.
    public var autoResend: Bool {
        get { resendPolicy == .automatic }
        set { resendPolicy = newValue ? .automatic : .manual }
    }
    /// Reconnection backoff of the event stream.
    public var reconnectPolicy = ReconnectPolicy()

    public enum CacheMode: String, Sendable, Equatable {
        case persistent, memory
    }

    /// What the outbox does with a message whose send failed. A failure is either the
    /// connection's (network, timeout, 5xx, 408, 429: a resend can fix it) or a refusal
    /// (any other answer of the server: the same request gets the same answer).
    public enum ResendPolicy: String, Sendable, Equatable, CaseIterable {
        /// A failed message is dropped at once (local copy and outbox row), whatever the failure.
        case none
        /// A failed message is kept until the application resends or removes it.
        case manual
        /// A message failed for the connection's reasons is resent by itself (on reconnect,
        /// on the next connect, and when another send drains the channel), up to
        /// `resendRetryLimit` times; then, like a refused one, it is kept as failed.
        case automatic
    }

    public init() {}

    /// One key of the configuration document, as `parley_configuration_keys` lists it.
    public struct Key: Sendable {
        public let name: String
        /// "string", "integer" or "boolean".
        public let type: String
        /// The value used when the key is left out; `.null` when there is none (`summary` says
        /// what happens then).
        public let defaultValue: JSONValue
        /// The values accepted: a range ("1..3600000") or the choices (`"thread" or "manual"`);
        /// empty when any value of the type is.
        public let values: String
        public let summary: String

        init(_ name: String, _ type: String, _ defaultValue: JSONValue, _ values: String = "", _ summary: String) {
            self.name = name
            self.type = type
            self.defaultValue = defaultValue
            self.values = values
            self.summary = summary
        }
    }

    /// Every key `init(json:)` reads, in the order docs/C-REFERENCE.md lists them.
    /// ClientConfigurationTests checks the table against the parser: defaults, types, ranges and choices.
    public static let keys: [Key] = [
        Key("server_url", "string", nil, "an http:// or https:// URL", "base URL of the server; required for network calls"),
        Key("dispatch_mode", "string", "thread", #""thread" or "manual""#,
            "where callbacks run: the process-wide callback pool, or the application's thread through parley_client_dispatch or a dispatch group"),
        Key("log_level", "string", "warning", #""off", "error", "warning", "info", "debug" or "trace""#,
            "the most verbose log records kept (parley_client_set_log_callback sets it again)"),
        Key("request_timeout_ms", "integer", 30_000, "1..3600000", "time limit of one request"),
        Key("connect_timeout_ms", "integer", 10_000, "1..600000", "time limit of establishing a connection"),
        Key("tls_verify", "boolean", true, "", "verify the server's certificate and host name"),
        Key("ca_file", "string", nil, "a path", "a PEM file of the certificate authorities to trust instead of the system's"),
        Key("api_token", "string", nil, "", "admin token sent as Api-Token with parley_client_request (tools and tests; applications use sessions)"),
        Key("user_agent", "string", .string("parley/\(ParleyVersion.string)"), "", "the User-Agent header"),
        Key("cache_mode", "string", "persistent", #""persistent" or "memory""#,
            "a SQLite file per user and server (<cache_dir>/<server>/<user_id>.sqlite, mode 0600), or memory only"),
        Key("cache_dir", "string", nil, "a non-empty path", "directory of the cache files; without it $XDG_CACHE_HOME/parley, else $HOME/.cache/parley"),
        Key("cache_size_limit_mb", "integer", 256, "64..1048576", "size limit of the cache file: whole channels are evicted beyond it"),
        Key("cache_key", "string", nil, "64 hexadecimal digits",
            "encrypts the cache at rest with this 32-byte key (XChaCha20-Poly1305); a plain cache is encrypted when opened. Not with cache_passphrase"),
        Key("cache_passphrase", "string", nil, "non-empty text",
            "encrypts the cache at rest with a key derived from this passphrase (Argon2id, its salt and limits kept in the file). Not with cache_key"),
        Key("cache_passphrase_iterations", "integer", .int(Int64(CacheSecret.defaultPassphraseIterations)), "1..100",
            "Argon2id's passes for a cache file the passphrase encrypts (an existing file keeps its own)"),
        Key("cache_passphrase_memory_mb", "integer", .int(Int64(CacheSecret.defaultPassphraseMemoryBytes >> 20)), "8..4096",
            "Argon2id's memory for a cache file the passphrase encrypts (an existing file keeps its own)"),
        Key("resend_policy", "string", "automatic", #""none", "manual" or "automatic""#,
            "what a failed send becomes: none drops it at once; manual keeps it as failed until resent or removed; automatic also resends it by itself after a connection failure, up to resend_retry_count times"),
        Key("auto_resend", "boolean", true, "", "the older switch: true is resend_policy \"automatic\", false \"manual\" (given with it, it must agree)"),
        Key("resend_retry_count", "integer", -1, "-1..1000000", "automatic resends of a message before it is kept as failed; -1: no limit"),
        Key("max_failed_messages_per_channel", "integer", -1, "-1..1000000 except 0",
            "failed messages kept per channel, beyond it the oldest are removed (message_canceled); -1: no limit"),
        Key("reconnect_initial_delay_ms", "integer", 500, "0..600000", "first wait before reconnecting the event stream (doubling, with jitter)"),
        Key("reconnect_max_delay_ms", "integer", 30_000, "0..3600000, at least reconnect_initial_delay_ms",
            "longest wait between reconnection attempts"),
        Key("reconnect_max_attempts", "integer", 0, "0..1000000", "reconnection attempts before the stream gives up; 0: never"),
        Key("stream_idle_timeout_s", "integer", 45, "0..3600",
            "reconnect when nothing (not even a heartbeat) arrived for this long; 0: no watchdog"),
    ]

    public static let documentKeys: Set<String> = Set(keys.map(\.name))

    /// Parses a configuration document. An empty string or `{}` gives the defaults.
    public init(json text: String) throws(ParleyError) {
        self.init()
        let trimmed = text.drop { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }
        if trimmed.isEmpty { return }
        let document = try JSONValue.parse(text)
        let reader = try JSONReader(document, path: "config")
        try reader.rejectUnknownKeys(allowed: Self.documentKeys)
        if let url = try reader.optionalString("server_url") {
            guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
                throw .invalidArgument("config.server_url: expected an http:// or https:// URL, got '\(url)'")
            }
            serverURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        if let mode = try reader.optionalString("dispatch_mode") {
            guard let parsed = CallbackMode(rawValue: mode) else {
                throw .invalidArgument("config.dispatch_mode: expected \"thread\" or \"manual\", got '\(mode)'")
            }
            callbackMode = parsed
        }
        if let level = try reader.optionalString("log_level") {
            guard let parsed = LogLevel.allCases.first(where: { $0.name == level || (level == "warn" && $0 == .warning) }) else {
                throw .invalidArgument("config.log_level: expected one of off, error, warning, info, debug, trace; got '\(level)'")
            }
            logLevel = parsed
        }
        if let value = try reader.optionalInt("request_timeout_ms", in: 1...3_600_000) { requestTimeoutMs = Int(value) }
        if let value = try reader.optionalInt("connect_timeout_ms", in: 1...600_000) { connectTimeoutMs = Int(value) }
        if let value = try reader.optionalBool("tls_verify") { verifyTLS = value }
        caFile = try reader.optionalString("ca_file")
        apiToken = try reader.optionalString("api_token")
        if let agent = try reader.optionalString("user_agent") { userAgent = agent }
        if let mode = try reader.optionalString("cache_mode") {
            guard let parsed = CacheMode(rawValue: mode) else {
                throw .invalidArgument("config.cache_mode: expected \"persistent\" or \"memory\", got '\(mode)'")
            }
            cacheMode = parsed
        }
        if let directory = try reader.optionalString("cache_dir") {
            guard !directory.isEmpty else { throw .invalidArgument("config.cache_dir: must not be empty") }
            cacheDirectory = directory
        }
        if let megabytes = try reader.optionalInt("cache_size_limit_mb", in: 64...1_048_576) {
            cacheSizeLimitBytes = megabytes << 20
        }
        cacheSecret = try Self.cacheSecret(reader)
        if let value = try reader.optionalBool("auto_resend") { autoResend = value }
        if let name = try reader.optionalString("resend_policy") {
            guard let policy = ResendPolicy(rawValue: name) else {
                throw .invalidArgument("config.resend_policy: expected \"none\", \"manual\" or \"automatic\", got '\(name)'")
            }
            if let legacy = try reader.optionalBool("auto_resend"), legacy != (policy == .automatic) {
                throw .invalidArgument(
                    "config.auto_resend: \(legacy) contradicts resend_policy \"\(name)\" (auto_resend true is \"automatic\", false is \"manual\"); give one of them")
            }
            resendPolicy = policy
        }
        if let value = try reader.optionalInt("resend_retry_count", in: -1...1_000_000) { resendRetryLimit = value < 0 ? nil : Int(value) }
        if let value = try reader.optionalInt("max_failed_messages_per_channel", in: -1...1_000_000) {
            guard value != 0 else {
                throw .invalidArgument("config.max_failed_messages_per_channel: must be at least 1, or -1 for no limit")
            }
            maxFailedMessagesPerChannel = value < 0 ? nil : Int(value)
        }
        if let value = try reader.optionalInt("reconnect_initial_delay_ms", in: 0...600_000) {
            reconnectPolicy.initialDelayMs = Int(value)
            reconnectPolicy.maxDelayMs = max(reconnectPolicy.maxDelayMs, Int(value))
        }
        if let value = try reader.optionalInt("reconnect_max_delay_ms", in: 0...3_600_000) {
            guard Int(value) >= reconnectPolicy.initialDelayMs else {
                throw .invalidArgument("config.reconnect_max_delay_ms: must be at least reconnect_initial_delay_ms (\(reconnectPolicy.initialDelayMs))")
            }
            reconnectPolicy.maxDelayMs = Int(value)
        }
        if let value = try reader.optionalInt("reconnect_max_attempts", in: 0...1_000_000) { reconnectPolicy.maxAttempts = Int(value) }
        if let value = try reader.optionalInt("stream_idle_timeout_s", in: 0...3600) { reconnectPolicy.idleTimeoutSec = Int(value) }
        try validate()
    }

    /// `cache_key` or `cache_passphrase` (with its limits), or nil.
    static func cacheSecret(_ reader: JSONReader) throws(ParleyError) -> CacheSecret? {
        let keyHex = try reader.optionalString("cache_key")
        let passphrase = try reader.optionalString("cache_passphrase")
        let iterations = try reader.optionalInt(
            "cache_passphrase_iterations", in: Int64(CacheSecret.iterationRange.lowerBound)...Int64(CacheSecret.iterationRange.upperBound))
        let memoryMB = try reader.optionalInt(
            "cache_passphrase_memory_mb", in: Int64(CacheSecret.memoryRange.lowerBound >> 20)...Int64(CacheSecret.memoryRange.upperBound >> 20))
        if keyHex != nil && passphrase != nil {
            throw .invalidArgument("config.cache_key and config.cache_passphrase: give one of them")
        }
        if let keyHex { return try CacheSecret(keyHex: keyHex) }
        guard let passphrase else { return nil }
        return try CacheSecret(
            passphrase: passphrase, iterations: iterations.map { UInt64($0) } ?? CacheSecret.defaultPassphraseIterations,
            memoryBytes: memoryMB.map { UInt64($0) << 20 } ?? CacheSecret.defaultPassphraseMemoryBytes)
    }

    /// Refuses values that would change the requests they go into: a control character in
    /// a value that becomes a header (CR/LF would add headers of the caller's choosing) or
    /// in the server URL, and spaces in the URL.
    public func validate() throws(ParleyError) {
        func hasControl(_ text: String) -> Bool { text.utf8.contains { $0 < 0x20 || $0 == 0x7F } }
        if hasControl(userAgent) { throw .invalidArgument("config.user_agent: must not contain control characters (CR, LF, ...)") }
        if let apiToken, hasControl(apiToken) { throw .invalidArgument("config.api_token: must not contain control characters") }
        if let serverURL, hasControl(serverURL) || serverURL.utf8.contains(0x20) {
            throw .invalidArgument("config.server_url: must not contain spaces or control characters")
        }
    }
}

public enum ParleyVersion {
    public static let major = 0
    public static let minor = 1
    public static let patch = 0
    public static let string = "\(major).\(minor).\(patch)"
}
