import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// What a route tells the request runner before its handler runs (`RequestRunner.run`).
struct RouteHints: OptionSet, Sendable {
    let rawValue: Int
    /// The request most likely stores one new message: on PostgreSQL the writer takes its id
    /// with its first statement.
    static let sendsMessage = RouteHints(rawValue: 1 << 0)
    /// The request answers with a changelog's "now": on PostgreSQL the hub first catches up
    /// with every commit made so far.
    static let readsNow = RouteHints(rawValue: 1 << 1)
}

enum RouteHandler: Sendable {
    case plain(Handler, RouteHints = [])
    /// A handler whose request is first worked on outside the write lock (CPU work on its body:
    /// Messages.prepareUpload makes the thumbnails of an upload), not yet authorized for it.
    case prepared(@Sendable (inout Ctx) throws -> Void, Handler, RouteHints = [])
    /// A handler that runs its own transactions around an outgoing call it waits for
    /// (OutgoingCalls/Translation.swift), given the admin token to authenticate with.
    case outside(@Sendable (RequestRunner, Ctx, _ apiToken: String) async throws -> Reply)
    /// The event stream: a long-lived response, opened outside `RequestRunner.run` (Services/EventStream.swift).
    case events
    /// A health check: answered before any credential check (Services/Health.swift).
    case health(HealthProbe)
    /// Prometheus text; open, or behind the metrics token (Operations/Metrics.swift).
    case metrics
}

/// The named parameters of the route templates. Handlers read them through `Ctx.param`.
enum PathParameter: String, Sendable {
    case channelURL = "channel_url"
    case userId = "user_id"
    case messageId = "message_id"
    /// A metadata or metacounter key.
    case key
    case fileId = "file_id"
    case pollId = "poll_id"
    case optionId = "option_id"
    /// A push token's platform (`gcm`, `apns`, `huawei`), and a token.
    case tokenType = "token_type"
    case pushToken = "push_token"
}

/// The path parameters of one request, each percent-decoded once.
struct PathParameters: Sendable {
    private var values: [(PathParameter, String)] = []

    init() {}

    /// Hummingbird captures the raw segment text; the protocol's identifiers are the decoded text.
    /// Only the template's own parameters are taken (the router may leave captures behind from
    /// a branch it tried and left).
    init(_ captured: Parameters, names: [PathParameter]) {
        for name in names {
            if let value = captured[Substring(name.rawValue)] {
                values.append((name, percentDecode(value, plusIsSpace: false)))
            }
        }
    }

    /// The parameters a template names (":channel_url" …). A name that is no PathParameter is
    /// a mistake in the table, found when the server starts.
    static func names(in template: String) -> [PathParameter] {
        template.split(separator: "/").filter { $0.first == ":" }.map { segment in
            guard let name = PathParameter(rawValue: String(segment.dropFirst())) else {
                preconditionFailure("route \(template): unknown parameter \(segment)")
            }
            return name
        }
    }

    subscript(_ parameter: PathParameter) -> String? {
        values.first { $0.0 == parameter }?.1
    }
}

