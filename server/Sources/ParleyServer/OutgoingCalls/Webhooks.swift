import Foundation
import Synchronization

// Webhooks (PROTOCOL.md §6.6): the operator subscribes URLs to categories of events; each
// event of a subscribed category is queued for each such URL in the transaction of the change
// that caused it, and sent once that commits (OutgoingCalls/HookDeliveries.swift).
// The configuration (Config/Settings.swift) gives the endpoints a database starts with; the
// admin API stores endpoints in the database, which every server on it reads, and those win.

/// What an operator may subscribe an endpoint to.
enum WebhookCategory: String, CaseIterable, Sendable, Comparable {
    case messageSent = "message_sent"
    case messageUpdated = "message_updated"
    case messageDeleted = "message_deleted"
    case channelCreated = "channel_created"
    case channelChanged = "channel_changed"
    case channelDeleted = "channel_deleted"
    case memberJoined = "member_joined"
    case memberLeft = "member_left"
    case memberInvited = "member_invited"
    case report
    case pollVoted = "poll_voted"

    static func < (a: WebhookCategory, b: WebhookCategory) -> Bool { a.rawValue < b.rawValue }

    static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }

    /// The category of a stream event (PROTOCOL.md §9) that a webhook reports with its fields;
    /// the others are queued where they happen, since their stream events do not exist
    /// (`channel_created`, `report`), carry no channel (`channel_deleted`) or also stand for
    /// other changes (`channel_changed`).
    init?(streamEvent category: String) {
        switch category {
        case "message_received": self = .messageSent
        case "message_updated": self = .messageUpdated
        case "message_deleted": self = .messageDeleted
        case "user_joined": self = .memberJoined
        case "user_left": self = .memberLeft
        case "invitation_received": self = .memberInvited
        case "poll_voted": self = .pollVoted
        default: return nil
        }
    }
}

/// One subscribed URL.
struct WebhookEndpoint: Sendable, Equatable {
    var url: String
    var categories: [WebhookCategory]
    /// How long one delivery may take, connection included.
    var timeoutSeconds: Double
    /// Deliveries to this URL in flight at once, per server.
    var concurrency: Int

    static let timeoutRange: ClosedRange<Double> = 0.1...300
    static let concurrencyRange: ClosedRange<Int> = 1...64

    var json: JSON {
        .obj([("url", .string(url)), ("categories", .strings(categories.map(\.rawValue))),
              ("timeout_seconds", .double(timeoutSeconds)), ("concurrency", .int(Int64(concurrency)))])
    }

    /// An `http://` or `https://` URL with a host; the error says what is wrong with it.
    static func checkURL(_ text: String) -> String? {
        guard text.utf8.count <= 2048 else { return "is longer than 2048 bytes" }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            return "'\(text)' is not an http:// or https:// URL"
        }
        guard let host = url.host, !host.isEmpty else { return "'\(text)' names no host" }
        return nil
    }

    /// Category names, comma-separated or listed; `*` or `all` for every category.
    static func parseCategories(_ names: [String]) -> Result<[WebhookCategory], WebhookSettingsError> {
        var found = Set<WebhookCategory>()
        for raw in names {
            let name = raw.trimmingCharacters(in: .whitespaces).lowercased()
            if name.isEmpty { continue }
            if name == "*" || name == "all" {
                found.formUnion(WebhookCategory.allCases)
                continue
            }
            guard let category = WebhookCategory(rawValue: name) else {
                return .failure(WebhookSettingsError("unknown category '\(raw)' (known: \(WebhookCategory.names), or *)"))
            }
            found.insert(category)
        }
        if found.isEmpty { return .failure(WebhookSettingsError("no category given (known: \(WebhookCategory.names), or *)")) }
        return .success(found.sorted())
    }
}

struct WebhookSettingsError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The subscribed endpoints.
struct WebhookSettings: Sendable, Equatable {
    var endpoints: [WebhookEndpoint] = []

    static let maxEndpoints = 20
    /// The row of `application_settings` holding the endpoints the admin API stored (JSON).
    static let storedName = "webhook"

    var json: JSON {
        .obj([("endpoints", .array(endpoints.map(\.json))), ("categories", .strings(WebhookCategory.allCases.map(\.rawValue)))])
    }

