/// One HTTP header line. Response header names are lower-cased; request header names
/// are sent as given.
public struct HTTPHeader: Sendable, Equatable, Hashable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// Reports how much of a request's body has been sent: `sentBytes` of `totalBytes`.
public typealias HTTPUploadProgress = @Sendable (_ sentBytes: Int64, _ totalBytes: Int64) -> Void

/// A request handed to `HTTPClient`. The body is sent exactly as given, with the headers
/// given: the client adds no `Content-Type` and no `Expect: 100-continue`.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [HTTPHeader]
    public var body: [UInt8]?
    /// A `multipart/form-data` body instead of `body` (a request with both fails with
    /// `.invalidArgument`). The client sets `Content-Type: multipart/form-data; boundary=…`
    /// and `Content-Length`; a caller's own `Content-Type` header is refused. Parts are
    /// laid out as `HTTPBodyPart` describes.
    public var multipart: [HTTPBodyPart]?
    /// Called on the network thread while the body goes out, with the bytes sent so far and
    /// the body's total size: at most once per 50 ms or per further 1 % of the body,
    /// `sentBytes` never decreasing. When the whole body was sent, the last call has
    /// `sentBytes == totalBytes` and comes before the completion. Not called for requests
    /// without a body. It must not block: it runs inside the transfer loop.
    public var uploadProgress: HTTPUploadProgress?
    /// Whole-transfer limit in milliseconds (queueing, connecting, sending, receiving); 0 = none.
    public var timeoutMs: Int
    /// Limit for establishing the connection, TLS handshake included; 0 = curl's default (300 s).
    public var connectTimeoutMs: Int
    /// For long-lived streams: abort with `.timeout` when no byte at all arrives (nor, while
    /// a body is being sent, leaves) for this many seconds; 0 = off. (An idle watchdog
    /// rather than curl's LOW_SPEED option, whose moving-average speed does not notice a
    /// dead stream that carried a few bytes shortly before, nor sparse heartbeats.)
    public var lowSpeedTimeoutSec: Int
    /// A refused connection is tried again (after 50-500 ms, growing, with jitter) until
    /// `connectTimeoutMs` has passed since the first try, instead of failing at once: for a
    /// request that has nothing else to fall back on while a server restarts. Nothing was
    /// sent on a refused connection, so any method may be tried again.
    public var retriesRefusedConnect = false

    public init(
        method: String = "GET",
        url: String,
        headers: [HTTPHeader] = [],
        body: [UInt8]? = nil,
        timeoutMs: Int = 30_000,
        connectTimeoutMs: Int = 10_000,
        lowSpeedTimeoutSec: Int = 0,
        multipart: [HTTPBodyPart]? = nil,
        uploadProgress: HTTPUploadProgress? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
        self.connectTimeoutMs = connectTimeoutMs
        self.lowSpeedTimeoutSec = lowSpeedTimeoutSec
        self.multipart = multipart
        self.uploadProgress = uploadProgress
    }
}

/// A received answer. Any HTTP status is a response; transport failures are `ParleyError`s.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    /// Headers of the final response in arrival order, names lower-cased.
    public var headers: [HTTPHeader]
    /// The body as decoded by curl (content-encoding removed). Empty for streamed transfers,
    /// whose bytes went to `onData`.
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the first header with this name (case-insensitive), if any.
    public func header(_ name: String) -> String? {
        let wanted = asciiLowercased(name)
        return headers.first { $0.name == wanted }?.value
    }

    /// The body decoded as UTF-8 (invalid sequences replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

public struct HTTPClientConfiguration: Sendable {
    public var userAgent: String
    /// Verify the server's certificate chain and host name. Turn off only for tests.
    public var verifyTLS: Bool
    /// A PEM bundle of trusted CAs instead of the system's.
    public var caFile: String?
    /// Upper bound of open connections across all hosts; 0 = no limit.
    public var maxConnections: Int
    /// Largest body a buffered (`send`) response may have; beyond it the transfer fails
    /// with `.limitExceeded`. Streams are not bounded by it: their bytes are not kept.
    public var maxResponseBytes: Int
    /// nil: curl's default (the `http_proxy`/`https_proxy`/`no_proxy` environment);
    /// "": no proxy at all; otherwise the proxy URL.
    public var proxy: String?

    public init(
        userAgent: String = "parley/0.1",
        verifyTLS: Bool = true,
        caFile: String? = nil,
        maxConnections: Int = 16,
        maxResponseBytes: Int = 64 * 1024 * 1024,
        proxy: String? = nil
    ) {
        self.userAgent = userAgent
        self.verifyTLS = verifyTLS
        self.caFile = caFile
        self.maxConnections = maxConnections
        self.maxResponseBytes = maxResponseBytes
        self.proxy = proxy
    }
}

func asciiLowercased(_ text: String) -> String {
    var bytes = Array(text.utf8)
    for index in bytes.indices where bytes[index] >= 0x41 && bytes[index] <= 0x5A {
        bytes[index] += 0x20
    }
    return String(decoding: bytes, as: UTF8.self)
}
