import Foundation

// Push notifications (PROTOCOL.md §5.1, docs/SERVER.md "Push notifications"). The server
// reaches no APNs, FCM or HMS itself: for each new message it decides which members are to be
// notified and queues one call to the operator's push gateway, in the send's transaction, on
// the queue of the webhooks (OutgoingCalls/HookDeliveries.swift); the notifications of members
// online at the send are held until it is known whether the event reached them (`PushHold`).
// The gateway talks to the platforms. Users register their devices' tokens and set when they
// want to be notified.

/// The push gateway the configuration names (Config/Settings.swift).
struct PushGatewaySettings: Sendable, Equatable {
    /// Nil: no gateway; tokens and preferences are still kept, nothing is sent.
    var url: String? = nil
    var timeoutSeconds = 10.0
    var concurrency = 4
    /// The notification's title and body; the placeholders are `PushTemplate.placeholders`.
    var titleTemplate = "{channel_name}"
    var bodyTemplate = "{sender_nickname}: {message}"
}

/// The platforms a device token is for, by the path segment that names them (the
/// platform API's names, and the issuers' own as aliases).
enum PushTokenType: String, Sendable, CaseIterable {
    case gcm, apns, huawei

    init?(pathSegment: String) {
        switch pathSegment.lowercased() {
        case "gcm", "fcm": self = .gcm
        case "apns": self = .apns
        case "huawei", "hms": self = .huawei
        default: return nil
        }
    }

    /// The body field the platform API names the token by (a plain `token` is also taken).
    var bodyField: String {
        switch self {
        case .gcm: "gcm_reg_token"
        case .apns: "apns_device_token"
        case .huawei: "huawei_device_token"
        }
    }

    /// As answers and gateway calls name it.
    var answerName: String { rawValue.uppercased() }

    /// Tokens one user keeps per type; registering one more drops the oldest.
    static let limitPerUser = 20
}

struct PushToken: Sendable, Equatable {
    let type: PushTokenType
    let token: String
}

/// When a user is notified: `push_trigger_option` and the quiet times.
struct PushPreference: Sendable, Equatable {
    static let triggerOptions = ["all", "mention_only", "off"]
    /// Per channel: `default` follows the user's option.
    static let channelTriggerOptions = ["default", "all", "mention_only", "off"]

    var triggerOption = "all"
    var doNotDisturb = false
    var startHour = 0, startMinute = 0, endHour = 0, endMinute = 0
    /// An IANA time zone name; the do-not-disturb window is in its local time.
    var timeZone = "UTC"
    var snoozeEnabled = false
    var snoozeStart: Int64 = 0, snoozeEnd: Int64 = 0

    var json: JSON {
        .obj([
            ("push_trigger_option", .string(triggerOption)), ("do_not_disturb", .bool(doNotDisturb)),
            ("start_hour", .int(Int64(startHour))), ("start_min", .int(Int64(startMinute))),
            ("end_hour", .int(Int64(endHour))), ("end_min", .int(Int64(endMinute))),
            ("timezone", .string(timeZone)), ("snooze_enabled", .bool(snoozeEnabled)),
            ("snooze_start_ts", .int(snoozeStart)), ("snooze_end_ts", .int(snoozeEnd)),
        ])
    }

    /// Whether the user asked for quiet at `now` (ms): do not disturb, from start (inclusive)
    /// to end (exclusive) in local time, past midnight when end is before start, the whole
    /// day when they are equal; or a snooze from its start (inclusive) to its end (exclusive).
    func isQuiet(at now: Int64) -> Bool {
        if snoozeEnabled && snoozeStart <= now && now < snoozeEnd { return true }
        guard doNotDisturb, let zone = TimeZone(identifier: timeZone) else { return false }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let local = calendar.dateComponents([.hour, .minute], from: Date(timeIntervalSince1970: Double(now) / 1000))
        let minute = (local.hour ?? 0) * 60 + (local.minute ?? 0)
        let start = startHour * 60 + startMinute, end = endHour * 60 + endMinute
        if start == end { return true }
        return start < end ? (start <= minute && minute < end) : (minute >= start || minute < end)
    }