    /// The endpoints of a JSON list (the admin API's body, or what it stored), each checked;
    /// timeouts and concurrency not given are `defaults`'.
    static func parse(_ value: JSON, defaults: HookDefaults) -> Result<WebhookSettings, WebhookSettingsError> {
        guard case .array(let items) = value else { return .failure(WebhookSettingsError("\"endpoints\" must be a list of objects")) }
        if items.count > maxEndpoints { return .failure(WebhookSettingsError("\"endpoints\" holds more than \(maxEndpoints) endpoints")) }
        var settings = WebhookSettings()
        for (index, item) in items.enumerated() {
            let place = "endpoints[\(index)]"
            guard case .object(let o) = item else { return .failure(WebhookSettingsError("\(place) must be an object")) }
            for key in o.keys where !["url", "categories", "timeout_seconds", "concurrency"].contains(key) {
                return .failure(WebhookSettingsError("\(place): unknown field \"\(key)\" (known: url, categories, timeout_seconds, concurrency)"))
            }
            guard case .string(let url)? = o["url"] else { return .failure(WebhookSettingsError("\(place).url is required (a string)")) }
            if let problem = WebhookEndpoint.checkURL(url) { return .failure(WebhookSettingsError("\(place).url \(problem)")) }
            if settings.endpoints.contains(where: { $0.url == url }) {
                return .failure(WebhookSettingsError("\(place).url '\(url)' is listed twice"))
            }
            var names: [String] = []
            switch o["categories"] {
            case .array(let list)?:
                for entry in list {
                    guard case .string(let name) = entry else { return .failure(WebhookSettingsError("\(place).categories must be a list of strings")) }
                    names.append(name)
                }
            case .string(let text)?: names = text.split(separator: ",").map(String.init)
            case nil, .null?: return .failure(WebhookSettingsError("\(place).categories is required (known: \(WebhookCategory.names), or *)"))
            default: return .failure(WebhookSettingsError("\(place).categories must be a list of strings"))
            }
            let categories: [WebhookCategory]
            switch WebhookEndpoint.parseCategories(names) {
            case .success(let parsed): categories = parsed
            case .failure(let error): return .failure(WebhookSettingsError("\(place).categories: \(error)"))
            }
            var endpoint = WebhookEndpoint(url: url, categories: categories, timeoutSeconds: defaults.timeoutSeconds,
                                           concurrency: defaults.concurrency)
            switch o["timeout_seconds"] {
            case nil, .null?: break
            case .int(let value)? where WebhookEndpoint.timeoutRange.contains(Double(value)): endpoint.timeoutSeconds = Double(value)
            case .double(let value)? where WebhookEndpoint.timeoutRange.contains(value): endpoint.timeoutSeconds = value
            default:
                return .failure(WebhookSettingsError("\(place).timeout_seconds must be a number of seconds in 0.1...300"))
            }
            switch o["concurrency"] {
            case nil, .null?: break
            case .int(let value)? where WebhookEndpoint.concurrencyRange.contains(Int(value)): endpoint.concurrency = Int(value)
            default: return .failure(WebhookSettingsError("\(place).concurrency must be a whole number in 1...64"))
            }
            settings.endpoints.append(endpoint)
        }
        return .success(settings)
    }

    /// The endpoints subscribed to `category`.
    func endpoints(for category: WebhookCategory) -> [WebhookEndpoint] {
        endpoints.filter { $0.categories.contains(category) }
    }
}

/// The webhook settings of the configuration (Config/Settings.swift).
struct HookDefaults: Sendable, Equatable {
    /// The endpoints where the database stores none.
    var settings = WebhookSettings()
    var timeoutSeconds = 10.0
    var concurrency = 4
    /// Attempts of one delivery before it is given up (`failed` in the log).
    var maxAttempts = 10
    /// The longest pause between two attempts; the pauses double from 1 s up to it.
    var retryMaxSeconds = 300.0
    /// The key of the signature (nil: the admin API token).
    var secret: String? = nil
    /// The other endpoints the queue calls, with the same retries and signature.
    var push = PushGatewaySettings()
    var translator = TranslatorSettings()

    /// The push gateway and the translator as endpoints of the queue (no categories: they
    /// take the calls queued for them by URL).
    var serviceEndpoints: [WebhookEndpoint] {
        var found: [WebhookEndpoint] = []
        if let url = push.url {
            found.append(WebhookEndpoint(url: url, categories: [], timeoutSeconds: push.timeoutSeconds, concurrency: push.concurrency))
        }
        if let url = translator.url {
            found.append(WebhookEndpoint(url: url, categories: [], timeoutSeconds: translator.timeoutSeconds,
                                         concurrency: translator.concurrency))
        }
        return found
    }
}

/// The endpoints in force on this server, as the database last said (read every second by
/// the delivery worker, and set at once by this server's admin API). A write request reads
/// them here rather than in its transaction, so that a send costs no extra statement.
final class WebhookRegistry: Sendable {
    let defaults: HookDefaults
    private let current: Mutex<WebhookSettings>
    /// Wakes the delivery worker (set once it runs).
    private let wakeHandler = Mutex<(@Sendable () -> Void)?>(nil)

    init(defaults: HookDefaults) {
        self.defaults = defaults
        current = Mutex(defaults.settings)
    }

