import HTTPTypes
import Foundation
import Hummingbird
import Logging
import NIOCore

struct Caller: Sendable {
    let isAdmin: Bool
    let userId: String?  // the session user; nil for admin

    /// True for a request with the right Api-Token, false without one; a wrong one is refused.
    /// No database access: an admin request needs no read to be let in.
    static func hasAdminToken(_ headers: HTTPFields, apiToken: String) throws -> Bool {
        guard let token = headers[HTTPField.Name("Api-Token")!] else { return false }
        guard !apiToken.isEmpty, token == apiToken else { throw APIError.unauthorizedApiToken }
        return true
    }
}

/// One request as handlers see it.
struct Ctx {
    let method: String
    /// The matched route's template (Routes.table).
    let route: String
    let params: PathParameters
    let input: Input
    var caller: Caller
    let now: Int64
    let rawBody: [UInt8]
    let contentType: String
    let headers: HTTPFields
    /// What the access log learns (the caller, once authenticated).
    let record: RequestRecord
    /// A multipart body's parts and what was made of them before the write lock (RouteHandler.prepared).
    var prepared: PreparedUpload? = nil

    /// The user a call acts as: the session user (a differing `field` is 403), or for an
    /// admin the `field` parameter (required unless `optional`).
    func actingUser(_ field: String = "user_id", optional: Bool = false) throws -> String? {
        let given = try input.string(field, maxBytes: 80)
        if let me = caller.userId {
            if let given, given != me { throw APIError.forbidden("a session user can only act as themselves (\"\(field)\").") }
            return me
        }
        if given == nil && !optional { throw APIError.missing(field) }
        return given
    }

    /// A path parameter of the route. A route without it is a bug in the table, not bad input.
    func param(_ name: PathParameter) throws -> String {
        guard let value = params[name] else { throw APIError.internal("route \(route) has no \(name.rawValue) parameter.") }
        if value.utf8.contains(0) { throw APIError.invalid(name.rawValue, Input.nulMessage) }
        return value
    }

    /// The `message_id` path parameter: a positive integer, as in a body.
    var messageId: Int64 {
        get throws {
            guard let id = Int64(try param(.messageId)), id > 0 else {
                throw APIError.invalid("message_id", "must be a positive integer.")
            }
            return id
        }
    }

    /// The `poll_id` path parameter: a positive integer.
    var pollId: Int64 {
        get throws {
            guard let id = Int64(try param(.pollId)), id > 0 else { throw APIError.invalid("poll_id", "must be a positive integer.") }
            return id
        }
    }

    /// The `option_id` path parameter: a positive integer.
    var optionId: Int64 {
        get throws {
            guard let id = Int64(try param(.optionId)), id > 0 else { throw APIError.invalid("option_id", "must be a positive integer.") }
            return id
        }
    }

    func requiredActingUser(_ field: String = "user_id") throws -> String {
        guard let u = try actingUser(field) else { throw APIError.missing(field) }
        return u
    }

    func requireAdmin() throws {
        if !caller.isAdmin { throw APIError.forbidden("this endpoint needs the Api-Token.") }
    }

    /// Admins, and users about themselves.
    func mayReadPrivateFields(of userId: String) -> Bool { caller.isAdmin || caller.userId == userId }

    func requireSelfOrAdmin(_ userId: String) throws {
        if !caller.isAdmin && caller.userId != userId { throw APIError.forbidden("a session user can only access their own data.") }
    }
}

enum Reply {
    case json(JSON)
    case file(bytes: [UInt8], contentType: String)
}

typealias Handler = @Sendable (RequestState, inout Ctx) async throws -> Reply

struct ServerConfig: Sendable {
    let apiToken: String
    let uploadLimit: Int
    let heartbeatSeconds: Double
    var maxStreamsPerUser = 20
    /// Nil: /metrics is open to anyone who reaches the port.
    var metricsToken: String? = nil
    /// The peers whose `X-Forwarded-For` the access log believes.
    var trustedProxies = TrustedProxies()
    /// PARLEY_TEST_HOOKS=1: an admin write may carry `Parley-Test-Hold-Ms: N` (at most 10,000)
    /// and then waits N ms after its handler ran, before its last statement (its numbers
    /// taken; on PostgreSQL its locks held, its transaction usually not yet begun). Tests
    /// use it to hold one writer while others run. An admin read with it takes its snapshot
    /// (a first statement), then waits N ms before its handler runs: writers commit meanwhile.
    var testHooks = false
}

/// The application's responder: the router of Routes.table with its middleware
/// (Operations/RequestMiddleware.swift), given each request as Routes.routable shapes it.
struct ParleyResponder: HTTPResponder {
    typealias Context = ParleyRequestContext
    private let router: RouterResponder<ParleyRequestContext>

    init(runner: RequestRunner, config: ServerConfig, logger: Logger) {
        let endpoint = Endpoint(runner: runner, config: config)
        router = Routes.router(logger: logger, trustedProxies: config.trustedProxies, serve: endpoint.handle).buildResponder()
    }