/// Path templates (":name" is a parameter, see PathParameter; "*" a segment nobody reads)
/// → handlers per method. The one table the router is built from.
enum Routes {
    static let table: [(String, [HTTPRequest.Method: RouteHandler])] = [
        ("/health/live", [.get: .health(.live)]),
        ("/health/ready", [.get: .health(.ready)]),
        ("/metrics", [.get: .metrics]),
        ("/v3/applications/settings", [.get: .plain(ApplicationAdmin.getSettings), .put: .plain(ApplicationAdmin.updateSettings),
                                        .delete: .plain(ApplicationAdmin.resetSettings)]),
        ("/v3/applications/settings/webhook", [.get: .plain(WebhookAdmin.getSettings), .put: .plain(WebhookAdmin.updateSettings),
                                                .delete: .plain(WebhookAdmin.resetSettings)]),
        ("/v3/applications/settings/webhook/deliveries", [.get: .plain(WebhookAdmin.deliveries)]),
        ("/v3/users", [.get: .plain(Users.list), .post: .plain(Users.create)]),
        ("/v3/users/:user_id", [.get: .plain(Users.get), .put: .plain(Users.update), .delete: .plain(Users.delete)]),
        ("/v3/users/:user_id/token", [.post: .plain(Users.issueToken)]),
        ("/v3/users/:user_id/unread_message_count", [.get: .plain(Users.unreadMessageCount)]),
        ("/v3/users/:user_id/unread_channel_count", [.get: .plain(Users.unreadChannelCount)]),
        ("/v3/users/:user_id/mark_as_read_all", [.put: .plain(Users.markAllAsRead)]),
        ("/v3/users/:user_id/channel_invitation_preference", [.get: .plain(Users.getInvitationPreference), .put: .plain(Users.setInvitationPreference)]),
        ("/v3/users/:user_id/push", [.delete: .plain(Push.unregisterAll)]),
        ("/v3/users/:user_id/push/:token_type", [.get: .plain(Push.list), .post: .plain(Push.register), .delete: .plain(Push.unregisterType)]),
        ("/v3/users/:user_id/push/:token_type/:push_token", [.delete: .plain(Push.unregister)]),
        ("/v3/users/:user_id/push_preference", [.get: .plain(Push.getPreference), .put: .plain(Push.setPreference)]),
        ("/v3/users/:user_id/push_preference/:channel_url", [.get: .plain(Push.getChannelPreference), .put: .plain(Push.setChannelPreference)]),
        ("/v3/users/:user_id/my_group_channels", [.get: .plain(Channels.listMine)]),
        ("/v3/users/:user_id/my_group_channels/changelogs", [.get: .plain(Sync.channelChangelogs, .readsNow)]),
        ("/v3/users/:user_id/my_group_channels/leave", [.put: .plain(Users.leaveAll)]),
        ("/v3/users/:user_id/events", [.get: .events]),
        ("/v3/group_channels", [.get: .plain(Channels.listAll), .post: .plain(Channels.create)]),
        ("/v3/group_channels/:channel_url", [.get: .plain(Channels.get), .put: .plain(Channels.update), .delete: .plain(Channels.delete)]),
        ("/v3/group_channels/:channel_url/invite", [.post: .plain(Channels.invite)]),
        ("/v3/group_channels/:channel_url/accept", [.put: .plain(Channels.accept)]),
        ("/v3/group_channels/:channel_url/decline", [.put: .plain(Channels.decline)]),
        ("/v3/group_channels/:channel_url/join", [.put: .plain(Channels.join)]),
        ("/v3/group_channels/:channel_url/leave", [.put: .plain(Channels.leave)]),
        ("/v3/group_channels/:channel_url/freeze", [.put: .plain(Moderation.freeze)]),
        ("/v3/group_channels/:channel_url/hide", [.put: .plain(Channels.hide), .delete: .plain(Channels.unhide)]),
        ("/v3/group_channels/:channel_url/reset_user_history", [.put: .plain(Channels.resetHistory)]),
        ("/v3/group_channels/:channel_url/typing", [.post: .plain(Channels.startTyping), .delete: .plain(Channels.endTyping)]),
        ("/v3/group_channels/:channel_url/members", [.get: .plain(Channels.members)]),
        ("/v3/group_channels/:channel_url/members/:user_id", [.get: .plain(Channels.isMember)]),
        ("/v3/group_channels/:channel_url/operators", [.get: .plain(Moderation.listOperators), .post: .plain(Moderation.addOperators), .delete: .plain(Moderation.removeOperators)]),
        ("/v3/group_channels/:channel_url/ban", [.get: .plain(Moderation.listBans), .post: .plain(Moderation.ban)]),
        ("/v3/group_channels/:channel_url/ban/:user_id", [.get: .plain(Moderation.getBan), .delete: .plain(Moderation.unban)]),
        ("/v3/group_channels/:channel_url/mute", [.get: .plain(Moderation.listMutes), .post: .plain(Moderation.mute)]),
        ("/v3/group_channels/:channel_url/mute/:user_id", [.get: .plain(Moderation.getMute), .delete: .plain(Moderation.unmute)]),
        ("/v3/group_channels/:channel_url/metadata", [.get: .plain(Meta.getAll), .post: .plain(Meta.create), .put: .plain(Meta.updateMany), .delete: .plain(Meta.deleteAll)]),
        ("/v3/group_channels/:channel_url/metadata/:key", [.get: .plain(Meta.getOne), .put: .plain(Meta.updateOne), .delete: .plain(Meta.deleteOne)]),
        ("/v3/group_channels/:channel_url/metacounter", [.get: .plain(Meta.getAll), .post: .plain(Meta.create), .put: .plain(Meta.updateMany), .delete: .plain(Meta.deleteAll)]),
        ("/v3/group_channels/:channel_url/metacounter/:key", [.get: .plain(Meta.getOne), .put: .plain(Meta.updateOne), .delete: .plain(Meta.deleteOne)]),
        ("/v3/group_channels/:channel_url/messages", [.get: .plain(Messages.list), .post: .prepared(Messages.prepareUpload, Messages.send, .sendsMessage)]),
        // Literal segments are matched before a parameter in the same place (".../messages/:message_id").
        ("/v3/group_channels/:channel_url/messages/mark_as_read", [.put: .plain(Channels.markAsRead)]),
        ("/v3/group_channels/:channel_url/messages/mark_as_delivered", [.put: .plain(Channels.markAsDelivered)]),
        ("/v3/group_channels/:channel_url/messages/total_count", [.get: .plain(Messages.totalCount)]),
        ("/v3/group_channels/:channel_url/messages/changelogs", [.get: .plain(Sync.messageChangelogs, .readsNow)]),
        ("/v3/group_channels/:channel_url/messages_gap", [.get: .plain(Sync.messagesGap)]),
        ("/v3/group_channels/:channel_url/messages/:message_id", [.get: .plain(Messages.get), .put: .plain(Messages.update), .delete: .plain(Messages.delete)]),
        ("/v3/group_channels/:channel_url/messages/:message_id/reactions", [.get: .plain(Messages.listReactions), .post: .plain(Messages.addReaction), .delete: .plain(Messages.removeReaction)]),
        ("/v3/group_channels/:channel_url/messages/:message_id/pin", [.post: .plain(Messages.pin), .delete: .plain(Messages.unpin)]),
        ("/v3/group_channels/:channel_url/messages/:message_id/copy", [.post: .plain(Messages.copy)]),
        ("/v3/group_channels/:channel_url/messages/:message_id/translation", [.post: .outside(Translation.translateMessage)]),
        ("/v3/group_channels/:channel_url/messages/:message_id/sorted_metaarray", [.post: .plain(Messages.addMetaArray), .put: .plain(Messages.updateMetaArray)]),
        ("/v3/group_channels/:channel_url/polls", [.get: .plain(Polls.list), .post: .plain(Polls.create)]),
        ("/v3/group_channels/:channel_url/polls/changelogs", [.get: .plain(Polls.changelogs, .readsNow)]),
        ("/v3/group_channels/:channel_url/polls/:poll_id", [.get: .plain(Polls.get), .put: .plain(Polls.update), .delete: .plain(Polls.delete)]),
        ("/v3/group_channels/:channel_url/polls/:poll_id/close", [.put: .plain(Polls.close)]),
        ("/v3/group_channels/:channel_url/polls/:poll_id/vote", [.put: .plain(Polls.vote)]),
        ("/v3/group_channels/:channel_url/polls/:poll_id/options", [.post: .plain(Polls.addOption)]),
        ("/v3/group_channels/:channel_url/polls/:poll_id/options/:option_id", [.put: .plain(Polls.updateOption), .delete: .plain(Polls.deleteOption)]),
        ("/v3/group_channels/:channel_url/polls/:poll_id/options/:option_id/voters", [.get: .plain(Polls.voters)]),
        ("/v3/search/messages", [.get: .plain(Search.messages)]),
        ("/v3/files/:file_id", [.get: .plain(Files.download)]),
        ("/v3/files/:file_id/*", [.get: .plain(Files.download)]),
        ("/v3/report", [.get: .plain(Reports.list)]),
        ("/v3/report/group_channels/:channel_url", [.post: .plain(Reports.reportChannel)]),
        ("/v3/report/group_channels/:channel_url/messages/:message_id", [.post: .plain(Reports.reportMessage)]),
        ("/v3/report/users/:user_id", [.post: .plain(Reports.reportUser)]),
    ]