    var settings: WebhookSettings { current.withLock { $0 } }

    /// The stored row over the configuration's endpoints (an unreadable row, which a newer
    /// server may have written, counts as none).
    func resolved(stored: String?) -> WebhookSettings {
        guard let stored, case .object(let o)? = try? JSONParser.parse(stored), let list = o["endpoints"],
              case .success(let parsed) = WebhookSettings.parse(list, defaults: defaults)
        else { return defaults.settings }
        return parsed
    }

    func update(_ settings: WebhookSettings) { current.withLock { $0 = settings } }

    func onWake(_ handler: @escaping @Sendable () -> Void) { wakeHandler.withLock { $0 = handler } }

    /// After a commit that may have queued deliveries.
    func wake() {
        guard !current.withLock({ $0.endpoints.isEmpty }) || !defaults.serviceEndpoints.isEmpty else { return }
        wakeHandler.withLock { $0 }?()
    }
}

/// One delivery as the log shows it.
struct HookDeliveryRecord: Sendable {
    let id: Int64
    let endpoint: String
    let category: String
    let channelUrl: String
    let status: String
    let attempts: Int64
    let lastStatusCode: Int64?
    let lastError: String?
    let createdAt: Int64
    let nextAttemptAt: Int64
    let finishedAt: Int64?

    var json: JSON {
        .obj([
            ("delivery_id", .int(id)), ("endpoint", .string(endpoint)), ("category", .string(category)),
            ("channel_url", channelUrl.isEmpty ? nil : .string(channelUrl)), ("status", .string(status)),
            ("attempts", .int(attempts)), ("last_status_code", lastStatusCode.map { .int($0) }),
            ("last_error", lastError.map { .string($0) }), ("created_at", .int(createdAt)),
            ("next_attempt_at", status == HookQueue.pending ? .int(nextAttemptAt) : nil),
            ("finished_at", finishedAt.map { .int($0) }),
        ])
    }
}

/// The webhook settings and the delivery log, in the request's transaction.
protocol WebhookRecords: AnyObject {
    /// The configuration's webhook settings.
    var hookDefaults: HookDefaults { get }
    /// The endpoints in force: the stored ones, else the configuration's.
    func webhookSettings() async throws -> WebhookSettings
    /// Stores the endpoints (nil: the configuration's again).
    func storeWebhookSettings(_ settings: WebhookSettings?) async throws
    /// The newest deliveries first, ids below `before`, of one status if given.
    func hookDeliveries(status: String?, before: Int64?, limit: Int) async throws -> [HookDeliveryRecord]
    /// Queues an event of `category` for the endpoints subscribed to it, with the request's
    /// changes. `fields` follow `category`, `ts` and `channel_url` in the body.
    func queueWebhook(_ category: WebhookCategory, channelUrl: String?, fields: [(String, JSON?)], now: Int64)
}

enum WebhookAdmin {
    typealias Needs = WebhookRecords

    /// `GET /v3/applications/settings/webhook`: the endpoints in force (admin only).
    static func getSettings(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        return .json(try await s.webhookSettings().json)
    }

    /// `PUT /v3/applications/settings/webhook`: replaces the endpoints (`[]`: none).
    static func updateSettings(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        guard let list = ctx.input.body["endpoints"], list != .null else { throw APIError.missing("endpoints") }
        switch WebhookSettings.parse(list, defaults: s.hookDefaults) {
        case .success(let settings):
            try await s.storeWebhookSettings(settings)
            return .json(settings.json)
        case .failure(let error):
            throw APIError(status: 400, code: 400100, message: "Invalid webhook settings: \(error).")
        }
    }

    /// `DELETE /v3/applications/settings/webhook`: back to the configuration's endpoints.
    static func resetSettings(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        try await s.storeWebhookSettings(nil)
        return .json(try await s.webhookSettings().json)
    }

    /// `GET /v3/applications/settings/webhook/deliveries`: the delivery log, newest first.
    static func deliveries(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        try ctx.requireAdmin()
        let limit = try ctx.input.limit(default: 20, max: 200)
        let status = try ctx.input.string("status")
        if let status, !HookQueue.statuses.contains(status) {
            throw APIError.invalid("status", "must be one of: \(HookQueue.statuses.joined(separator: ", ")).")
        }
        var before: Int64? = nil
        if let token = try ctx.input.string("token") {
            guard let key = decodeToken(token), key.count == 1, case .int(let id) = key[0] else { throw APIError.badToken() }
            before = id
        }
        let rows = try await s.hookDeliveries(status: status, before: before, limit: limit + 1)
        let page = Array(rows.prefix(limit))
        let next = rows.count > limit ? encodeToken([.int(page.last!.id)]) : ""
        return .json(.obj([("deliveries", .array(page.map(\.json))), ("next", .string(next))]))
    }
}
