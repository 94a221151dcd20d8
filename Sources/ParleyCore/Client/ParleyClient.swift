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
    let http: HTTPClient
    let endpoint: APIEndpoint
    let operations = PendingOperations()
    /// What the blocks of an operation hold to send its request (not the client itself).
    let transport: OperationTransport
    /// The Sync layer, through the calls the facade may make (Sync/ClientEngine.swift).
    let engine: any ClientEngine
    private let logSink = LogSink(level: .off, handler: nil)
    /// The application's connection and event handlers, keyed by identifier (set any time, from any thread).
    let appHandlers = AppHandlers()
    /// Collections created from this client, disposed when it closes.
    let collections = CollectionRegistry()
    private let closed = Atomic<Bool>(false)

    public init(configuration: ClientConfiguration) throws(ParleyError) {
        try configuration.validate()
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
        logSink.state.withLock { $0.level = configuration.logLevel }
        endpoint = APIEndpoint(
            serverURL: configuration.serverURL, timeoutMs: configuration.requestTimeoutMs,
            connectTimeoutMs: configuration.connectTimeoutMs)
        let logSink = self.logSink
        let dispatcher = self.dispatcher
        let handlers = self.appHandlers
        let engine = Engine(
            configuration: configuration,
            services: EngineServices(
                http: http, endpoint: endpoint,
                log: { level, message in ParleyClient.log(level, message, sink: logSink, dispatcher: dispatcher) },
                connectionEvent: { event, error in
                    guard !handlers.connection.isEmpty else { return }
                    dispatcher.enqueue { handlers.connection.forEach { $0(event, error) } }
                }))
        self.engine = engine
        transport = OperationTransport(
            http: http, endpoint: endpoint, operations: operations,
            uploadStallLimitSec: max(30, configuration.requestTimeoutMs / 1000), logSink: logSink, dispatcher: dispatcher)
        let reporter = AppEventReporter(handlers: appHandlers, dispatcher: dispatcher)
        engine.queue.sync { _ = engine.subscribe(reporter.report) }
    }

    deinit { close() }

    public var isClosed: Bool { closed.load(ordering: .acquiring) }

    // MARK: Logging

    /// Sets (or with nil, removes) the log handler and the most verbose level it receives.
    public func setLogHandler(level: LogLevel, _ handler: LogHandler?) {
        logSink.state.withLock { $0 = LogSink.State(level: handler == nil ? .off : level, handler: handler) }
    }

    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        Self.log(level, message(), sink: logSink, dispatcher: dispatcher)
    }

    /// The log handler and its level, shared with the engine.
    final class LogSink: Sendable {
        /// A struct, not a tuple: see `Locked` on closures in its value.
        struct State {
            var level: LogLevel
            var handler: LogHandler?
        }

        let state: Locked<State>
        init(level: LogLevel, handler: LogHandler?) { state = Locked(State(level: level, handler: handler)) }
    }

    fileprivate static func log(_ level: LogLevel, _ message: @autoclosure () -> String, sink: LogSink, dispatcher: CallbackDispatcher) {
        guard level != .off else { return }
        let handler: LogHandler? = sink.state.withLock { sink in level <= sink.level ? sink.handler : nil }
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
    /// It authenticates with the configured `api_token` if there is one, else with the
    /// connected user's session. Returns an operation id for `cancel`. The completion
    /// runs exactly once, on the callback context: with the answer, with the error, or
    /// with `.cancelled`.
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
        let credential: APIEndpoint.Credential? = configuration.apiToken.map(APIEndpoint.Credential.apiToken)
        let engine = self.engine
        let transport = self.transport
        return try startOperation(completion) { id, finish in
            engine.queue.async {
                let auth = credential ?? engine.sessionCredential
                transport.send(operation: id, method: method, pathAndQuery: path, body: body, credential: auth, finish: finish)
            }
        }
    }

    /// Registers an operation whose completion runs exactly once on the callback context,
    /// then lets `start` begin the work. `finish` delivers the outcome (ignored when the
    /// operation was cancelled meanwhile).
    func startOperation(
        _ completion: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void,
        start: (_ id: UInt64, _ finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void) throws(ParleyError) -> Void
    ) throws(ParleyError) -> UInt64 {
        guard configuration.serverURL != nil else {
            throw .invalidState("no server_url in the client configuration")
        }
        let dispatcher = self.dispatcher
        let operations = self.operations
        let id = try operations.begin {
            dispatcher.enqueue { completion(.failure(.cancelled())) }
        }
        let finish: @Sendable (Result<JSONValue, ParleyError>) -> Void = { outcome in
            guard operations.finish(id) else { return }
            dispatcher.enqueue { completion(outcome) }
        }
        do {
            try start(id, finish)
        } catch {
            _ = operations.finish(id)
            throw error
        }
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
        let engine = self.engine
        let stream = engine.runNow { engine.abandonSession() }
        stream?.stop()
        collections.disposeAll()
        operations.cancelAll()
        http.shutdown()
        dispatcher.close()
        engine.runNow { engine.closeCache() }
        // None of them runs again; dropped, so that one holding the client frees it.
        appHandlers.removeAll()
    }
}

/// What an operation's HTTP exchange needs of the client. The blocks an operation queues on
/// the engine queue hold this instead of the client: were they to hold the client, an
/// application dropping its last reference meanwhile would have the client freed, and so
/// closed, on the engine queue, where `close()` waits for callbacks that may themselves
/// wait for that queue.
struct OperationTransport: Sendable {
    let http: HTTPClient
    let endpoint: APIEndpoint
    let operations: PendingOperations
    let uploadStallLimitSec: Int
    let logSink: ParleyClient.LogSink
    let dispatcher: CallbackDispatcher

    private func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        ParleyClient.log(level, message(), sink: logSink, dispatcher: dispatcher)
    }

    /// Sends one HTTP exchange for an operation and hands the decoded answer to `finish`
    /// (on the network thread). Cancelling the operation aborts the transfer.
    func send(
        operation id: UInt64, method: String, pathAndQuery: String, body: JSONValue?, credential: APIEndpoint.Credential?,
        multipart: [HTTPBodyPart]? = nil, retriesRefusedConnect: Bool = false,
        finish: @escaping @Sendable (Result<JSONValue, ParleyError>) -> Void
    ) {
        guard var request = endpoint.request(method: method, pathAndQuery: pathAndQuery, body: multipart == nil ? body : nil,
                                             credential: credential) else {
            finish(.failure(.invalidState("no server_url in the client configuration")))
            return
        }
        if let multipart {
            request.multipart = multipart
            // An upload may take long: no whole-transfer limit, a stall limit instead (as for file messages).
            request.timeoutMs = 0
            request.lowSpeedTimeoutSec = uploadStallLimitSec
        }
        request.retriesRefusedConnect = retriesRefusedConnect
        log(.debug, "operation #\(id): \(method) \(pathAndQuery)")
        // `self` is this value, not the client.
        let task = http.send(request) { [self] result in
            let outcome = result.flatMap(APIEndpoint.decodeAnswer)
            if case .failure(let error) = outcome { log(.info, "operation #\(id) failed: \(error)") }
            finish(outcome)
        }
        operations.setAbort(id) { task.cancel() }
    }
}
