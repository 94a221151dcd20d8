import AsyncHTTPClient
import Foundation
import NIOCore

// Message translation (PROTOCOL.md §7.8, docs/SERVER.md "Translation"). The server translates
// nothing itself: it asks the operator's translator URL and stores the answer as the message's
// `translations`, which every later rendering of the message carries (events, lists,
// changelogs).
//
// - `translate_message` asks at once and answers with the translated message: the request
//   waits for the translator, at most its timeout.
// - A send with `target_languages` is not held up: the call is queued with the send (the
//   webhooks' queue, OutgoingCalls/HookDeliveries.swift), and the answer, once it comes, is
//   stored and announced as `message_updated`. A translator that is slow or down delays the
//   translations (tried again with the queue's backoff), never the message.

/// The translator the configuration names (Config/Settings.swift).
struct TranslatorSettings: Sendable, Equatable {
    /// Nil: translation is refused as not configured.
    var url: String? = nil
    var timeoutSeconds = 5.0
    var concurrency = 4
}

protocol TranslationRecords: AnyObject {
    var translator: TranslatorSettings { get }
    func queueHookCall(_ call: QueuedHookCall)
}

enum Translation {
    static let category = "translation"
    /// Languages one request may ask for.
    static let maxLanguages = 10

    static let notConfigured = APIError(
        status: 400, code: 400920,
        message: "Translation is not configured on this server: it has no translator URL (docs/SERVER.md, \"Translation\").")