    /// The fields of `input` over this preference, each checked.
    func updated(by input: Input) throws -> PushPreference {
        var p = self
        p.triggerOption = try input.enumValue("push_trigger_option", Self.triggerOptions, default: triggerOption)
        p.doNotDisturb = try input.bool("do_not_disturb") ?? doNotDisturb
        p.startHour = Int(try input.int("start_hour", min: 0, max: 23) ?? Int64(startHour))
        p.startMinute = Int(try input.int("start_min", min: 0, max: 59) ?? Int64(startMinute))
        p.endHour = Int(try input.int("end_hour", min: 0, max: 23) ?? Int64(endHour))
        p.endMinute = Int(try input.int("end_min", min: 0, max: 59) ?? Int64(endMinute))
        if let zone = try input.string("timezone", maxBytes: 64) {
            guard TimeZone(identifier: zone) != nil else {
                throw APIError.invalid("timezone", "is not a time zone name (IANA, such as \"Europe/Paris\" or \"UTC\").")
            }
            p.timeZone = zone
        }
        p.snoozeEnabled = try input.bool("snooze_enabled") ?? snoozeEnabled
        p.snoozeStart = try input.int("snooze_start_ts", min: 0) ?? snoozeStart
        p.snoozeEnd = try input.int("snooze_end_ts", min: 0) ?? snoozeEnd
        if p.snoozeEnabled && p.snoozeEnd <= p.snoozeStart {
            throw APIError.invalid("snooze_end_ts", "must be after snooze_start_ts while snooze_enabled is true.")
        }
        return p
    }
}

/// What a send asks of its push notification.
struct PushDeliveryRequest: Sendable {
    /// `suppress` (or the platform API's `send_push: false`): no member is notified.
    var suppressed = false
    /// `apple_critical_alert_options` as given (`name`, `volume`), checked.
    var criticalAlert: JSON? = nil

    init() {}

    init(_ input: Input) throws {
        let option = try input.enumValue("push_notification_delivery_option", ["default", "suppress"], default: "default")
        let sendPush = try input.bool("send_push")
        suppressed = option == "suppress" || sendPush == false
        guard let alert = try input.object("apple_critical_alert_options") else { return }
        for key in alert.keys where key != "name" && key != "volume" {
            throw APIError.invalid("apple_critical_alert_options", "has an unknown field \"\(key)\" (known: name, volume).")
        }
        var fields: [(String, JSON?)] = []
        switch alert["name"] {
        case .string(let name)? where !name.isEmpty && name.utf8.count <= 256: fields.append(("name", .string(name)))
        case nil: fields.append(("name", .string("default")))
        default: throw APIError.invalid("apple_critical_alert_options.name", "must be a sound name (1 to 256 bytes).")
        }
        switch alert["volume"] {
        case .int(let v)? where v == 0 || v == 1: fields.append(("volume", .double(Double(v))))
        case .double(let v)? where (0...1).contains(v): fields.append(("volume", .double(v)))
        case nil: fields.append(("volume", .double(1)))
        default: throw APIError.invalid("apple_critical_alert_options.volume", "must be a number from 0 to 1.")
        }
        criticalAlert = .obj(fields)
    }
}

/// The title and body of a notification: the configured templates with their placeholders
/// filled. An unknown `{name}` stays as written.
enum PushTemplate {
    static let placeholders = ["channel_name", "channel_url", "sender_id", "sender_nickname", "message", "file_name"]