    func respond(to request: Request, context: ParleyRequestContext) async throws -> Response {
        let routable = Routes.routable(request)
        if routable.method != request.method { context.record.method = request.method.rawValue }
        return try await router.respond(to: routable, context: context)
    }

    static func json(_ value: JSON, status: Int = 200) -> Response {
        var buffer = ByteBuffer()
        buffer.writeString(value.serialized())
        return Response(
            status: HTTPResponse.Status(code: status),
            headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: buffer))
    }

    /// What a 503 asks the client to wait before it retries.
    static let retryAfterSeconds = 1

    /// The largest JSON body accepted (PROTOCOL.md §1).
    static let jsonBodyLimit = 1_048_576
}

/// A request the router matched to a handler (unknown paths and methods never get here, so
/// they are 404 and 405 without credentials).
struct Endpoint: Sendable {
    let runner: RequestRunner
    let config: ServerConfig

    /// GET /metrics: with a metrics token configured, only for `Authorization: Bearer TOKEN`.
    static func metrics(_ request: Request, runner: RequestRunner, config: ServerConfig) async throws -> Response {
        if let token = config.metricsToken {
            guard let given = request.headers[.authorization], given == "Bearer " + token else {
                throw APIError(status: 401, code: 400108, message: "/metrics needs \"Authorization: Bearer\" with the metrics token.")
            }
        }
        var buffer = ByteBuffer()
        buffer.writeBytes(await ServerMetrics.shared.exposition(shared: runner.shared))
        return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                        body: ResponseBody(byteBuffer: buffer))
    }

    @Sendable func handle(_ handler: RouteHandler, route: String, request: Request, params: PathParameters,
                          record: RequestRecord, connection: any Channel) async throws -> Response {
        let rawPath = request.head.path ?? "/"
        let queryPart = rawPath.firstIndex(of: "?").map { rawPath[rawPath.index(after: $0)...] }
        let method = request.method.rawValue.uppercased()
        let contentType = request.headers[.contentType] ?? ""
        if case .health(let probe) = handler { return await Health.answer(probe, runner: runner) }
        if case .metrics = handler { return try await Self.metrics(request, runner: runner, config: config) }

        // Credentials and size before a byte of the body is read: a stranger's request, or an
        // oversized one, costs no more than its head. A first login is committed here, so
        // that a refused request later leaves nothing half done in memory (which would cost a
        // reload of everything from storage). The request checks them again where it runs, so
        // this check needs no snapshot of its own: on PostgreSQL its one statement reads the
        // session with its user's version (a cached user whose version differs is read by a
        // second one).
        // A key found valid in the last seconds is not read again here (`RecentSessions`).
        let now = nowMillis()
        var caller: Caller? = nil
        if try !Caller.hasAdminToken(request.headers, apiToken: config.apiToken) {
            let key = request.headers[HTTPField.Name("Session-Key")!]
            if let key, let recent = runner.shared.recentSessions.caller(key: key, now: now) {
                caller = recent
            } else {
                let checked = try await runner.run(readOnly: true, statementByStatement: true) { state in
                    try await state.authenticate(request.headers, apiToken: config.apiToken, now: now)
                }
                if let key, let userId = checked.userId { runner.shared.recentSessions.note(key: key, userId: userId, now: now) }
                caller = checked
            }
        }
        let (body, bodyObject) = try await Self.readBody(request, contentType: contentType, config: config)
        let query = Query(queryPart)
        if let field = Input.fieldWithNUL(body: bodyObject, query: query) { throw APIError.invalid(field, Input.nulMessage) }

        var ctx = Ctx(
            method: method, route: route, params: params, input: Input(body: bodyObject, query: query),
            caller: Caller(isAdmin: false, userId: nil), now: nowMillis(), rawBody: body,
            contentType: contentType, headers: request.headers, record: record)

        if case .events = handler {
            return try await EventStream.open(runner: runner, config: config, ctx: ctx, connection: connection)
        }
        if case .outside(let handler) = handler {
            let reply = try await handler(runner, ctx, config.apiToken)
            return Self.response(reply)
        }
        let run: Handler
        let hints: RouteHints
        switch handler {
        case .plain(let handler, let routeHints):
            run = handler
            hints = routeHints
        case .prepared(let prepare, let handler, let routeHints):
            try prepare(&ctx)
            run = handler
            hints = routeHints
        default:
            throw APIError.notFound("Route")
        }
        let holdMilliseconds = config.testHooks
            ? request.headers[HTTPField.Name("Parley-Test-Hold-Ms")!].flatMap { Int($0) }.map { min(max($0, 0), 5_000) } : nil
        // A statement the database refuses, after the handler: the request fails in the
        // database itself, inside whatever transaction it shares with others. `last`: in the
        // request's last statement (which may carry its transaction's COMMIT); `commit`: at
        // the COMMIT (a row of `parley_test_fails_at_commit`, a table with a deferred check
        // the test made, that the check refuses).
        let failure = config.testHooks ? request.headers[HTTPField.Name("Parley-Test-Fail-Statement")!] : nil
        let failsStatement = failure == "1" || failure == "last" || failure == "commit"
        var firstReads = Self.firstReads(ctx, hints: hints, caller: caller)
        // The hooks' pause and failing statement belong where the usual write runs, under its locks.
        if holdMilliseconds != nil || failsStatement { firstReads.inOneFlight = false }
        let reply = try await runner.run(readOnly: method == "GET" || method == "HEAD", channel: params[.channelURL],
                                         firstReads: firstReads,
                                         readsNow: hints.contains(.readsNow)) { state in
            ctx.caller = try await state.authenticate(ctx.headers, apiToken: config.apiToken, now: ctx.now)
            record.caller = ctx.caller.isAdmin ? "admin" : ctx.caller.userId ?? "-"
            if let holdMilliseconds, ctx.caller.isAdmin, state.readOnly {
                _ = try await state.db.query("SELECT 1", [])
                try await Task.sleep(for: .milliseconds(holdMilliseconds))
            }
            let reply = try await run(state, &ctx)
            if let holdMilliseconds, ctx.caller.isAdmin, !state.readOnly {
                try await Task.sleep(for: .milliseconds(holdMilliseconds))
            }
            if failsStatement, ctx.caller.isAdmin, !state.readOnly {
                switch failure {
                case "last":
                    try await state.db.executeHeld(SQLWrite(sql: "INSERT INTO parley_test_no_such_table VALUES (1)", binds: [],
                                                            table: "parley_test_no_such_table"))
                case "commit":
                    try await state.db.executeHeld(SQLWrite(sql: "INSERT INTO parley_test_fails_at_commit VALUES (0)", binds: [],
                                                            table: "parley_test_fails_at_commit"))
                default:
                    try await state.db.execute("INSERT INTO parley_test_no_such_table VALUES (1)", [])
                }
            }
            return reply
        }
        return Self.response(reply)
    }

    /// What a write's first statement may read for the handler (`FirstReads`): the session
    /// its own check of the credentials reads, and a send's earlier send with the request id
    /// and sender its body names. Each is used only if the handler asks exactly it.
    private static func firstReads(_ ctx: Ctx, hints: RouteHints, caller: Caller?) -> FirstReads {
        var reads = FirstReads(takesMessageId: hints.contains(.sendsMessage))
        reads.inOneFlight = hints.contains(.sendsMessage)
        reads.leavesMembersOut = hints.contains(.sendsMessage)
        if hints.contains(.sendsMessage) {
            // The session's user is read with the session; the admin names the sender.
            if caller == nil, let sender = (try? ctx.input.string("user_id")) ?? nil { reads.users.append(sender) }
            if let mentioned = (try? ctx.input.stringList("mentioned_user_ids")) ?? nil {
                reads.users += Messages.mentionable(mentioned)
            }
        }
        reads.sessionKey = caller == nil ? nil : ctx.headers[HTTPField.Name("Session-Key")!]
        if hints.contains(.sendsMessage), let channel = ctx.params[.channelURL],
           let requestId = (try? ctx.input.string("req_id")) ?? (try? ctx.input.string("dedup_id")) ?? nil {
            // A session's user sends as themselves; the admin names the sender, or none.
            let sender = caller?.userId ?? (try? ctx.input.string("user_id")) ?? nil
            reads.earlierSend = EarlierSendKey(channel: channel, sender: sender ?? "", requestId: requestId)
        }
        return reads
    }

    private static func response(_ reply: Reply) -> Response {
        switch reply {
        case .json(let value):
            return ParleyResponder.json(value)
        case .file(let bytes, let type):
            var buffer = ByteBuffer()
            buffer.writeBytes(bytes)
            return Response(status: .ok, headers: [.contentType: type], body: ResponseBody(byteBuffer: buffer))
        }
    }

    /// The body, read up to the limit of its kind (a multipart upload's or a JSON body's),
    /// and parsed unless it is multipart or blank.
    private static func readBody(_ request: Request, contentType: String, config: ServerConfig) async throws
        -> (bytes: [UInt8], object: JSONObject) {
        let isMultipart = contentType.lowercased().hasPrefix("multipart/form-data")
        let limit = isMultipart ? config.uploadLimit + 1_048_576 : ParleyResponder.jsonBodyLimit
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            throw isMultipart ? APIError.tooLarge : APIError.bodyTooLarge
        }
        var request = request
        let body: [UInt8]
        do {
            // Stops reading (and fails) past the limit, whatever Content-Length said.
            let buffer = try await request.collectBody(upTo: limit)
            body = Array(buffer.readableBytesView)
        } catch {
            throw isMultipart ? APIError.tooLarge : APIError.bodyTooLarge
        }
        var bodyObject = JSONObject()
        if !isMultipart && !body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            let parsed: JSON
            do { parsed = try JSONParser.parse(body) } catch { throw APIError.malformed(error.message) }
            guard case .object(let o) = parsed else { throw APIError.malformed("the body must be a JSON object.") }
            bodyObject = o
        }
        return (body, bodyObject)
    }
}
