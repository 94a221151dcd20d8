import Synchronization

/// One connection to a Parley server and the owner of everything that hangs off it:
/// the callback dispatcher, the network thread, and the operations in flight.
///
/// Every completion and log record reaches the application through `dispatcher`, so the
/// dispatcher's guarantees (serialized, FIFO, no lock held, drained on close) hold for all
/// of them. `close()` cancels what is in flight (each completion then runs once with
/// `.cancelled`), stops the network thread and drains the dispatcher.
public final class ParleyClient: Sendable {
    public typealias LogHandler = @Sendable (LogLevel, String) -> Void

    public let configuration: ClientConfiguration
    public let dispatcher: CallbackDispatcher
    private let http: HTTPClient
    private let operations = PendingOperations()
    private let logSink = Mutex<(level: LogLevel, handler: LogHandler?)>((.off, nil))
    private let closed = Atomic<Bool>(false)

    public init(configuration: ClientConfiguration) throws(ParleyError) {
        self.configuration = configuration
        var httpConfiguration = HTTPClientConfiguration()
        httpConfiguration.userAgent = configuration.userAgent
        httpConfiguration.verifyTLS = configuration.verifyTLS
        httpConfiguration.caFile = configuration.caFile
        http = try HTTPClient(configuration: httpConfiguration)
        do {
            dispatcher = try CallbackDispatcher(mode: configuration.callbackMode)
        } catch {
            http.shutdown()
            throw error
        }
        logSink.withLock { $0.level = configuration.logLevel }
    }

    deinit { close() }

    public var isClosed: Bool { closed.load(ordering: .acquiring) }

    // MARK: Logging

    /// Sets (or with nil, removes) the log handler and the most verbose level it receives.
    public func setLogHandler(level: LogLevel, _ handler: LogHandler?) {
        logSink.withLock { $0 = (handler == nil ? .off : level, handler) }
    }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        guard level != .off else { return }
        let handler: LogHandler? = logSink.withLock { sink in level <= sink.level ? sink.handler : nil }
        guard let handler else { return }
        let text = message()
        dispatcher.enqueue { handler(level, text) }
    }

    // MARK: Operations

    /// Runs `job` on the callback context, after every callback queued before it.
    public func post(_ job: @escaping @Sendable () -> Void) throws(ParleyError) {
        guard !isClosed, dispatcher.enqueue(job) else { throw .invalidState("the client is closed") }
    }

    /// Sends a raw REST request to the server and completes with the parsed JSON answer.
    /// Returns an operation id for `cancel`. The completion runs exactly once, on the
    /// callback context: with the answer, with the error, or with `.cancelled`.
    @discardableResult
    public func request(
        method: String, path: String, body: JSONValue? = nil,
        completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) throws(ParleyError) -> UInt64 {
        let allowedMethods: Set<String> = ["GET", "POST", "PUT", "PATCH", "DELETE"]
        guard allowedMethods.contains(method) else {
            throw .invalidArgument("method: expected one of GET, POST, PUT, PATCH, DELETE; got '\(method)'")
        }
        guard path.hasPrefix("/"), !path.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            throw .invalidArgument("path: expected an absolute path without spaces or control characters, got '\(path)'")
        }
        guard let serverURL = configuration.serverURL else {
            throw .invalidState("no server_url in the client configuration")
        }
        var request = HTTPRequest(method: method, url: serverURL + path)
        request.timeoutMs = configuration.requestTimeoutMs
        request.connectTimeoutMs = configuration.connectTimeoutMs
        request.headers.append(HTTPHeader("Accept", "application/json"))
        if let token = configuration.apiToken { request.headers.append(HTTPHeader("Api-Token", token)) }
        if let body {
            request.headers.append(HTTPHeader("Content-Type", "application/json; charset=utf-8"))
            request.body = Array(body.canonicalText.utf8)
        }

        let dispatcher = self.dispatcher
        let id = try operations.begin {
            dispatcher.enqueue { completion(.failure(.cancelled())) }
        }
        log(.debug, "request #\(id): \(method) \(path)")
        let operations = self.operations
        let task = http.send(request) { [weak self] result in
            guard operations.finish(id) else { return }
            let outcome = result.flatMap(Self.decodeAnswer)
            if case .failure(let error) = outcome { self?.log(.info, "request #\(id) failed: \(error)") }
            dispatcher.enqueue { completion(outcome) }
        }
        operations.setAbort(id) { task.cancel() }
        return id
    }

    /// Cancels an operation still in flight; its completion runs with `.cancelled`.
    /// Returns false when it had already completed (or never existed).
    @discardableResult
    public func cancel(operation id: UInt64) -> Bool { operations.cancel(id) }

    /// Cancels everything in flight, stops the network thread and runs every callback
    /// still queued. No callback of this client runs after it returns. Idempotent.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        operations.cancelAll()
        http.shutdown()
        dispatcher.close()
    }

    /// Maps an HTTP answer to the protocol's result: JSON on 2xx, the error body otherwise.
    static func decodeAnswer(_ response: HTTPResponse) -> Result<JSONValue, ParleyError> {
        let status = response.status
        if (200..<300).contains(status) {
            if response.body.isEmpty { return .success(.object([:])) }
            do {
                return .success(try JSONValue.parse(response.body))
            } catch {
                return .failure(ParleyError(.protocolViolation, "HTTP \(status) answer is not valid JSON: \(error.message)", httpStatus: status))
            }
        }
        let code: ParleyErrorCode = switch status {
        case 401: .unauthorized
        case 403: .forbidden
        case 404: .notFound
        default: .server
        }
        guard let body = try? JSONValue.parse(response.body), let message = body["message"]?.stringValue else {
            return .failure(ParleyError(code, "the server answered HTTP \(status) without a JSON error body", httpStatus: status))
        }
        let serverCode = body["code"]?.int64Value.map { Int(clamping: $0) } ?? 0
        return .failure(ParleyError(code, message, httpStatus: status, serverCode: serverCode))
    }
}