    /// The methods some route has. The router sees every other method as `otherMethod`.
    static let servedMethods: Set<HTTPRequest.Method> = [.get, .head, .post, .put, .delete]
    /// Stands for any method outside `servedMethods` (PATCH, OPTIONS, ...): every path has it,
    /// as a 405, so that one registration answers them all.
    static let otherMethod = HTTPRequest.Method("X-PARLEY-OTHER")!

    /// The router for the table. `serve` runs a matched handler, given the route's template,
    /// its decoded parameters, the request's record and its connection.
    static func router(
        logger: Logger, trustedProxies: TrustedProxies,
        serve: @escaping @Sendable (RouteHandler, _ template: String, Request, PathParameters, RequestRecord, any Channel) async throws -> Response
    ) -> Router<ParleyRequestContext> {
        // HEAD gets the GET handler's answer without its body.
        let router = Router(context: ParleyRequestContext.self, options: .autoGenerateHeadEndpoints)
        // Added first, so they wrap every route and the not-found answer (outermost first).
        router.add(middleware: RequestObservation(logger: logger, trustedProxies: trustedProxies))
        router.add(middleware: ErrorResponses(logger: logger))
        for (template, handlers) in table {
            let path = RouterPath(template)
            let names = PathParameters.names(in: template)
            for (method, handler) in handlers {
                router.on(path, method: method) { request, context in
                    context.record.route = template
                    return try await serve(handler, template, request, PathParameters(context.parameters, names: names), context.record,
                                     context.connection)
                }
            }
            // The event stream answers HEAD as it answers GET (a stream left open), not with a
            // generated head of a response whose body would never be read.
            if case .events = handlers[.get] {
                router.on(path, method: .head) { request, context in
                    context.record.route = template
                    return try await serve(.events, template, request, PathParameters(context.parameters, names: names), context.record,
                                     context.connection)
                }
            }
            // Hummingbird hands a known path with another method to its not-found responder;
            // the protocol answers 405 there, before any credentials are looked at.
            for method in servedMethods.union([otherMethod]) where handlers[method] == nil {
                if method == .head && handlers[.get] != nil { continue }
                router.on(path, method: method) { _, context -> Response in
                    context.record.route = template
                    throw APIError.methodNotAllowed
                }
            }
        }
        // Added last, so it wraps only the not-found responder: an unknown path gets the JSON 404.
        router.add(middleware: UnknownRoute())
        return router
    }