    /// The languages a request asks for: `target_languages` (the SDK's name) or `target_langs`
    /// (the platform API's); nil when neither is given. Each a language tag such as `fr` or
    /// `zh-Hans`, at most `maxLanguages`, each once.
    static func requestedLanguages(_ input: Input) throws -> [String]? {
        let field = input.has("target_languages") ? "target_languages" : "target_langs"
        guard let given = try input.stringList(field) else { return nil }
        var languages: [String] = []
        for tag in given where !languages.contains(tag) {
            let valid = !tag.isEmpty && tag.utf8.count <= 35 && tag.utf8.allSatisfy { byte in
                (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F
            }
            guard valid else { throw APIError.invalid(field, "must hold language tags such as \"fr\" or \"zh-Hans\", not '\(tag)'.") }
            languages.append(tag)
        }
        if languages.count > maxLanguages { throw APIError.invalid(field, "holds more than \(maxLanguages) languages.") }
        return languages
    }

    /// What a send asks to be translated into, checked before it is stored: a send naming
    /// languages fails when no translator is configured, and for a file message.
    static func languagesForSend(_ input: Input, type: String, _ s: some TranslationRecords) throws -> [String] {
        guard let languages = try requestedLanguages(input), !languages.isEmpty else { return [] }
        guard s.translator.url != nil else { throw notConfigured }
        if type == "FILE" { throw APIError.invalid("target_languages", "applies to user and admin messages, not file messages.") }
        return languages
    }

    /// The body of a call to the translator.
    static func requestBody(channelUrl: String, messageId: Int64, text: String, languages: [String], now: Int64) -> String {
        JSON.obj([
            ("category", .string(category)), ("ts", .int(now)), ("channel_url", .string(channelUrl)), ("channel_type", "group"),
            ("message_id", .int(messageId)), ("text", .string(text)), ("target_languages", .strings(languages)),
        ]).serialized()
    }

    /// After a send that asked for languages is stored: queues the call with it.
    static func queueForNewMessage(_ s: some TranslationRecords, _ m: MessageRecord, languages: [String], now: Int64) {
        guard !languages.isEmpty, let url = s.translator.url else { return }
        s.queueHookCall(QueuedHookCall(endpoint: url, category: category, channelUrl: m.channelUrl,
                                       body: requestBody(channelUrl: m.channelUrl, messageId: m.id, text: m.message,
                                                         languages: languages, now: now)))
    }

    /// The translations of an answer `{"translations": {language: text}}`, of the languages
    /// asked for; or what is wrong with it.
    static func parseAnswer(_ text: String, languages: [String]) -> Result<[String: String], TranslatorFailure> {
        guard case .object(let o)? = try? JSONParser.parse(text), case .object(let found)? = o["translations"] else {
            return .failure(TranslatorFailure("the translator's answer is not {\"translations\": {language: text}}"))
        }
        var out: [String: String] = [:]
        for language in languages {
            switch found[language] {
            case .string(let translated)?: out[language] = translated
            case nil, .null?: continue
            default: return .failure(TranslatorFailure("the translator's answer holds a \(language) translation that is not a string"))
            }
        }
        return .success(out)
    }

    struct TranslatorFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Stores translations on the message and tells its channel (`message_updated`), unless
    /// it was deleted or its text changed since the translator was asked. `updated_at` stays:
    /// the message itself did not change.
    static func store(_ s: some Messages.Needs, channelUrl: String, messageId: Int64, text: String,
                      translations: [String: String], now: Int64) async throws -> MessageRecord? {
        guard var c = try await s.channelIfExists(channelUrl), var m = try await s.messageRecord(messageId),
              m.channelUrl == channelUrl, m.message == text else { return nil }
        if translations.isEmpty { return m }
        m.translations = (m.translations ?? [:]).merging(translations) { _, new in new }
        try await Messages.announceUpdate(s, &c, &m, now: now, channelChanged: c.lastMessageId == m.id)
        return m
    }

    // MARK: the queued calls of sends

    /// The worker's handler of a translator's answer to a queued call: nil when stored (or
    /// no longer wanted), else why not (the call is then tried again).
    static func applyQueuedAnswer(_ call: ClaimedHookCall, answer: String, runner: RequestRunner) async -> String? {
        guard case .object(let asked)? = try? JSONParser.parse(call.body), case .string(let url)? = asked["channel_url"],
              case .int(let id)? = asked["message_id"], case .string(let text)? = asked["text"],
              case .array(let list)? = asked["target_languages"] else { return nil }
        let languages = list.compactMap { value -> String? in if case .string(let s) = value { return s } else { return nil } }
        switch parseAnswer(answer, languages: languages) {
        case .failure(let failure): return failure.description
        case .success(let translations):
            do {
                _ = try await runner.run(channel: url) { s in
                    try await store(s, channelUrl: url, messageId: id, text: text, translations: translations, now: nowMillis())
                }
                return nil
            } catch {
                return "the translations could not be stored: \(error)"
            }
        }
    }

    // MARK: translate_message

    /// Calls to the translator made while a request waits (queued calls go through the worker's client).
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// `POST /v3/group_channels/{channel_url}/messages/{message_id}/translation`: translates a
    /// user or admin message into `target_langs` / `target_languages` (default: the caller's
    /// preferred languages), stores the translations and answers the message. Runs outside
    /// any transaction while the translator works: a read, the call, then a write.
    static func translateMessage(_ runner: RequestRunner, _ ctx: Ctx, apiToken: String) async throws -> Reply {
        let channelUrl = try ctx.param(.channelURL)
        let messageId = try ctx.messageId
        let asked = try await runner.run(readOnly: true) { s -> (text: String, languages: [String]) in
            var ctx = ctx
            ctx.caller = try await s.authenticate(ctx.headers, apiToken: apiToken, now: ctx.now)
            let settings = s.translator
            guard settings.url != nil else { throw notConfigured }
            let c = try await s.channel(channelUrl)
            let m = try await s.message(c, messageId)
            let reader = try s.readerMember(c, ctx)
            if !s.isVisible(m, to: reader) { throw APIError.notFound("Message \(messageId)") }
            if m.type == "FILE" { throw APIError.invalid("message_id", "names a file message; only user and admin messages are translated.") }
            var languages = try requestedLanguages(ctx.input) ?? []
            if languages.isEmpty, let me = ctx.caller.userId ?? reader?.userId {
                languages = Array(try await s.user(me).preferredLanguages.prefix(maxLanguages))
            }
            if languages.isEmpty { throw APIError.missing("target_langs") }
            return (m.message, languages)
        }
        let shared = runner.shared.webhooks.defaults
        guard let url = shared.translator.url else { throw notConfigured }
        let body = requestBody(channelUrl: channelUrl, messageId: messageId, text: asked.text, languages: asked.languages, now: ctx.now)
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "parley-server/\(ServerVersion.string)")
        request.headers.add(name: HookSignature.header, value: HookSignature.value(body: body, secret: shared.secret ?? apiToken))
        request.headers.add(name: "X-Parley-Event", value: category)
        request.body = .bytes(ByteBuffer(string: body))
        let answer: String
        do {
            let response = try await client.execute(request, timeout: .milliseconds(Int64(shared.translator.timeoutSeconds * 1000)))
            let bytes = try await response.body.collect(upTo: 1 << 20)
            guard (200..<300).contains(Int(response.status.code)) else {
                ServerMetrics.shared.hookDelivery(endpoint: url, outcome: "failed")
                throw APIError(status: 502, code: 500903, message: "The translator failed: it answered \(response.status.code).")
            }
            answer = String(buffer: bytes)
        } catch let error as APIError {
            throw error
        } catch {
            ServerMetrics.shared.hookDelivery(endpoint: url, outcome: "failed")
            if let client = error as? HTTPClientError, client == .deadlineExceeded || client == .readTimeout || client == .connectTimeout {
                throw APIError(status: 504, code: 500904,
                               message: "The translator did not answer within \(shared.translator.timeoutSeconds) s.")
            }
            throw APIError(status: 502, code: 500903, message: "The translator could not be reached: \(error).")
        }
        let translations: [String: String]
        switch parseAnswer(answer, languages: asked.languages) {
        case .success(let found): translations = found
        case .failure(let failure):
            ServerMetrics.shared.hookDelivery(endpoint: url, outcome: "failed")
            throw APIError(status: 502, code: 500903, message: "The translator failed: \(failure).")
        }
        ServerMetrics.shared.hookDelivery(endpoint: url, outcome: "delivered")
        let json = try await runner.run(channel: channelUrl) { s -> JSON in
            _ = try await s.authenticate(ctx.headers, apiToken: apiToken, now: ctx.now)
            guard let m = try await store(s, channelUrl: channelUrl, messageId: messageId, text: asked.text,
                                          translations: translations, now: nowMillis()) else {
                throw APIError(status: 409, code: 400204, message: "The message was changed or deleted while it was translated; ask again.")
            }
            return try await s.render(m, .full)
        }
        return .json(json)
    }
}
