// The router's middleware (docs/SERVER.md "Logs" and "Metrics"): every route, and the
// not-found answer, run inside RequestObservation (request id, metrics, access log) and,
// within it, ErrorResponses (what is thrown becomes the protocol's JSON error). Routes.router
// adds them; the order is theirs.
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The context of every request: Hummingbird's own storage, the connection's peer, and the
/// record the access log and the metrics read once the response head is ready.
struct ParleyRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let record: RequestRecord
    /// The address the connection comes from (nil for a Unix socket).
    let peerAddress: IPAddress?
    /// The connection the request came on.
    let connection: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        record = RequestRecord()
        connection = source.channel
        peerAddress = source.channel.remoteAddress?.ipAddress.flatMap { IPAddress($0) }
    }
}

/// Outermost: gives the request its id (kept from `X-Request-Id` when sane), returns it in the
/// response, counts the request by method, route template and status, and writes its
/// access-log line at info. For an event stream that is once the stream's head is ready.
struct RequestObservation: RouterMiddleware {
    typealias Context = ParleyRequestContext
    let logger: Logger
    let trustedProxies: TrustedProxies

    static let requestIdHeader = HTTPField.Name("X-Request-Id")!
    static let forwardedForHeader = HTTPField.Name("X-Forwarded-For")!

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        let record = context.record
        record.requestId = RequestRecord.requestId(given: request.headers[Self.requestIdHeader])
        var response: Response
        do {
            response = try await next(request, context)
        } catch {
            // ErrorResponses answers everything; this is for a failure of the middleware chain itself.
            logger.error("request failed", metadata: ["request_id": .string(record.requestId), "error": .string("\(error)")])
            response = ParleyResponder.json(APIError.internal("\(error)").json, status: 500)
        }
        response.headers[Self.requestIdHeader] = record.requestId
        let method = Routes.servedMethods.contains(request.method) ? request.method.rawValue : "OTHER"
        let elapsed = started.duration(to: .now)
        ServerMetrics.shared.requestAnswered(method: method, route: record.route, status: response.status.code, duration: elapsed)
        if logger.logLevel <= .info {
            let client = trustedProxies.clientAddress(peer: context.peerAddress,
                                                      forwardedFor: request.headers[values: Self.forwardedForHeader])
            let parts = elapsed.components
            let micros = parts.seconds * 1_000_000 + parts.attoseconds / 1_000_000_000_000
            logger.info("request", metadata: [
                "request_id": .string(record.requestId),
                // The method as sent: Routes.routable hands others on as `otherMethod`.
                "method": .string(record.method ?? request.method.rawValue),
                "route": .string(record.route),
                "status": .stringConvertible(response.status.code),
                "duration_ms": .stringConvertible(Double(micros) / 1000),
                "caller": .string(record.caller),
                "client": .string(client?.description ?? "-"),
            ])
        }
        return response
    }
}

/// Inside RequestObservation: an APIError becomes its JSON answer, an unreachable database a
/// 503 with Retry-After (PROTOCOL.md §1), anything else a 500; 5xx answers are logged with the
/// request id.
struct ErrorResponses: RouterMiddleware {
    typealias Context = ParleyRequestContext
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let requestId = context.record.requestId
        do {
            return try await next(request, context)
        } catch let error as APIError {
            if error.status >= 500 {
                logger.error("request failed", metadata: ["request_id": .string(requestId), "error": .string(error.message)])
            }
            return ParleyResponder.json(error.json, status: error.status)
        } catch let error as StorageError where error.kind == .unavailable {
            // A write that failed at its commit may or may not have been stored; a send retried
            // with its `req_id` is stored once either way.
            logger.warning("database unavailable", metadata: ["request_id": .string(requestId), "error": .string(error.description)])
            var response = ParleyResponder.json(APIError.unavailable(error.description).json, status: 503)
            response.headers[.retryAfter] = String(ParleyResponder.retryAfterSeconds)
            return response
        } catch {
            logger.error("request failed", metadata: ["request_id": .string(requestId), "error": .string("\(error)")])
            return ParleyResponder.json(APIError.internal("\(error)").json, status: 500)
        }
    }
}