    static func fill(_ template: String, _ values: [String: String]) -> String {
        var out = ""
        var rest = template[...]
        while let open = rest.firstIndex(of: "{") {
            out += rest[..<open]
            guard let close = rest[open...].firstIndex(of: "}"),
                  let value = values[String(rest[rest.index(after: open)..<close])] else {
                out += "{"
                rest = rest[rest.index(after: open)...]
                continue
            }
            out += value
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }
}

/// The tokens, preferences and counts the push decision reads, in the request's transaction.
protocol PushRecords: AnyObject {
    var pushGateway: PushGatewaySettings { get }
    func pushTokens(of users: [String], type: PushTokenType?) async throws -> [String: [PushToken]]
    func addPushToken(_ token: PushToken, for userId: String, now: Int64) async throws
    /// Removes the user's tokens (of one type, or one token, if given); returns those removed.
    func removePushTokens(of userId: String, type: PushTokenType?, token: String?) async throws -> [String]
    func pushPreferences(of users: [String]) async throws -> [String: PushPreference]
    func savePushPreference(_ p: PushPreference, for userId: String) async throws
    /// The channel's per-user options other than `default`, of `users`.
    func channelPushTriggers(_ channelUrl: String, users: [String]) async throws -> [String: String]
    func saveChannelPushTrigger(_ option: String, for userId: String, in channelUrl: String) async throws
    /// Each user's unread messages in their joined channels other than `channelUrl`.
    func unreadMessages(of users: [String], besides channelUrl: String) async throws -> [String: Int64]
    func isOnline(_ userId: String) -> Bool
    /// Queues a call to a configured endpoint with the request's changes.
    func queueHookCall(_ call: QueuedHookCall)
    /// Holds a notification of a member who is online, once the request commits (`PushHold`).
    func holdPush(_ push: HeldPush)
}

/// A notification of one member who had an event stream open at the send: it goes to the
/// gateway only if the event does not reach them (`PushHold`).
struct HeldPush: Sendable {
    let userId: String
    let call: QueuedHookCall
    /// The newest event of the send addressed to the member: it reached them once a stream
    /// wrote it and was not lost.
    var eventId: Int64 = 0
}

/// The notifications held for members who were online at the send. The event reaches a
/// member through a stream of this server that wrote it and then stayed open, or was closed
/// by the client (`reached`); it may not when their streams end just then: a stream the
/// client closes ends at once, dropping what it had not written, and one whose connection is
/// lost without a close ends within `ConnectionEndHandler.unacknowledgedLimitMillis` of the
/// event's write to it. So a held notification goes to the gateway if, within `windowMillis`
/// of the commit, the member has no stream left on any server and no stream of this server
/// delivered the event; it is dropped once one did, or at the end of the window. Kept in
/// memory: a server that stops drops those it holds.
final class PushHold: @unchecked Sendable {
    static let windowMillis = Int64(ConnectionEndHandler.unacknowledgedLimitMillis) + 3_000
    /// How often the held members' presence is looked at.
    static let checkNanos: UInt64 = 100_000_000

    private let mutex = NSLock()
    private var held: [(push: HeldPush, until: Int64)] = []
    private var watching = false
    private var release: (@Sendable ([QueuedHookCall]) async -> Void)?
    private let isOnline: @Sendable (String) -> Bool

    init(isOnline: @escaping @Sendable (String) -> Bool) {
        self.isOnline = isOnline
    }

    /// `release` queues the calls of the notifications that go out (in a transaction of its own).
    func start(release: @escaping @Sendable ([QueuedHookCall]) async -> Void) {
        mutex.withLock { self.release = release }
    }

    /// A stream of the user ended having written the events up to `through` to a connection
    /// that was not lost: their held notifications of those events are dropped.
    func reached(_ userId: String, through: Int64) {
        mutex.withLock {
            if held.isEmpty { return }
            held.removeAll { $0.push.userId == userId && $0.push.eventId <= through }
        }
    }

    /// Held notifications of a request that committed now.
    func hold(_ pushes: [HeldPush]) {
        if pushes.isEmpty { return }
        let until = nowMillis() + Self.windowMillis
        let starts: Bool = mutex.withLock {
            held += pushes.map { (push: $0, until: until) }
            defer { watching = true }
            return !watching
        }
        if starts { Task { await self.watch() } }
    }

    private func watch() async {
        while true {
            try? await Task.sleep(nanoseconds: Self.checkNanos)
            let now = nowMillis()
            let (due, stops, release): ([QueuedHookCall], Bool, (@Sendable ([QueuedHookCall]) async -> Void)?) = mutex.withLock {
                var due: [QueuedHookCall] = []
                held.removeAll { entry in
                    if !isOnline(entry.push.userId) {
                        due.append(entry.push.call)
                        return true
                    }
                    return entry.until <= now
                }
                // The next `hold` starts a new watch.
                if held.isEmpty { watching = false }
                return (due, held.isEmpty, self.release)
            }
            if !due.isEmpty, let release { await release(due) }
            if stops { return }
        }
    }
}

enum Push {
    typealias Needs = PushRecords & UserRecords & ChannelRecords & Rendering

    /// Recipients per gateway call: a bigger channel's notification is several calls.
    static let recipientsPerCall = 100
    static let category = "push"

    // MARK: deciding