    /// The request as the router should see it. Parley decodes each path segment before
    /// matching it (so "%75sers" is "users", and "a%2Fb" is one segment "a/b"), while
    /// Hummingbird matches the raw text: a path with escapes is handed on re-encoded so that
    /// only characters outside [A-Za-z0-9-._~] are escaped. The parameters are then decoded
    /// once (PathParameters). A method no route has becomes `otherMethod`.
    static func routable(_ request: Request) -> Request {
        let method = servedMethods.contains(request.method) ? request.method : otherMethod
        let rawPath = request.head.path ?? "/"
        let queryStart = rawPath.firstIndex(of: "?") ?? rawPath.endIndex
        let pathPart = rawPath[..<queryStart]
        let hasEscapes = pathPart.utf8.contains(UInt8(ascii: "%"))
        if method == request.method && !hasEscapes { return request }
        var head = request.head
        head.method = method
        if hasEscapes {
            let segments = pathPart.split(separator: "/").map { percentEncodePathSegment(percentDecode($0, plusIsSpace: false)) }
            head.path = "/" + segments.joined(separator: "/") + rawPath[queryStart...]
        }
        return Request(head: head, body: request.body)
    }
}

/// Turns the router's not-found answer into the protocol's JSON 404.
struct UnknownRoute<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            throw APIError.notFound("Route")
        }
    }
}
