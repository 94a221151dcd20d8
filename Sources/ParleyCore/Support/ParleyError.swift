/// Status codes shared by the Swift API and the C ABI (`PARLEY_E_*` in parley.h).
/// The raw values are part of the ABI: never renumber, only append.
public enum ParleyErrorCode: Int32, Sendable, CaseIterable {
    case invalidArgument = -1
    case invalidHandle = -2
    case invalidJSON = -3
    case noMemory = -4
    /// The object is in the wrong state for the call (closed, disposed, not connected).
    case invalidState = -5
    case network = -6
    case timeout = -7
    case cancelled = -8
    /// The server answered with an error; see `httpStatus` and `serverCode`.
    case server = -9
    case unauthorized = -10
    case forbidden = -11
    case notFound = -12
    /// The local cache (SQLite) failed.
    case cache = -13
    /// The server's answer did not follow the protocol (malformed JSON, wrong types).
    case protocolViolation = -14
    case tls = -15
    case io = -16
    /// A size, depth or count limit was exceeded.
    case limitExceeded = -17
    /// The cache file is encrypted and the key does not open it, or no key was given.
    case cacheKey = -18
    case internalError = -99

    /// Stable lower-case name, used in messages and by the bindings.
    public var name: String {
        switch self {
        case .invalidArgument: "invalid_argument"
        case .invalidHandle: "invalid_handle"
        case .invalidJSON: "invalid_json"
        case .noMemory: "no_memory"
        case .invalidState: "invalid_state"
        case .network: "network"
        case .timeout: "timeout"
        case .cancelled: "cancelled"
        case .server: "server"
        case .unauthorized: "unauthorized"
        case .forbidden: "forbidden"
        case .notFound: "not_found"
        case .cache: "cache"
        case .protocolViolation: "protocol"
        case .tls: "tls"
        case .io: "io"
        case .limitExceeded: "limit_exceeded"
        case .cacheKey: "cache_key"
        case .internalError: "internal"
        }
    }
}

/// The one error type of the engine. Every failure that reaches the application is one
/// of these: a code to switch on, a human-readable message, and for server answers the
/// HTTP status and the server's own error code.
public struct ParleyError: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: ParleyErrorCode
    public var message: String
    /// HTTP status of the server's answer, 0 when no answer was received.
    public var httpStatus: Int
    /// The server's error code from its JSON error body, 0 when none.
    public var serverCode: Int
    /// How long the server asked to wait before trying again (its `Retry-After`, with a 503
    /// or 429), in milliseconds; 0 when it said nothing.
    public var retryAfterMs: Int = 0

    public init(_ code: ParleyErrorCode, _ message: String, httpStatus: Int = 0, serverCode: Int = 0) {
        self.code = code
        self.message = message
        self.httpStatus = httpStatus
        self.serverCode = serverCode
    }

    public var description: String {
        var text = "\(code.name): \(message)"
        if httpStatus != 0 { text += " (HTTP \(httpStatus)" + (serverCode != 0 ? ", code \(serverCode))" : ")") }
        return text
    }

    public static func invalidArgument(_ message: String) -> ParleyError { ParleyError(.invalidArgument, message) }
    public static func invalidState(_ message: String) -> ParleyError { ParleyError(.invalidState, message) }
    public static func cancelled(_ message: String = "the operation was cancelled") -> ParleyError {
        ParleyError(.cancelled, message)
    }
}

extension ParleyError {
    /// Whether the same call, tried again later, may succeed: the connection's failures
    /// (network, timeout) and the server's own trouble (HTTP 5xx, 408 Request Timeout, 429 Too
    /// Many Requests). Anything else is a refusal: the same request gets the same answer. The
    /// one rule for the outbox's resends, a sync view's offline fetches, the event stream's
    /// reconnections after a refusal, and the C ABI's `parley_error_is_retryable`.
    public var isRetryable: Bool { Self.isRetryable(code: code, httpStatus: httpStatus) }

    /// The server's answer to a send whose `req_id` names a message it stored and that was
    /// deleted since (docs/PROTOCOL.md §3, 410 / 400203).
    var isSentThenDeleted: Bool { httpStatus == 410 && serverCode == 400203 }

    public static func isRetryable(code: ParleyErrorCode, httpStatus: Int) -> Bool {
        switch code {
        case .network, .timeout: true
        case .server: httpStatus >= 500 || httpStatus == 429 || httpStatus == 408
        default: false
        }
    }
}