    /// After a new message is stored: queues the gateway call for the members to notify.
    /// Notified: joined members but the sender who can see the message, have a token, and
    /// whose options say so (the channel's over their own: `all`, or `mention_only` when
    /// mentioned; not `off`), outside their quiet times (a critical alert still reaches their
    /// APNs devices then). A silent message notifies nobody. Members with no open event
    /// stream on any server are notified with the send; those with one are held (`PushHold`),
    /// and notified only if the event does not reach them.
    static func notify(_ s: some Needs, _ m: MessageRecord, in c: ChannelRecord, request: PushDeliveryRequest, now: Int64) async throws {
        guard let gateway = s.pushGateway.url, !request.suppressed, !m.silent else { return }
        let candidates = c.members.values
            .filter { $0.state == "joined" && $0.userId != m.senderId && s.isVisible(m, to: $0) }
            .map(\.userId).sorted()
        if candidates.isEmpty { return }
        let tokens = try await s.pushTokens(of: candidates, type: nil)
        let withTokens = candidates.filter { tokens[$0]?.isEmpty == false }
        if withTokens.isEmpty { return }
        let preferences = try await s.pushPreferences(of: withTokens)
        let channelOptions = try await s.channelPushTriggers(c.url, users: withTokens)
        let mentioned: Set<String> = m.mentionType == "channel"
            ? Set(withTokens) : Set(m.mentionedUserIds)
        var chosen: [(user: String, tokens: [PushToken], mentioned: Bool)] = []
        for user in withTokens {
            let preference = preferences[user] ?? PushPreference()
            let option = channelOptions[user].flatMap { $0 == "default" ? nil : $0 } ?? preference.triggerOption
            let isMentioned = mentioned.contains(user)
            guard option == "all" || (option == "mention_only" && isMentioned) else { continue }
            var devices = tokens[user] ?? []
            if preference.isQuiet(at: now) {
                guard request.criticalAlert != nil else { continue }
                devices = devices.filter { $0.type == .apns }
            }
            if !devices.isEmpty { chosen.append((user, devices, isMentioned)) }
        }
        if chosen.isEmpty { return }
        try await s.loadUsers([m.senderId].compactMap { $0 } + chosen.map(\.user))
        let badges = try await s.unreadMessages(of: chosen.map(\.user), besides: c.url)
        let sender = m.senderId.flatMap { s.loadedUser($0) }
        let values = [
            "channel_name": c.name, "channel_url": c.url, "sender_id": m.senderId ?? "",
            "sender_nickname": sender?.nickname ?? "", "message": m.type == "FILE" ? (m.file?.name ?? "") : m.message,
            "file_name": m.file?.name ?? "",
        ]
        let settings = s.pushGateway
        let title = PushTemplate.fill(settings.titleTemplate, values)
        let body = PushTemplate.fill(settings.bodyTemplate, values)
        func recipient(_ r: (user: String, tokens: [PushToken], mentioned: Bool)) -> JSON {
            .obj([
                ("user_id", .string(r.user)),
                ("tokens", .array(r.tokens.map { .obj([("type", .string($0.type.answerName)), ("token", .string($0.token))]) })),
                ("title", .string(title)), ("body", .string(body)),
                ("badge", .int(badges[r.user, default: 0] + s.unreadCounts(c, r.user).messages)),
                ("mentioned", .bool(r.mentioned)),
            ])
        }
        func call(_ recipients: [JSON]) -> QueuedHookCall {
            let json = JSON.obj([
                ("category", .string(category)), ("ts", .int(now)), ("channel_url", .string(c.url)), ("channel_type", "group"),
                ("channel", .obj([("channel_url", .string(c.url)), ("name", .string(c.name)), ("custom_type", .string(c.customType))])),
                ("message_id", .int(m.id)), ("message_type", .string(m.type)),
                ("sender", m.senderId.map { id in JSON.obj([("user_id", .string(id)), ("nickname", .string(sender?.nickname ?? ""))]) }),
                ("push_notification_delivery_option", "default"),
                ("apple_critical_alert_options", request.criticalAlert),
                ("recipients", .array(recipients)),
            ])
            return QueuedHookCall(endpoint: gateway, category: category, channelUrl: c.url, body: json.serialized())
        }
        let online = Set(chosen.map(\.user).filter { s.isOnline($0) })
        let offline = chosen.filter { !online.contains($0.user) }
        for part in stride(from: 0, to: offline.count, by: recipientsPerCall) {
            s.queueHookCall(call(offline[part..<min(offline.count, part + recipientsPerCall)].map(recipient)))
        }
        for r in chosen where online.contains(r.user) {
            s.holdPush(HeldPush(userId: r.user, call: call([recipient(r)])))
        }
    }

    // MARK: routes

    private static func tokenType(_ ctx: Ctx) throws -> PushTokenType {
        let segment = try ctx.param(.tokenType)
        guard let type = PushTokenType(pathSegment: segment) else {
            throw APIError.invalid("token_type", "must be gcm (or fcm), apns or huawei (or hms), not '\(segment)'.")
        }
        return type
    }

    private static func owner(_ s: some Needs, _ ctx: Ctx) async throws -> UserRecord {
        let u = try await s.user(ctx.param(.userId))
        try ctx.requireSelfOrAdmin(u.userId)
        return u
    }

    /// `POST /v3/users/{user_id}/push/{token_type}`: registers a device token.
    static func register(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let type = try tokenType(ctx)
        guard let token = try ctx.input.string(type.bodyField, maxBytes: 4096) ?? ctx.input.string("token", maxBytes: 4096) else {
            throw APIError.missing(type.bodyField)
        }
        if token.isEmpty || token.contains(where: { $0.isWhitespace }) {
            throw APIError.invalid(type.bodyField, "must be a device token (not empty, no spaces).")
        }
        try await s.addPushToken(PushToken(type: type, token: token), for: u.userId, now: ctx.now)
        return .json(.obj([("token", .string(token)), ("type", .string(type.answerName)), ("user", s.userJSON(u))]))
    }

    /// `GET /v3/users/{user_id}/push/{token_type}`: the user's tokens of a type, oldest first.
    static func list(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let type = try tokenType(ctx)
        let tokens = try await s.pushTokens(of: [u.userId], type: type)[u.userId] ?? []
        return .json(.obj([("tokens", .strings(tokens.map(\.token))), ("type", .string(type.answerName)),
                           ("user", s.userJSON(u)), ("has_more", false), ("next", "")]))
    }

    /// `DELETE /v3/users/{user_id}/push/{token_type}/{push_token}`: unregisters one token.
    static func unregister(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let removed = try await s.removePushTokens(of: u.userId, type: tokenType(ctx), token: ctx.param(.pushToken))
        return .json(.obj([("token", .strings(removed)), ("user", s.userJSON(u))]))
    }

    /// `DELETE /v3/users/{user_id}/push/{token_type}`: unregisters the user's tokens of a type.
    static func unregisterType(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let removed = try await s.removePushTokens(of: u.userId, type: tokenType(ctx), token: nil)
        return .json(.obj([("token", .strings(removed)), ("user", s.userJSON(u))]))
    }

    /// `DELETE /v3/users/{user_id}/push`: unregisters every token of the user.
    static func unregisterAll(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let removed = try await s.removePushTokens(of: u.userId, type: nil, token: nil)
        return .json(.obj([("token", .strings(removed)), ("user", s.userJSON(u))]))
    }

    /// `GET /v3/users/{user_id}/push_preference`.
    static func getPreference(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        return .json((try await s.pushPreferences(of: [u.userId])[u.userId] ?? PushPreference()).json)
    }

    /// `PUT /v3/users/{user_id}/push_preference`: changes the fields given.
    static func setPreference(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let old = try await s.pushPreferences(of: [u.userId])[u.userId] ?? PushPreference()
        let new = try old.updated(by: ctx.input)
        try await s.savePushPreference(new, for: u.userId)
        return .json(new.json)
    }

    /// `GET /v3/users/{user_id}/push_preference/{channel_url}`: the user's option for a
    /// channel they are a member of.
    static func getChannelPreference(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let c = try await memberChannel(s, u.userId, ctx)
        let option = try await s.channelPushTriggers(c.url, users: [u.userId])[u.userId] ?? "default"
        return .json(.obj([("push_trigger_option", .string(option))]))
    }

    /// `PUT /v3/users/{user_id}/push_preference/{channel_url}`: `default` follows the user's own.
    static func setChannelPreference(_ s: some Needs, _ ctx: inout Ctx) async throws -> Reply {
        let u = try await owner(s, ctx)
        let c = try await memberChannel(s, u.userId, ctx)
        guard ctx.input.has("push_trigger_option") else { throw APIError.missing("push_trigger_option") }
        let option = try ctx.input.enumValue("push_trigger_option", PushPreference.channelTriggerOptions, default: "default")
        try await s.saveChannelPushTrigger(option, for: u.userId, in: c.url)
        return .json(.obj([("push_trigger_option", .string(option))]))
    }

    private static func memberChannel(_ s: some Needs, _ userId: String, _ ctx: Ctx) async throws -> ChannelRecord {
        let c = try await s.channel(ctx.param(.channelURL))
        guard c.members[userId] != nil else { throw APIError.forbidden("\(userId) is not a member of this channel.") }
        return c
    }
}
